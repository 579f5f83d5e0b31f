//! The tokens: stored by the hash of their value, found, listed and revoked.

use anyhow::Result;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::Db;

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

/// The tokens table.
#[derive(Clone)]
pub struct Tokens(pub(super) Db);

super::handle!(Tokens);

impl Tokens {
    pub async fn insert(&self, t: NewToken<'_>) -> Result<()> {
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

    pub async fn by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = $1"
        )))
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(token_row))
    }

    pub async fn count(&self) -> Result<i64> {
        Ok(sqlx::query("SELECT COUNT(*) FROM tokens")
            .fetch_one(&self.pool)
            .await?
            .get(0))
    }

    /// Tokens, optionally only the live share links of one session.
    pub async fn list(&self, share_links_of: Option<(&str, i64)>) -> Result<Vec<TokenRow>> {
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

    /// The tokens of these ids that still exist.
    pub async fn by_ids(&self, ids: &[String]) -> Result<Vec<TokenRow>> {
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
    pub async fn revoke(&self, id: &str, session: Option<&str>, now: i64) -> Result<bool> {
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
}

const TOKEN_COLUMNS: &str =
    "id, scope, session_id, label, kind, created_at, expires_at, revoked_at";

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
