//! Bearer tokens and scopes. Tokens are random, shown once, and stored only as SHA-256
//! hashes; a principal is what a valid token grants.

use std::fmt;

use anyhow::Result;
use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::clock;
use crate::store::{NewToken, Store};

/// `pty:observe` < `pty:control` < `pty:admin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Observe,
    Control,
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Observe => "pty:observe",
            Scope::Control => "pty:control",
            Scope::Admin => "pty:admin",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pty:observe" => Ok(Scope::Observe),
            "pty:control" => Ok(Scope::Control),
            "pty:admin" => Ok(Scope::Admin),
            other => Err(format!(
                "unknown scope {other:?} (expected pty:observe, pty:control or pty:admin)"
            )),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is calling: the token's id (never the token), scope and optional session binding.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    pub token_id: String,
    pub scope: Scope,
    pub session_id: Option<String>,
    pub label: Option<String>,
    /// The token is a read-only observer link.
    pub share_link: bool,
}

impl Principal {
    /// Whether this principal may see the session at all (a bound token sees only its own).
    pub fn sees_session(&self, session_id: &str) -> bool {
        self.session_id.as_deref().is_none_or(|s| s == session_id)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("unknown, expired or revoked token")]
    Invalid,
}

/// A token that was just created; `secret` is shown once and then only its hash exists.
pub struct Issued {
    pub id: String,
    pub secret: String,
    pub expires_at: Option<i64>,
}

pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("pth_{}", URL_SAFE_NO_PAD.encode(bytes))
}

pub struct TokenRequest<'a> {
    pub scope: Scope,
    pub session_id: Option<&'a str>,
    pub label: Option<&'a str>,
    pub ttl: Option<std::time::Duration>,
    pub kind: &'a str,
    /// A caller-chosen secret (the bootstrap token); random when absent.
    pub secret: Option<&'a str>,
}

pub async fn issue(store: &Store, req: TokenRequest<'_>) -> Result<Issued> {
    let secret = req.secret.map(str::to_owned).unwrap_or_else(random_token);
    let now = clock::now_ms();
    let expires_at = req.ttl.map(|d| now + d.as_millis() as i64);
    let id = uuid::Uuid::now_v7().to_string();
    store
        .tokens()
        .insert(NewToken {
            id: &id,
            hash: &hash(&secret),
            scope: req.scope.as_str(),
            session_id: req.session_id,
            label: req.label,
            kind: req.kind,
            created_at: now,
            expires_at,
        })
        .await?;
    Ok(Issued {
        id,
        secret,
        expires_at,
    })
}

/// Ensures an admin token with exactly this value exists (`--bootstrap-token`), also when
/// several nodes of a cluster start with it at once.
pub async fn ensure_bootstrap(store: &Store, secret: &str) -> Result<()> {
    let exists = || async { anyhow::Ok(store.tokens().by_hash(&hash(secret)).await?.is_some()) };
    if exists().await? {
        return Ok(());
    }
    let request = TokenRequest {
        scope: Scope::Admin,
        session_id: None,
        label: Some("bootstrap"),
        ttl: None,
        kind: "bootstrap",
        secret: Some(secret),
    };
    match issue(store, request).await {
        Ok(_) => Ok(()),
        // Another node made it between the two statements.
        Err(_) if exists().await? => Ok(()),
        Err(e) => Err(e),
    }
}

tokio::task_local! {
    /// Set inside `noting_authentication` when a token authenticates.
    static AUTHENTICATED: std::cell::Cell<bool>;
}

/// Runs `request`, and says whether a token authenticated during it.
pub async fn noting_authentication<F: std::future::Future>(request: F) -> (F::Output, bool) {
    let noted = async {
        let output = request.await;
        (output, AUTHENTICATED.with(std::cell::Cell::get))
    };
    AUTHENTICATED
        .scope(std::cell::Cell::new(false), noted)
        .await
}

/// Notes, for `noting_authentication`, that a token authenticated the request.
pub fn note_authenticated() {
    let _ = AUTHENTICATED.try_with(|noted| noted.set(true));
}

/// The principal of the valid token whose hash is `hash`, and when the token expires, read
/// from the store (`Revocations::authenticate` remembers it).
pub async fn lookup(store: &Store, hash: &str) -> Result<(Principal, Option<i64>), AuthError> {
    let row = store
        .tokens()
        .by_hash(hash)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "token lookup failed");
            AuthError::Invalid
        })?
        .ok_or(AuthError::Invalid)?;
    let now = clock::now_ms();
    if row.revoked_at.is_some() || row.expires_at.is_some_and(|e| e <= now) {
        return Err(AuthError::Invalid);
    }
    note_authenticated();
    let principal = Principal {
        token_id: row.id,
        scope: row.scope.parse().map_err(|_| AuthError::Invalid)?,
        session_id: row.session_id,
        label: row.label,
        share_link: row.kind == "share",
    };
    Ok((principal, row.expires_at))
}

/// The token of an `Authorization: Bearer …` header.
pub fn bearer_from_authorization(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// The token of a `bearer.<base64url>` entry in `Sec-WebSocket-Protocol`.
pub fn bearer_from_subprotocols<'a>(entries: impl Iterator<Item = &'a str>) -> Option<String> {
    entries
        .filter_map(|e| e.strip_prefix(wire::BEARER_SUBPROTOCOL_PREFIX))
        .find_map(|b64| {
            URL_SAFE_NO_PAD
                .decode(b64)
                .or_else(|_| URL_SAFE.decode(b64))
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_ordered_observe_control_admin() {
        assert!(Scope::Observe < Scope::Control && Scope::Control < Scope::Admin);
        assert_eq!("pty:control".parse::<Scope>(), Ok(Scope::Control));
        assert!("pty:root".parse::<Scope>().is_err());
    }

    #[test]
    fn subprotocol_bearer_decodes_with_or_without_padding() {
        let t = "pth_abc";
        let nopad = format!("bearer.{}", URL_SAFE_NO_PAD.encode(t));
        let pad = format!("bearer.{}", URL_SAFE.encode(t));
        for entry in [nopad, pad] {
            let got = bearer_from_subprotocols(["pty-ws.v1", entry.as_str()].into_iter());
            assert_eq!(got.as_deref(), Some(t));
        }
    }

    #[test]
    fn hash_is_hex_sha256_and_random_tokens_differ() {
        assert_eq!(hash("abc").len(), 64);
        assert_ne!(random_token(), random_token());
    }
}

/// Short-lived stand-ins for a token, kept in memory: a port preview's cookie carries one,
/// so the token itself never rides in a URL or a cookie. A ticket names the token it stands
/// for, which is authenticated again on every use (a revoked token's tickets fail).
#[derive(Debug, Default)]
pub struct Tickets {
    held: std::sync::Mutex<std::collections::HashMap<String, (String, std::time::Instant)>>,
}

/// At most this many tickets are held; the oldest go first.
const MAX_TICKETS: usize = 10_000;

impl Tickets {
    /// A new ticket for `token`, valid for `ttl`.
    pub fn issue(&self, token: &str, ttl: std::time::Duration) -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let ticket = URL_SAFE_NO_PAD.encode(bytes);
        let now = std::time::Instant::now();
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|_, (_, until)| *until > now);
        if held.len() >= MAX_TICKETS
            && let Some(oldest) = held
                .iter()
                .min_by_key(|(_, (_, until))| *until)
                .map(|(k, _)| k.clone())
        {
            held.remove(&oldest);
        }
        held.insert(ticket.clone(), (token.to_owned(), now + ttl));
        ticket
    }

    /// The token a live ticket stands for.
    pub fn token(&self, ticket: &str) -> Option<String> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(ticket)
            .filter(|(_, until)| *until > std::time::Instant::now())
            .map(|(token, _)| token.clone())
    }
}
