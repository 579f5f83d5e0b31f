//! Tasks and their push-notification configs.

use anyhow::Result;
use sqlx::any::AnyRow;
use sqlx::{AnyPool, AssertSqlSafe, Row};
use tokio::sync::{mpsc, oneshot};

use super::Db;

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

/// Whose tasks: one context's, or one node's.
#[derive(Debug, Clone, Copy)]
pub enum TasksOf<'a> {
    Context(&'a str),
    Node(&'a str),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PushConfigRow {
    pub task_id: String,
    pub id: String,
    pub version: String,
    pub config: String,
    pub created_at: i64,
}

pub(super) fn push_config_row(r: &AnyRow) -> PushConfigRow {
    PushConfigRow {
        task_id: r.get(0),
        id: r.get(1),
        version: r.get(2),
        config: r.get(3),
        created_at: r.get(4),
    }
}

/// The columns `push_config_row` reads, in its order.
pub(super) const PUSH_CONFIG_COLUMNS: &str = "task_id, id, version, config, created_at";

/// One task as it now is, waiting for the task writer.
pub(super) struct TaskWrite {
    id: String,
    context_id: String,
    state: String,
    status_at: i64,
    task: String,
    written: oneshot::Sender<Result<(), String>>,
}

/// The most task writes one statement takes.
const MOST_PER_GROUP: usize = 64;

/// Writes tasks in groups: whatever waits when it is free goes into one statement, the
/// newest write of each task only, and every writer hears back once that is committed. So
/// concurrent transitions share one trip to the database (and SQLite's write lock, which
/// writers taking it one by one wait for in turn).
pub(super) struct TaskWriter {
    pool: AnyPool,
    waiting: mpsc::Receiver<TaskWrite>,
}

impl TaskWriter {
    /// Starts the writer; it ends once every sender (every clone of the store) is gone.
    pub(super) fn start(pool: AnyPool) -> mpsc::Sender<TaskWrite> {
        let (sender, waiting) = mpsc::channel(4 * MOST_PER_GROUP);
        tokio::spawn(TaskWriter { pool, waiting }.run());
        sender
    }

    async fn run(mut self) {
        let mut group = Vec::with_capacity(MOST_PER_GROUP);
        while self.waiting.recv_many(&mut group, MOST_PER_GROUP).await > 0 {
            let written = self.write(&group).await.map_err(|e| format!("{e:#}"));
            for w in group.drain(..) {
                let _ = w.written.send(written.clone());
            }
        }
    }

    async fn write(&self, group: &[TaskWrite]) -> Result<()> {
        let newest: Vec<&TaskWrite> = group
            .iter()
            .enumerate()
            .filter(|(i, w)| !group[i + 1..].iter().any(|later| later.id == w.id))
            .map(|(_, w)| w)
            .collect();
        let sql = format!(
            "INSERT INTO tasks (id, context_id, state, status_at, task) VALUES {}
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, status_at = excluded.status_at,
             task = excluded.task",
            super::values_list(newest.len(), 5)
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for w in newest {
            query = query
                .bind(&w.id)
                .bind(&w.context_id)
                .bind(&w.state)
                .bind(w.status_at)
                .bind(&w.task);
        }
        query.execute(&self.pool).await?;
        Ok(())
    }
}

/// The tasks and their push configs; task writes go through one grouped writer.
#[derive(Clone)]
pub struct Tasks {
    db: Db,
    writes: mpsc::Sender<TaskWrite>,
}

impl std::ops::Deref for Tasks {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

impl Tasks {
    /// The handle, and its writer started.
    pub(super) fn start(db: Db) -> Tasks {
        Tasks {
            writes: TaskWriter::start(db.pool.clone()),
            db,
        }
    }

    /// Writes a task as it now is (insert or replace), in a group with the task writes
    /// made meanwhile; returns once it is committed.
    pub async fn put(
        &self,
        id: &str,
        context_id: &str,
        state: &str,
        status_at: i64,
        task_json: &str,
    ) -> Result<()> {
        let (written, answer) = oneshot::channel();
        let write = TaskWrite {
            id: id.to_owned(),
            context_id: context_id.to_owned(),
            state: state.to_owned(),
            status_at,
            task: task_json.to_owned(),
            written,
        };
        let gone = || anyhow::anyhow!("the task writer has stopped");
        self.writes.send(write).await.map_err(|_| gone())?;
        answer
            .await
            .map_err(|_| gone())?
            .map_err(anyhow::Error::msg)
    }

    pub async fn get(&self, id: &str) -> Result<Option<String>> {
        Ok(sqlx::query("SELECT task FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| r.get(0)))
    }

    /// One page of tasks as (status_at, id, task JSON), and how many match in all.
    pub async fn list(&self, f: &TaskFilter<'_>) -> Result<(Vec<(i64, String, String)>, i64)> {
        const WHERE: &str = "WHERE ($1 IS NULL OR context_id = $2) AND ($3 IS NULL OR state = $4)
             AND ($5 IS NULL OR status_at >= $6)";
        let count = sqlx::query(AssertSqlSafe(format!("SELECT COUNT(*) FROM tasks {WHERE}")));
        let total: i64 = bind_filter(count, f).fetch_one(&self.pool).await?.get(0);
        let (after_at, after_id) = f.after.map_or((None, None), |(t, id)| (Some(t), Some(id)));
        let page = sqlx::query(AssertSqlSafe(format!(
            "SELECT status_at, id, task FROM tasks {WHERE}
             AND ($7 IS NULL OR status_at < $8 OR (status_at = $9 AND id < $10))
             ORDER BY status_at DESC, id DESC LIMIT $11"
        )));
        let rows = bind_filter(page, f)
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

    /// The tasks of context (session) `context_id`, as JSON.
    pub async fn of_context(&self, context_id: &str) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT task FROM tasks WHERE context_id = $1")
            .bind(context_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Unfinished tasks, as JSON: those of one context (session), or those a node ran (in
    /// its sessions, in sessions stored before nodes, or in no session).
    pub async fn unfinished(&self, of: TasksOf<'_>) -> Result<Vec<String>> {
        const UNFINISHED: &str = "state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING',
             'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED')";
        let (sql, id) = match of {
            TasksOf::Context(id) => (
                format!("SELECT task FROM tasks WHERE {UNFINISHED} AND context_id = $1"),
                id,
            ),
            TasksOf::Node(id) => (
                format!(
                    "SELECT task FROM tasks WHERE {UNFINISHED} AND context_id NOT IN
                     (SELECT id FROM sessions WHERE node_id NOT IN ($1, ''))"
                ),
                id,
            ),
        };
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Writes a push config (insert or replace; a replaced one keeps its creation time).
    pub async fn put_push(&self, c: &PushConfigRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO push_configs (task_id, id, version, config, created_at) VALUES ($1, $2, $3, $4, $5)
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
    pub async fn pushes(
        &self,
        task_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<PushConfigRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {PUSH_CONFIG_COLUMNS} FROM push_configs WHERE task_id = $1
             AND ($2 IS NULL OR (created_at, id) > (SELECT created_at, id FROM push_configs
                  WHERE task_id = $3 AND id = $4))
             ORDER BY created_at, id LIMIT $5"
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

    pub async fn push(&self, task_id: &str, id: &str) -> Result<Option<PushConfigRow>> {
        Ok(sqlx::query(AssertSqlSafe(format!(
            "SELECT {PUSH_CONFIG_COLUMNS} FROM push_configs WHERE task_id = $1 AND id = $2"
        )))
        .bind(task_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(push_config_row))
    }

    /// Deletes a push config; whether there was one.
    pub async fn delete_push(&self, task_id: &str, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM push_configs WHERE task_id = $1 AND id = $2")
            .bind(task_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Binds the filter's three optional conditions, each twice (`$n IS NULL OR …`), in order.
fn bind_filter<'q>(query: AnyQuery<'q>, f: &TaskFilter<'q>) -> AnyQuery<'q> {
    query
        .bind(f.context_id)
        .bind(f.context_id)
        .bind(f.state)
        .bind(f.state)
        .bind(f.status_after_ms)
        .bind(f.status_after_ms)
}
