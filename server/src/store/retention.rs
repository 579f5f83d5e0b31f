//! What bounds the store's size: a byte cap per session (its oldest frames go first, and
//! the replay floor moves past them), the retention of closed sessions (their frames and
//! tasks go), and the bytes the whole database file holds in use.

use anyhow::Result;
use sqlx::{AssertSqlSafe, Row};

use super::{Backend, Frames};

impl Frames {
    /// The bytes session `id`'s frames take.
    pub async fn session_bytes(&self, id: &str) -> Result<u64> {
        let bytes: Option<i64> =
            sqlx::query("SELECT CAST(SUM(bytes) AS BIGINT) FROM frames WHERE session_id = $1")
                .bind(id)
                .fetch_one(&self.pool)
                .await?
                .get(0);
        Ok(bytes.unwrap_or(0) as u64)
    }

    /// Drops session `id`'s oldest frames until the rest take at most `keep` bytes, and
    /// raises its replay floor past them. Returns the new floor, if it moved.
    pub async fn prune_to_bytes(&self, id: &str, keep: u64) -> Result<Option<u64>> {
        let mut tx = self.pool.begin().await?;
        let floor: Option<i64> = sqlx::query(
            "SELECT MAX(sequence) FROM (
               SELECT sequence, CAST(SUM(bytes) OVER (ORDER BY sequence DESC) AS BIGINT) AS kept
               FROM frames WHERE session_id = $1
             ) AS k WHERE kept > $2",
        )
        .bind(id)
        .bind(keep as i64)
        .fetch_one(&mut *tx)
        .await?
        .get(0);
        let Some(floor) = floor else {
            return Ok(None);
        };
        super::frames::raise_floor(&mut tx, id, floor).await?;
        tx.commit().await?;
        Ok(Some(floor as u64))
    }

    /// Closed sessions that still keep frames or tasks, oldest close first; with `before`,
    /// only those closed before it (unix ms).
    pub async fn closed_with_history(
        &self,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT id FROM sessions s WHERE state = 'closed' AND closed_at < $1
               AND (EXISTS (SELECT 1 FROM frames f WHERE f.session_id = s.id)
                    OR EXISTS (SELECT 1 FROM tasks t WHERE t.context_id = s.id))
             ORDER BY closed_at LIMIT $2",
        )
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| r.get("id")).collect())
    }

    /// Drops a closed session's frames, its tasks and their push configs; its replay floor
    /// moves to its last sequence (nothing is left to replay).
    pub async fn drop_history(&self, id: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM frames WHERE session_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "DELETE FROM push_configs WHERE task_id IN (SELECT id FROM tasks WHERE context_id = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM tasks WHERE context_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE sessions SET replay_floor = last_sequence WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The bytes the database holds: on SQLite its file's pages less the free ones; on
    /// PostgreSQL what its frames, tasks and snapshots hold (its files give space back to the system
    /// only on a full vacuum, so their size would not fall as history is dropped).
    pub async fn bytes_in_use(&self) -> Result<u64> {
        if self.backend == Backend::Postgres {
            let v: i64 = sqlx::query_scalar(
                "SELECT CAST(COALESCE((SELECT SUM(bytes) FROM frames), 0)
                   + COALESCE((SELECT SUM(octet_length(task)) FROM tasks), 0)
                   + COALESCE((SELECT SUM(octet_length(data)) FROM snapshot_chunks), 0) AS BIGINT)",
            )
            .fetch_one(&self.pool)
            .await?;
            return Ok(v.max(0) as u64);
        }
        let pragma = |name: &'static str| async move {
            let v: i64 = sqlx::query(AssertSqlSafe(format!("PRAGMA {name}")))
                .fetch_one(&self.pool)
                .await?
                .get(0);
            anyhow::Ok(v.max(0) as u64)
        };
        let (pages, free, size) = (
            pragma("page_count").await?,
            pragma("freelist_count").await?,
            pragma("page_size").await?,
        );
        Ok(pages.saturating_sub(free) * size)
    }
}
