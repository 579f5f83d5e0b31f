//! The sessions: their rows, sizes and ends, and the pool of ready shells.

use anyhow::Result;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::Db;

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
    /// Its own lifetime (JSON: `ttl_ms`, `idle_timeout_ms`).
    pub lifetime: Option<String>,
}

/// The sessions table.
#[derive(Clone)]
pub struct Sessions(pub(super) Db);

super::handle!(Sessions);

impl Sessions {
    pub async fn insert(&self, s: &SessionRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (id, instance_id, label, argv, cwd, env, backend, class, cols, rows,
             state, exit_code, close_reason, last_sequence, sequence_reserved, created_at, closed_at,
             start_cols, start_rows, node_id, workspace, sandbox, lifetime)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
             $20, $21, $22, $23)",
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
        .bind(&s.lifetime)
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

    pub async fn list(&self, instance_id: &str) -> Result<Vec<SessionRow>> {
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
    pub async fn get(&self, id: &str) -> Result<Option<SessionRow>> {
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
    pub async fn running(&self, node_id: &str) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE state = 'running' AND node_id IN ($1, '')"
        )))
        .bind(node_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_row).collect()
    }

    pub async fn set_size(&self, id: &str, cols: u16, rows: u16) -> Result<()> {
        sqlx::query("UPDATE sessions SET cols = $1, rows = $2 WHERE id = $3")
            .bind(i64::from(cols))
            .bind(i64::from(rows))
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A sandboxed session's sandbox as it now is (its allowlist changed).
    pub async fn set_sandbox(&self, id: &str, sandbox: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET sandbox = $1 WHERE id = $2")
            .bind(sandbox)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn close(
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

pub(super) const SESSION_COLUMNS: &str = "id, instance_id, node_id, label, argv, cwd, env, backend, class, cols, rows, \
     state, exit_code, close_reason, last_sequence, replay_floor, sequence_reserved, created_at, \
     closed_at, workspace, sandbox, lifetime";

pub(super) fn session_row(r: &AnyRow) -> Result<SessionRow> {
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
        lifetime: r.get("lifetime"),
    })
}
