//! The one place for SQL, on SQLite or PostgreSQL through sqlx's `Any` driver: sessions and tokens here, replay frames
//! (`frames`), tasks and push configs (`tasks`), the audit trail and A202 streams (`records`),
//! idempotency/v1's cache (`idempotency`), workspace snapshots (`snapshots`).
//! Migrations are embedded and applied on open; the schema sticks to portable types.

mod frames;
mod idempotency;
mod nodes;
mod records;
mod retention;
mod sessions;
mod snapshots;
mod tasks;
mod tokens;
pub use frames::*;
pub use idempotency::*;
pub use nodes::*;
pub use records::*;
pub use sessions::*;
pub use snapshots::*;
pub use tasks::*;
pub use tokens::*;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sqlx::AnyPool;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use tokio::sync::watch;

/// The database, through handles that each own one part of it: `sessions`, `tokens`,
/// `frames` (replay and retention), `tasks` (tasks and push configs, with their grouped
/// writer), `records` (audit and A202 streams), `idempotency` and `nodes`.
#[derive(Clone)]
pub struct Store {
    db: Db,
    /// The last write that had to be retried has not succeeded yet.
    refusing: Arc<watch::Sender<bool>>,
    sessions: Sessions,
    tokens: Tokens,
    frames: Frames,
    tasks: Tasks,
    records: Records,
    idempotency: Idempotency,
    nodes: Nodes,
    snapshots: Snapshots,
}

/// The pool and the SQL dialect every handle shares.
#[derive(Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

impl Db {
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
}

/// `rows` parenthesised lists of `cols` numbered parameters each, for a multi-row INSERT:
/// `($1, $2), ($3, $4)` for two rows of two.
pub(super) fn values_list(rows: usize, cols: usize) -> String {
    let row = |r: usize| {
        let params: Vec<String> = (r * cols + 1..=r * cols + cols)
            .map(|p| format!("${p}"))
            .collect();
        format!("({})", params.join(", "))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

/// A handle on one part of the store: the shared pool, and its own queries.
macro_rules! handle {
    ($name:ident) => {
        impl std::ops::Deref for $name {
            type Target = Db;
            fn deref(&self) -> &Db {
                &self.0
            }
        }
    };
}
pub(crate) use handle;

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

/// Where snapshot archives go on SQLite: `snapshots/` beside the database file (the data
/// directory for one in memory). None on PostgreSQL, which keeps them itself.
fn archives(database_url: Option<&str>, data_dir: &Path) -> Option<PathBuf> {
    let dir = match database_url {
        Some(url) if url.starts_with("sqlite:") => {
            let path = url.trim_start_matches("sqlite:").trim_start_matches("//");
            let path = Path::new(path.split('?').next().unwrap_or(path));
            match path
                .parent()
                .filter(|p| !p.as_os_str().is_empty() && !path.starts_with(":memory:"))
            {
                Some(parent) => parent.to_path_buf(),
                None => data_dir.to_path_buf(),
            }
        }
        Some(_) => return None,
        None => data_dir.to_path_buf(),
    };
    Some(dir.join("snapshots"))
}

/// A `sqlite:` URL as given, creating the file when it names no `mode`.
fn creating(url: &str) -> String {
    match url.split_once('?') {
        Some((_, params)) if params.split('&').any(|p| p.starts_with("mode=")) => url.to_owned(),
        Some(_) => format!("{url}&mode=rwc"),
        None => format!("{url}?mode=rwc"),
    }
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
        let db = Db { pool, backend };
        Ok(Store {
            refusing: Arc::new(watch::Sender::new(false)),
            sessions: Sessions(db.clone()),
            tokens: Tokens(db.clone()),
            frames: Frames(db.clone()),
            tasks: Tasks::start(db.clone()),
            records: Records(db.clone()),
            idempotency: Idempotency(db.clone()),
            nodes: Nodes(db.clone()),
            snapshots: Snapshots(db.clone(), archives(database_url, data_dir)),
            db,
        })
    }

    pub fn backend(&self) -> Backend {
        self.db.backend
    }

    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    pub fn frames(&self) -> &Frames {
        &self.frames
    }

    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    pub fn records(&self) -> &Records {
        &self.records
    }

    pub fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }

    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    pub fn snapshots(&self) -> &Snapshots {
        &self.snapshots
    }

    /// The bytes the store holds in use: the database's, and on SQLite the snapshot
    /// archives beside it.
    pub async fn bytes_in_use(&self) -> Result<u64> {
        Ok(self.frames.bytes_in_use().await? + self.snapshots.bytes_on_disk().await?)
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
        sqlx::query("SELECT 1").execute(&self.db.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.db.pool.close().await;
    }
}
