//! The one place for SQL, on SQLite or PostgreSQL through sqlx's `Any` driver: sessions and tokens here, replay frames
//! (`frames`), tasks and push configs (`tasks`), the audit trail and A202 streams (`records`),
//! idempotency/v1's cache (`idempotency`).
//! Migrations are embedded and applied on open; the schema sticks to portable types.

mod frames;
mod idempotency;
mod nodes;
mod records;
mod retention;
mod tasks;
pub use frames::*;
pub use idempotency::*;
pub use nodes::*;
pub use records::*;
pub use tasks::*;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, AssertSqlSafe, Row};
use tokio::sync::{mpsc, watch};

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// The last write that had to be retried has not succeeded yet.
    refusing: Arc<watch::Sender<bool>>,
    /// Task writes go to one writer, which writes them in groups (`tasks::TaskWriter`).
    task_writes: mpsc::Sender<TaskWrite>,
}

/// The database a store runs on: SQLite embedded (one node), or PostgreSQL shared by the
/// nodes of a cluster. The SQL is the same on both (numbered parameters, portable
/// functions); each has its own migrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Set on every SQLite connection: write-ahead logging, a sync at checkpoints only, 5 s of
/// waiting for a lock before a write fails, and enforced foreign keys.
const SQLITE_PRAGMAS: [&str; 4] = [
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA busy_timeout = 5000",
    "PRAGMA foreign_keys = ON",
];

/// A `sqlite:` URL for a file, created when missing.
fn sqlite_url(path: &Path) -> String {
    let path = path.to_string_lossy();
    let escaped = path
        .replace('%', "%25")
        .replace('?', "%3F")
        .replace('#', "%23");
    format!("sqlite://{escaped}?mode=rwc")
}

/// A `sqlite:` URL as given, creating the file when it names no `mode`.
fn creating(url: &str) -> String {
    match url.split_once('?') {
        Some((_, params)) if params.split('&').any(|p| p.starts_with("mode=")) => url.to_owned(),
        Some(_) => format!("{url}&mode=rwc"),
        None => format!("{url}?mode=rwc"),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub instance_id: String,
    /// The node it runs on ('' for one stored before nodes).
    pub node_id: String,
    pub label: Option<String>,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: std::collections::BTreeMap<String, String>,
    pub backend: String,
    pub class: String,
    pub cols: u16,
    pub rows: u16,
    pub state: String,
    pub exit_code: Option<i32>,
    pub close_reason: Option<String>,
    pub last_sequence: u64,
    /// Every retained frame after this sequence is in the store (0: nothing pruned yet).
    pub replay_floor: u64,
    /// The session may have handed out sequences up to this one (see `reserve_sequences`).
    pub sequence_reserved: u64,
    pub created_at: i64,
    pub closed_at: Option<i64>,
    /// A sandboxed session's workspace.
    pub workspace: Option<String>,
    /// A sandboxed session's limits (JSON).
    pub sandbox: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TokenRow {
    pub id: String,
    pub scope: String,
    pub session_id: Option<String>,
    pub label: Option<String>,
    pub kind: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

pub struct NewToken<'a> {
    pub id: &'a str,
    pub hash: &'a str,
    pub scope: &'a str,
    pub session_id: Option<&'a str>,
    pub label: Option<&'a str>,
    pub kind: &'a str,
    pub created_at: i64,
    pub expires_at: Option<i64>,
}

impl Store {
    /// Opens the database named by `url` (`sqlite:` or `postgres:`), or `DIR/ptyhost.db`,
    /// creating a SQLite file when missing, and applies the migrations of its backend. On
    /// PostgreSQL the migrations run under an advisory lock, so nodes that start together
    /// do not race.
    pub async fn open(database_url: Option<&str>, data_dir: &Path) -> Result<Store> {
        sqlx::any::install_default_drivers();
        let (url, backend) = match database_url {
            Some(url) if url.starts_with("sqlite:") => (creating(url), Backend::Sqlite),
            Some(url) if url.starts_with("postgres:") || url.starts_with("postgresql:") => {
                (url.to_owned(), Backend::Postgres)
            }
            Some(url) => anyhow::bail!(
                "unsupported database url {url}: use sqlite:PATH or postgres://USER@HOST/DB"
            ),
            None => {
                std::fs::create_dir_all(data_dir)
                    .with_context(|| format!("creating data dir {}", data_dir.display()))?;
                (sqlite_url(&data_dir.join("ptyhost.db")), Backend::Sqlite)
            }
        };
        let options =
            AnyConnectOptions::from_str(&url).with_context(|| format!("bad database url {url}"))?;
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 16,
            })
            // A database that went away fails a query in seconds (and `/readyz` with it),
            // not after sqlx's default half minute.
            .acquire_timeout(Duration::from_secs(5))
            // sqlx pings a connection before handing it out: on SQLite that is a second
            // trip to the connection's thread for every query, for a file that cannot go
            // away; a PostgreSQL connection can, so it is still checked.
            .test_before_acquire(backend == Backend::Postgres)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        for pragma in SQLITE_PRAGMAS {
                            sqlx::query(pragma).execute(&mut *conn).await?;
                        }
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .context("opening the database")?;
        match backend {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite").run(&pool).await,
            Backend::Postgres => sqlx::migrate!("./migrations/postgres").run(&pool).await,
        }
        .context("applying migrations")?;
        Ok(Store {
            task_writes: TaskWriter::start(pool.clone()),
            pool,
            backend,
            refusing: Arc::new(watch::Sender::new(false)),
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Runs `write` until it succeeds, backing off from 50 ms to 1 s; the store counts as
    /// refusing writes meanwhile (`refusing_writes`, which turns `/readyz` red).
    pub async fn until_written<T, F, Fut>(&self, what: &str, mut write: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut delay = Duration::from_millis(50);
        let mut attempt = 1u32;
        loop {
            match write().await {
                Ok(done) => {
                    self.set_refusing(false);
                    return done;
                }
                Err(e) => {
                    self.set_refusing(true);
                    tracing::warn!(error = %format!("{e:#}"), attempt, "{what} failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                    attempt += 1;
                }
            }
        }
    }

    fn set_refusing(&self, refusing: bool) {
        self.refusing
            .send_if_modified(|r| std::mem::replace(r, refusing) != refusing);
    }

    /// Whether the store refuses writes now (a full disk, a read-only file).
    pub fn refusing_writes(&self) -> bool {
        *self.refusing.borrow()
    }

    /// Follows `refusing_writes` as it changes.
    pub fn refusal(&self) -> watch::Receiver<bool> {
        self.refusing.subscribe()
    }

    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    // ---- tokens ----

    pub async fn insert_token(&self, t: NewToken<'_>) -> Result<()> {
        sqlx::query(
            "INSERT INTO tokens (id, hash, scope, session_id, label, kind, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(t.id)
        .bind(t.hash)
        .bind(t.scope)
        .bind(t.session_id)
        .bind(t.label)
        .bind(t.kind)
        .bind(t.created_at)
        .bind(t.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = $1"
        )))
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(token_row))
    }

    pub async fn count_tokens(&self) -> Result<i64> {
        Ok(sqlx::query("SELECT COUNT(*) FROM tokens")
            .fetch_one(&self.pool)
            .await?
            .get(0))
    }

    /// Tokens, optionally only the live share links of one session.
    pub async fn list_tokens(&self, share_links_of: Option<(&str, i64)>) -> Result<Vec<TokenRow>> {
        let rows = match share_links_of {
            None => {
                sqlx::query(AssertSqlSafe(format!(
                    "SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created_at"
                )))
                .fetch_all(&self.pool)
                .await?
            }
            Some((sid, now)) => {
                sqlx::query(AssertSqlSafe(format!(
                    "SELECT {TOKEN_COLUMNS} FROM tokens WHERE kind = 'share' AND session_id = $1
                     AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)
                     ORDER BY created_at"
                )))
                .bind(sid)
                .bind(now)
                .fetch_all(&self.pool)
                .await?
            }
        };
        Ok(rows.iter().map(token_row).collect())
    }

    /// A subquery of the strings in the JSON array bound at `param`: a list of any length
    /// goes as one parameter.
    fn values_of(&self, param: &str) -> String {
        match self.backend {
            Backend::Sqlite => format!("SELECT value FROM json_each({param})"),
            Backend::Postgres => {
                format!("SELECT value FROM json_array_elements_text(CAST({param} AS json))")
            }
        }
    }

    /// The tokens of these ids that still exist.
    pub async fn tokens_by_id(&self, ids: &[String]) -> Result<Vec<TokenRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE id IN ({})",
            self.values_of("$1")
        )))
        .bind(serde_json::to_string(ids)?)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(token_row).collect())
    }

    /// Revokes a token (only a share link of `session` when given); false when none matched.
    pub async fn revoke_token(&self, id: &str, session: Option<&str>, now: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL
             AND ($3 IS NULL OR (kind = 'share' AND session_id = $4))",
        )
        .bind(now)
        .bind(id)
        .bind(session)
        .bind(session)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    // ---- sessions ----

    pub async fn insert_session(&self, s: &SessionRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (id, instance_id, label, argv, cwd, env, backend, class, cols, rows,
             state, exit_code, close_reason, last_sequence, sequence_reserved, created_at, closed_at,
             start_cols, start_rows, node_id, workspace, sandbox)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
             $20, $21, $22)",
        )
        .bind(&s.id)
        .bind(&s.instance_id)
        .bind(&s.label)
        .bind(serde_json::to_string(&s.argv)?)
        .bind(&s.cwd)
        .bind(serde_json::to_string(&s.env)?)
        .bind(&s.backend)
        .bind(&s.class)
        .bind(i64::from(s.cols))
        .bind(i64::from(s.rows))
        .bind(&s.state)
        .bind(s.exit_code)
        .bind(&s.close_reason)
        .bind(s.last_sequence as i64)
        .bind(s.sequence_reserved as i64)
        .bind(s.created_at)
        .bind(s.closed_at)
        .bind(i64::from(s.cols))
        .bind(i64::from(s.rows))
        .bind(&s.node_id)
        .bind(&s.workspace)
        .bind(&s.sandbox)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The size session `id` started at (`None` for one stored before it was kept).
    pub async fn start_size(&self, id: &str) -> Result<Option<(u16, u16)>> {
        let row = sqlx::query("SELECT start_cols, start_rows FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.and_then(|r| {
            let (cols, rows): (Option<i64>, Option<i64>) = (r.get(0), r.get(1));
            Some((u16::try_from(cols?).ok()?, u16::try_from(rows?).ok()?))
        }))
    }

    pub async fn list_sessions(&self, instance_id: &str) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE instance_id = $1 AND state != 'pooled'
             ORDER BY created_at"
        )))
        .bind(instance_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_row).collect()
    }

    /// A session by id; a pooled one (not yet taken) is no session to anyone.
    pub async fn session(&self, id: &str) -> Result<Option<SessionRow>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1 AND state != 'pooled'"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(session_row).transpose()
    }

    /// Takes a pooled session into use: it is running from `at` on, as if started then.
    /// False when it is not pooled (any more).
    pub async fn take_pooled(&self, id: &str, at: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE sessions SET state = 'running', created_at = $1 WHERE id = $2 AND state = 'pooled'",
        )
        .bind(at)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes pooled sessions with their frames: `id`'s, or with `None` every one (those a
    /// previous process left).
    pub async fn delete_pooled(&self, id: Option<&str>) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "DELETE FROM frames WHERE session_id IN
             (SELECT id FROM sessions WHERE state = 'pooled' AND ($1 IS NULL OR id = $2))",
        )
        .bind(id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sessions WHERE state = 'pooled' AND ($1 IS NULL OR id = $2)")
            .bind(id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The sessions node `node_id` runs (with those stored before nodes, which ran here).
    pub async fn running_sessions(&self, node_id: &str) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE state = 'running' AND node_id IN ($1, '')"
        )))
        .bind(node_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_row).collect()
    }

    pub async fn set_session_size(&self, id: &str, cols: u16, rows: u16) -> Result<()> {
        sqlx::query("UPDATE sessions SET cols = $1, rows = $2 WHERE id = $3")
            .bind(i64::from(cols))
            .bind(i64::from(rows))
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn close_session(
        &self,
        id: &str,
        exit_code: Option<i32>,
        reason: &str,
        last_sequence: u64,
        at: i64,
    ) -> Result<()> {
        // A pooled session that ends stays pooled: it is deleted, never listed.
        sqlx::query(
            "UPDATE sessions SET state = CASE state WHEN 'pooled' THEN 'pooled' ELSE 'closed' END,
             exit_code = $1, close_reason = $2, last_sequence = $3, closed_at = $4 WHERE id = $5",
        )
        .bind(exit_code)
        .bind(reason)
        .bind(last_sequence as i64)
        .bind(at)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

const TOKEN_COLUMNS: &str =
    "id, scope, session_id, label, kind, created_at, expires_at, revoked_at";

const SESSION_COLUMNS: &str = "id, instance_id, node_id, label, argv, cwd, env, backend, class, cols, rows, \
     state, exit_code, close_reason, last_sequence, replay_floor, sequence_reserved, created_at, \
     closed_at, workspace, sandbox";

fn token_row(r: &AnyRow) -> TokenRow {
    TokenRow {
        id: r.get("id"),
        scope: r.get("scope"),
        session_id: r.get("session_id"),
        label: r.get("label"),
        kind: r.get("kind"),
        created_at: r.get("created_at"),
        expires_at: r.get("expires_at"),
        revoked_at: r.get("revoked_at"),
    }
}

fn session_row(r: &AnyRow) -> Result<SessionRow> {
    Ok(SessionRow {
        id: r.get("id"),
        instance_id: r.get("instance_id"),
        node_id: r.get("node_id"),
        label: r.get("label"),
        argv: serde_json::from_str(r.get::<&str, _>("argv"))?,
        cwd: r.get("cwd"),
        env: serde_json::from_str(r.get::<&str, _>("env"))?,
        backend: r.get("backend"),
        class: r.get("class"),
        cols: r.get::<i64, _>("cols") as u16,
        rows: r.get::<i64, _>("rows") as u16,
        state: r.get("state"),
        exit_code: r.get("exit_code"),
        close_reason: r.get("close_reason"),
        last_sequence: r.get::<i64, _>("last_sequence") as u64,
        replay_floor: r.get::<i64, _>("replay_floor") as u64,
        sequence_reserved: r.get::<i64, _>("sequence_reserved") as u64,
        created_at: r.get("created_at"),
        closed_at: r.get("closed_at"),
        workspace: r.get("workspace"),
        sandbox: r.get("sandbox"),
    })
}
