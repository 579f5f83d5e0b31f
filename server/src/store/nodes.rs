//! The nodes of a cluster, their heartbeats, what a dead node leaves behind, and the
//! values the nodes share.

use anyhow::Result;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::frames::Frame;
use super::{Db, SESSION_COLUMNS, SessionRow, frames, session_row};

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub id: String,
    pub advertise_url: String,
    pub started_at: i64,
    pub last_seen: i64,
    /// Its running sessions.
    pub sessions: i64,
}

/// The nodes of a cluster, their heartbeats and the sessions of dead ones.
#[derive(Clone)]
pub struct Nodes(pub(super) Db);

super::handle!(Nodes);

impl Nodes {
    /// Records that node `id` started at `now`, reachable at `advertise_url`.
    pub async fn started(&self, id: &str, advertise_url: &str, now: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO nodes (id, advertise_url, started_at, last_seen) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET advertise_url = excluded.advertise_url,
             started_at = excluded.started_at, last_seen = excluded.last_seen",
        )
        .bind(id)
        .bind(advertise_url)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Node `id`'s heartbeat.
    pub async fn seen(&self, id: &str, now: i64) -> Result<()> {
        sqlx::query("UPDATE nodes SET last_seen = $1 WHERE id = $2")
            .bind(now)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn all(&self) -> Result<Vec<NodeRow>> {
        let rows = sqlx::query(
            "SELECT n.id, n.advertise_url, n.started_at, n.last_seen,
               (SELECT COUNT(*) FROM sessions s WHERE s.node_id = n.id AND s.state = 'running')
             FROM nodes n ORDER BY n.started_at, n.id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(node_row).collect())
    }

    pub async fn get(&self, id: &str) -> Result<Option<NodeRow>> {
        let row = sqlx::query(
            "SELECT n.id, n.advertise_url, n.started_at, n.last_seen,
               (SELECT COUNT(*) FROM sessions s WHERE s.node_id = n.id AND s.state = 'running')
             FROM nodes n WHERE n.id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(node_row))
    }

    /// Running sessions of nodes other than `except` last seen before `seen_before`.
    pub async fn sessions_of_dead_nodes(
        &self,
        except: &str,
        seen_before: i64,
    ) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE state = 'running' AND node_id IN
               (SELECT id FROM nodes WHERE id != $1 AND last_seen < $2)"
        )))
        .bind(except)
        .bind(seen_before)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_row).collect()
    }

    /// Closes a running session whose process is gone, with its last frames, in one
    /// transaction; false (and nothing written) when it is not running any more, so
    /// however many nodes try, it closes once.
    pub async fn close_abandoned(
        &self,
        id: &str,
        frames: &[Frame],
        reason: &str,
        at: i64,
    ) -> Result<bool> {
        let last = frames.last().map_or(0, |f| f.sequence);
        let mut tx = self.pool.begin().await?;
        let closed = sqlx::query(
            "UPDATE sessions SET state = 'closed', close_reason = $1, closed_at = $2,
             last_sequence = $3 WHERE id = $4 AND state = 'running'",
        )
        .bind(reason)
        .bind(at)
        .bind(last as i64)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if closed.rows_affected() == 0 {
            return Ok(false);
        }
        frames::insert_frames_in(&mut tx, id, frames).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The value the cluster keeps under `name`, set to `value` by whoever asked first.
    pub async fn cluster_value(&self, name: &str, value: &str) -> Result<String> {
        sqlx::query(
            "INSERT INTO cluster (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(value)
        .execute(&self.pool)
        .await?;
        Ok(
            sqlx::query_scalar("SELECT value FROM cluster WHERE name = $1")
                .bind(name)
                .fetch_one(&self.pool)
                .await?,
        )
    }
}

fn node_row(r: &AnyRow) -> NodeRow {
    NodeRow {
        id: r.get(0),
        advertise_url: r.get(1),
        started_at: r.get(2),
        last_seen: r.get(3),
        sessions: r.get(4),
    }
}
