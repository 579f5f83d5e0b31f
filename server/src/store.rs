//! The one place for SQL: sessions, tokens and replay frames, on SQLite through sqlx.
//! Migrations are embedded and applied on open; the schema sticks to portable types.

use std::borrow::Cow;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Row, SqlitePool};

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub instance_id: String,
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
    pub created_at: i64,
    pub closed_at: Option<i64>,
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

/// One broadcast frame of a session as retained for replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub sequence: u64,
    pub created_at: i64,
    pub body: FrameBody,
}

/// Output keeps its PTY bytes and the id of the envelope it went out under (its JSON text
/// is rendered again on replay); every other frame keeps its exact envelope text.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameBody {
    Output { envelope_id: String, data: Bytes },
    Envelope { kind: String, text: Bytes },
}

impl Frame {
    /// The bytes it holds, for the ring's byte bound.
    pub fn size(&self) -> usize {
        match &self.body {
            FrameBody::Output { data, .. } => data.len(),
            FrameBody::Envelope { text, .. } => text.len(),
        }
    }
}

impl Store {
    /// Opens (creating if needed) the database named by `url`, or `DIR/ptyhost.db`.
    pub async fn open(database_url: Option<&str>, data_dir: &Path) -> Result<Store> {
        let options = match database_url {
            Some(url) if url.starts_with("sqlite:") => SqliteConnectOptions::from_str(url)
                .with_context(|| format!("bad database url {url}"))?,
            Some(url) => anyhow::bail!("unsupported database url {url}: only sqlite: is built in"),
            None => {
                std::fs::create_dir_all(data_dir)
                    .with_context(|| format!("creating data dir {}", data_dir.display()))?;
                SqliteConnectOptions::new().filename(data_dir.join("ptyhost.db"))
            }
        }
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .context("opening the database")?;
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .context("applying migrations")?;
        Ok(Store { pool })
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
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = ?"
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
                    "SELECT {TOKEN_COLUMNS} FROM tokens WHERE kind = 'share' AND session_id = ?
                     AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
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

    /// Revokes a token (only a share link of `session` when given); false when none matched.
    pub async fn revoke_token(&self, id: &str, session: Option<&str>, now: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL
             AND (? IS NULL OR (kind = 'share' AND session_id = ?))",
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
             state, exit_code, close_reason, last_sequence, created_at, closed_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        .bind(s.created_at)
        .bind(s.closed_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn list_sessions(&self, instance_id: &str) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE instance_id = ? ORDER BY created_at"
        )))
        .bind(instance_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_row).collect()
    }

    pub async fn session(&self, id: &str) -> Result<Option<SessionRow>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(session_row).transpose()
    }

    pub async fn running_sessions(&self) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE state = 'running'"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_row).collect()
    }

    pub async fn set_session_size(&self, id: &str, cols: u16, rows: u16) -> Result<()> {
        sqlx::query("UPDATE sessions SET cols = ?, rows = ? WHERE id = ?")
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
        sqlx::query(
            "UPDATE sessions SET state = 'closed', exit_code = ?, close_reason = ?,
             last_sequence = ?, closed_at = ? WHERE id = ?",
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

    // ---- frames ----

    /// Appends frames in one transaction and records the session's last sequence.
    pub async fn insert_frames(&self, session_id: &str, frames: &[Frame]) -> Result<()> {
        let Some(last) = frames.last() else {
            return Ok(());
        };
        let mut tx = self.pool.begin().await?;
        for f in frames {
            let (kind, text, envelope_id, data, compression) = match &f.body {
                FrameBody::Output { envelope_id, data } => {
                    let (data, compression) = compress(data);
                    (
                        "Output",
                        None,
                        Some(envelope_id.as_str()),
                        Some(data),
                        compression,
                    )
                }
                FrameBody::Envelope { kind, text } => (
                    kind.as_str(),
                    Some(std::str::from_utf8(text)?),
                    None,
                    None,
                    None,
                ),
            };
            sqlx::query(
                "INSERT INTO frames (session_id, sequence, kind, created_at, frame, envelope_id, data, compression)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(session_id)
            .bind(f.sequence as i64)
            .bind(kind)
            .bind(f.created_at)
            .bind(text)
            .bind(envelope_id)
            .bind(data)
            .bind(compression)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE sessions SET last_sequence = ? WHERE id = ? AND last_sequence < ?")
            .bind(last.sequence as i64)
            .bind(session_id)
            .bind(last.sequence as i64)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Frames with `after < sequence < before`, in order.
    pub async fn frames_between(
        &self,
        session_id: &str,
        after: u64,
        before: u64,
    ) -> Result<Vec<Frame>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {FRAME_COLUMNS} FROM frames
             WHERE session_id = ? AND sequence > ? AND sequence < ? ORDER BY sequence"
        )))
        .bind(session_id)
        .bind(after as i64)
        .bind(before.min(i64::MAX as u64) as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(stored_frame).collect()
    }

    /// The last keyframe of a session and every frame after it (all frames if it has none).
    pub async fn frames_from_last_keyframe(&self, session_id: &str) -> Result<Vec<Frame>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {FRAME_COLUMNS} FROM frames WHERE session_id = ?
             AND sequence >= COALESCE((SELECT MAX(sequence) FROM frames
                                       WHERE session_id = ? AND kind = 'Keyframe'), 0)
             ORDER BY sequence"
        )))
        .bind(session_id)
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(stored_frame).collect()
    }

    /// Drops the oldest frames that are outside both retention bounds (older than
    /// `before_ms` and at or below `upto_sequence`), always a prefix of the history, and
    /// raises the session's replay floor to match. Returns the new floor, if it moved.
    pub async fn prune_frames(
        &self,
        session_id: &str,
        upto_sequence: u64,
        before_ms: i64,
    ) -> Result<Option<u64>> {
        let mut tx = self.pool.begin().await?;
        let floor: Option<i64> = sqlx::query(
            "SELECT MAX(sequence) FROM frames WHERE session_id = ? AND sequence <= ? AND created_at < ?",
        )
        .bind(session_id)
        .bind(upto_sequence as i64)
        .bind(before_ms)
        .fetch_one(&mut *tx)
        .await?
        .get(0);
        let Some(floor) = floor else {
            return Ok(None);
        };
        sqlx::query("DELETE FROM frames WHERE session_id = ? AND sequence <= ?")
            .bind(session_id)
            .bind(floor)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE sessions SET replay_floor = ? WHERE id = ?")
            .bind(floor)
            .bind(session_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(floor as u64))
    }
}

/// Which tasks a listing wants, newest status first.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter<'a> {
    pub context_id: Option<&'a str>,
    pub state: Option<&'a str>,
    pub status_after_ms: Option<i64>,
    /// Continue after this (status_at, id), exclusive.
    pub after: Option<(i64, &'a str)>,
    pub limit: u32,
}

impl Store {
    /// Writes a task as it now is (insert or replace).
    pub async fn put_task(
        &self,
        id: &str,
        context_id: &str,
        state: &str,
        status_at: i64,
        task_json: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO tasks (id, context_id, state, status_at, task) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, status_at = excluded.status_at,
             task = excluded.task",
        )
        .bind(id)
        .bind(context_id)
        .bind(state)
        .bind(status_at)
        .bind(task_json)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn task(&self, id: &str) -> Result<Option<String>> {
        Ok(sqlx::query("SELECT task FROM tasks WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| r.get(0)))
    }

    /// One page of tasks as (status_at, id, task JSON), and how many match in all.
    pub async fn list_tasks(
        &self,
        f: &TaskFilter<'_>,
    ) -> Result<(Vec<(i64, String, String)>, i64)> {
        const WHERE: &str = "WHERE (? IS NULL OR context_id = ?) AND (? IS NULL OR state = ?)
             AND (? IS NULL OR status_at >= ?)";
        let total: i64 = sqlx::query(AssertSqlSafe(format!("SELECT COUNT(*) FROM tasks {WHERE}")))
            .bind(f.context_id)
            .bind(f.context_id)
            .bind(f.state)
            .bind(f.state)
            .bind(f.status_after_ms)
            .bind(f.status_after_ms)
            .fetch_one(&self.pool)
            .await?
            .get(0);
        let (after_at, after_id) = f.after.map_or((None, None), |(t, id)| (Some(t), Some(id)));
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT status_at, id, task FROM tasks {WHERE}
             AND (? IS NULL OR status_at < ? OR (status_at = ? AND id < ?))
             ORDER BY status_at DESC, id DESC LIMIT ?"
        )))
        .bind(f.context_id)
        .bind(f.context_id)
        .bind(f.state)
        .bind(f.state)
        .bind(f.status_after_ms)
        .bind(f.status_after_ms)
        .bind(after_at)
        .bind(after_at)
        .bind(after_at)
        .bind(after_id)
        .bind(i64::from(f.limit))
        .fetch_all(&self.pool)
        .await?;
        Ok((
            rows.iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect(),
            total,
        ))
    }

    /// Tasks a previous process left unfinished, as JSON.
    pub async fn unfinished_tasks(&self) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT task FROM tasks WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING',
             'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED')",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Writes a push config (insert or replace; a replaced one keeps its creation time).
    pub async fn put_push_config(&self, c: &PushConfigRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO push_configs (task_id, id, version, config, created_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (task_id, id) DO UPDATE SET version = excluded.version,
             config = excluded.config",
        )
        .bind(&c.task_id)
        .bind(&c.id)
        .bind(&c.version)
        .bind(&c.config)
        .bind(c.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A task's push configs in creation order: at most `limit` after the config `after`.
    pub async fn push_configs(
        &self,
        task_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<PushConfigRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {PUSH_CONFIG_COLUMNS} FROM push_configs WHERE task_id = ?
             AND (? IS NULL OR (created_at, id) > (SELECT created_at, id FROM push_configs
                  WHERE task_id = ? AND id = ?))
             ORDER BY created_at, id LIMIT ?"
        )))
        .bind(task_id)
        .bind(after)
        .bind(task_id)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(push_config_row).collect())
    }

    pub async fn push_config(&self, task_id: &str, id: &str) -> Result<Option<PushConfigRow>> {
        Ok(sqlx::query(AssertSqlSafe(format!(
            "SELECT {PUSH_CONFIG_COLUMNS} FROM push_configs WHERE task_id = ? AND id = ?"
        )))
        .bind(task_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(push_config_row))
    }

    /// Deletes a push config; whether there was one.
    pub async fn delete_push_config(&self, task_id: &str, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM push_configs WHERE task_id = ? AND id = ?")
            .bind(task_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub at: i64,
    pub event: String,
    pub session_id: Option<String>,
    pub token_id: Option<String>,
    pub client_id: Option<String>,
    pub detail: String,
}

impl Store {
    pub async fn insert_audit(&self, r: &AuditRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit (at, event, session_id, token_id, client_id, detail)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(r.at)
        .bind(&r.event)
        .bind(&r.session_id)
        .bind(&r.token_id)
        .bind(&r.client_id)
        .bind(&r.detail)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The newest `limit` records, of one session or of all, newest first.
    pub async fn audit(&self, session_id: Option<&str>, limit: u32) -> Result<Vec<AuditRow>> {
        let rows = sqlx::query(
            "SELECT at, event, session_id, token_id, client_id, detail FROM audit
             WHERE (? IS NULL OR session_id = ?) ORDER BY id DESC LIMIT ?",
        )
        .bind(session_id)
        .bind(session_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| AuditRow {
                at: r.get(0),
                event: r.get(1),
                session_id: r.get(2),
                token_id: r.get(3),
                client_id: r.get(4),
                detail: r.get(5),
            })
            .collect())
    }

    /// The last sequence of an A202 transaction stream (0 when it is empty).
    pub async fn a202_sequence(&self, transaction_id: &str) -> Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COALESCE(MAX(sequence), 0) FROM a202_objects WHERE transaction_id = ?",
        )
        .bind(transaction_id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Where an object version is held: its sequence and content hash.
    pub async fn a202_find(&self, object_id: &str, version: i64) -> Result<Option<(i64, String)>> {
        Ok(sqlx::query_as(
            "SELECT sequence, content_hash FROM a202_objects WHERE object_id = ? AND version = ?",
        )
        .bind(object_id)
        .bind(version)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Appends A202 objects in one transaction: all of them or none.
    pub async fn a202_append(&self, rows: &[CommerceRow]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for r in rows {
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO a202_objects ({COMMERCE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )))
            .bind(&r.transaction_id)
            .bind(r.sequence)
            .bind(&r.object_id)
            .bind(r.version)
            .bind(&r.object_type)
            .bind(&r.content_hash)
            .bind(&r.canonical)
            .bind(&r.carrier)
            .bind(&r.received_at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A transaction's stream in sequence order.
    pub async fn a202_stream(&self, transaction_id: &str) -> Result<Vec<CommerceRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COMMERCE_COLUMNS} FROM a202_objects WHERE transaction_id = ? ORDER BY sequence"
        )))
        .bind(transaction_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| CommerceRow {
                transaction_id: r.get(0),
                sequence: r.get(1),
                object_id: r.get(2),
                version: r.get(3),
                object_type: r.get(4),
                content_hash: r.get(5),
                canonical: r.get(6),
                carrier: r.get(7),
                received_at: r.get(8),
            })
            .collect())
    }
}

/// One object in an A202 transaction stream.
#[derive(Debug, Clone, PartialEq)]
pub struct CommerceRow {
    pub transaction_id: String,
    pub sequence: i64,
    pub object_id: String,
    pub version: i64,
    pub object_type: String,
    pub content_hash: String,
    pub canonical: Vec<u8>,
    pub carrier: String,
    pub received_at: String,
}

/// The columns of `a202_objects`, in `CommerceRow` order.
const COMMERCE_COLUMNS: &str = "transaction_id, sequence, object_id, version, object_type, \
     content_hash, canonical, carrier, received_at";

#[derive(Debug, Clone, PartialEq)]
pub struct PushConfigRow {
    pub task_id: String,
    pub id: String,
    pub version: String,
    pub config: String,
    pub created_at: i64,
}

/// The columns `push_config_row` reads, in its order.
const PUSH_CONFIG_COLUMNS: &str = "task_id, id, version, config, created_at";

fn push_config_row(r: &sqlx::sqlite::SqliteRow) -> PushConfigRow {
    PushConfigRow {
        task_id: r.get(0),
        id: r.get(1),
        version: r.get(2),
        config: r.get(3),
        created_at: r.get(4),
    }
}

const TOKEN_COLUMNS: &str =
    "id, scope, session_id, label, kind, created_at, expires_at, revoked_at";
const SESSION_COLUMNS: &str = "id, instance_id, label, argv, cwd, env, backend, class, cols, rows, \
     state, exit_code, close_reason, last_sequence, replay_floor, created_at, closed_at";

fn token_row(r: &sqlx::sqlite::SqliteRow) -> TokenRow {
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

fn session_row(r: &sqlx::sqlite::SqliteRow) -> Result<SessionRow> {
    Ok(SessionRow {
        id: r.get("id"),
        instance_id: r.get("instance_id"),
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
        created_at: r.get("created_at"),
        closed_at: r.get("closed_at"),
    })
}

/// The columns `stored_frame` reads.
const FRAME_COLUMNS: &str = "sequence, kind, created_at, frame, envelope_id, data, compression";
/// Output shorter than this is stored as it is (an echo, a prompt).
const COMPRESS_FROM: usize = 256;

/// Output bytes as stored: an LZ4 block when that is smaller (terminal output mostly is,
/// and LZ4 passes over what is not at memory speed), else as they are.
fn compress(data: &Bytes) -> (Cow<'_, [u8]>, Option<&'static str>) {
    if data.len() >= COMPRESS_FROM {
        let block = lz4_flex::compress_prepend_size(data);
        if block.len() < data.len() {
            return (Cow::Owned(block), Some("lz4"));
        }
    }
    (Cow::Borrowed(&data[..]), None)
}

fn stored_frame(r: &sqlx::sqlite::SqliteRow) -> Result<Frame> {
    let body = match r.get::<Option<Vec<u8>>, _>("data") {
        Some(data) => FrameBody::Output {
            envelope_id: r
                .get::<Option<String>, _>("envelope_id")
                .unwrap_or_default(),
            data: match r.get::<Option<String>, _>("compression").as_deref() {
                None => Bytes::from(data),
                Some("lz4") => Bytes::from(lz4_flex::decompress_size_prepended(&data)?),
                Some(other) => anyhow::bail!("unknown frame compression {other:?}"),
            },
        },
        None => FrameBody::Envelope {
            kind: r.get("kind"),
            text: Bytes::from(r.get::<Option<String>, _>("frame").unwrap_or_default()),
        },
    };
    Ok(Frame {
        sequence: r.get::<i64, _>("sequence") as u64,
        created_at: r.get("created_at"),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(sequence: u64, data: Vec<u8>) -> Frame {
        Frame {
            sequence,
            created_at: 1_700_000_000_000,
            body: FrameBody::Output {
                envelope_id: format!("id-{sequence}"),
                data: Bytes::from(data),
            },
        }
    }

    #[tokio::test]
    async fn output_comes_back_as_it_went_in_compressed_only_when_that_is_smaller() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(None, dir.path()).await.unwrap();
        let text = b"cargo build: Compiling some-crate v1.2.3\r\n".repeat(1600);
        let noise: Vec<u8> = (0..65536).map(|_| rand::random::<u8>()).collect();
        let frames = vec![
            output(1, b"a".to_vec()),
            output(2, text),
            output(3, noise),
            Frame {
                sequence: 4,
                created_at: 1_700_000_000_001,
                body: FrameBody::Envelope {
                    kind: "Resize".into(),
                    text: Bytes::from_static(br#"{"op":"pty.session_frame"}"#),
                },
            },
        ];
        store.insert_frames("s", &frames).await.unwrap();
        assert_eq!(store.frames_between("s", 0, 5).await.unwrap(), frames);
        let stored: Vec<(i64, Option<String>, Option<i64>)> = sqlx::query_as(
            "SELECT sequence, compression, length(data) FROM frames ORDER BY sequence",
        )
        .fetch_all(&store.pool)
        .await
        .unwrap();
        assert_eq!(stored[0], (1, None, Some(1)));
        assert_eq!(stored[1].1.as_deref(), Some("lz4"));
        assert!(stored[1].2 < Some(4096), "{stored:?}");
        assert_eq!(stored[2], (3, None, Some(65536)));
        assert_eq!(stored[3], (4, None, None));
    }
}
