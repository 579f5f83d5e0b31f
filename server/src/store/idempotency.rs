//! `idempotency/v1`'s cache: the first response to each message id, kept with the hash of
//! the request it answered. A row with status 0 is a request still running on its node.

use anyhow::Result;
use sqlx::Row;

use super::Db;

/// A cached response (status 0: its request still runs).
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyRow {
    pub request_hash: String,
    pub binding: String,
    pub status: i64,
    /// A JSON object of the headers replayed.
    pub headers: String,
    pub body: Vec<u8>,
    pub inserted_at: i64,
}

/// Who holds a message id after a claim.
#[derive(Debug, Clone, PartialEq)]
pub enum IdempotencyClaim {
    /// This request: it runs, and its response is recorded.
    Taken,
    /// An earlier request within the TTL.
    Held(IdempotencyRow),
}

/// idempotency/v1's cache of answered requests.
#[derive(Clone)]
pub struct Idempotency(pub(super) Db);

super::handle!(Idempotency);

impl Idempotency {
    /// Claims `message_id` for a request running on `node_id`: taken when no row holds it
    /// or the row's TTL ran out (inserted before `expired_before`); else the row that holds
    /// it.
    pub async fn claim(
        &self,
        message_id: &str,
        request_hash: &str,
        (binding, node_id): (&str, &str),
        now: i64,
        expired_before: i64,
    ) -> Result<IdempotencyClaim> {
        for _ in 0..3 {
            let inserted = sqlx::query(
                "INSERT INTO idempotency (message_id, request_hash, binding, node_id, status, headers, body, inserted_at)
                 VALUES ($1, $2, $3, $4, 0, '{}', NULL, $5) ON CONFLICT (message_id) DO NOTHING",
            )
            .bind(message_id)
            .bind(request_hash)
            .bind(binding)
            .bind(node_id)
            .bind(now)
            .execute(&self.pool)
            .await?;
            if inserted.rows_affected() == 1 {
                return Ok(IdempotencyClaim::Taken);
            }
            let renewed = sqlx::query(
                "UPDATE idempotency SET request_hash = $1, binding = $2, node_id = $3, status = 0,
                 headers = '{}', body = NULL, inserted_at = $4 WHERE message_id = $5 AND inserted_at < $6",
            )
            .bind(request_hash)
            .bind(binding)
            .bind(node_id)
            .bind(now)
            .bind(message_id)
            .bind(expired_before)
            .execute(&self.pool)
            .await?;
            if renewed.rows_affected() == 1 {
                return Ok(IdempotencyClaim::Taken);
            }
            if let Some(row) = self.get(message_id).await? {
                return Ok(IdempotencyClaim::Held(row));
            }
        }
        anyhow::bail!("message id {message_id} kept changing hands")
    }

    pub async fn get(&self, message_id: &str) -> Result<Option<IdempotencyRow>> {
        let row = sqlx::query(
            "SELECT request_hash, binding, status, headers, body, inserted_at FROM idempotency
             WHERE message_id = $1",
        )
        .bind(message_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| IdempotencyRow {
            request_hash: r.get(0),
            binding: r.get(1),
            status: r.get(2),
            headers: r.get(3),
            body: r.get::<Option<Vec<u8>>, _>(4).unwrap_or_default(),
            inserted_at: r.get(5),
        }))
    }

    /// Records the response of the request that took `message_id`.
    pub async fn complete(
        &self,
        message_id: &str,
        status: u16,
        headers: &str,
        body: &[u8],
    ) -> Result<()> {
        sqlx::query(
            "UPDATE idempotency SET status = $1, headers = $2, body = $3 WHERE message_id = $4",
        )
        .bind(i64::from(status))
        .bind(headers)
        .bind(body)
        .bind(message_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Lets go of a claim whose request produced no response.
    pub async fn release(&self, message_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM idempotency WHERE message_id = $1 AND status = 0")
            .bind(message_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Lets go of the claims of requests a previous process of `node_id` was running when
    /// it stopped: their answers were never recorded.
    pub async fn release_unanswered(&self, node_id: &str) -> Result<u64> {
        let done = sqlx::query("DELETE FROM idempotency WHERE status = 0 AND node_id = $1")
            .bind(node_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    /// Drops the entries inserted before `before`; how many.
    pub async fn expire(&self, before: i64) -> Result<u64> {
        let done = sqlx::query("DELETE FROM idempotency WHERE inserted_at < $1")
            .bind(before)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
