//! Append-only records: the audit trail and the A202 transaction streams.

use anyhow::Result;
use sqlx::{AssertSqlSafe, Row};

use super::Db;

#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub at: i64,
    pub event: String,
    pub session_id: Option<String>,
    pub token_id: Option<String>,
    pub client_id: Option<String>,
    pub detail: String,
}

/// One object in an A202 transaction stream.
#[derive(Debug, Clone, PartialEq)]
pub struct A202Row {
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

/// The columns of `a202_objects`, in `A202Row` order.
pub(super) const COMMERCE_COLUMNS: &str = "transaction_id, sequence, object_id, version, object_type, \
     content_hash, canonical, carrier, received_at";

/// The audit trail and the A202 transaction streams.
#[derive(Clone)]
pub struct Records(pub(super) Db);

super::handle!(Records);

impl Records {
    pub async fn insert_audit(&self, r: &AuditRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit (at, event, session_id, token_id, client_id, detail)
             VALUES ($1, $2, $3, $4, $5, $6)",
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
             WHERE ($1 IS NULL OR session_id = $2) ORDER BY id DESC LIMIT $3",
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
            "SELECT COALESCE(MAX(sequence), 0) FROM a202_objects WHERE transaction_id = $1",
        )
        .bind(transaction_id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Where an object version is held: its sequence and content hash.
    pub async fn a202_find(&self, object_id: &str, version: i64) -> Result<Option<(i64, String)>> {
        Ok(sqlx::query_as(
            "SELECT sequence, content_hash FROM a202_objects WHERE object_id = $1 AND version = $2",
        )
        .bind(object_id)
        .bind(version)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Appends A202 objects in one transaction: all of them or none.
    pub async fn a202_append(&self, rows: &[A202Row]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for r in rows {
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO a202_objects ({COMMERCE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
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
    pub async fn a202_stream(&self, transaction_id: &str) -> Result<Vec<A202Row>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COMMERCE_COLUMNS} FROM a202_objects WHERE transaction_id = $1 ORDER BY sequence"
        )))
        .bind(transaction_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| A202Row {
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
