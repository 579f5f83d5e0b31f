//! Tokens stop working everywhere at once. Every long-lived connection (a pty-ws socket,
//! an SSE stream) holds a `Lease` on the token that authenticated it; one watcher reads
//! the leased tokens every `CHECK_EVERY`, whichever process revoked them, and when one was
//! revoked, has expired or is gone, every lease on it is cut. The holder then ends its
//! connection in its binding's words; the cut is an audit record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;

use crate::audit::{self, Audit};
use crate::auth::Principal;
use crate::clock;
use crate::store::Store;

/// How often leased tokens are read: a revoked token's connections end within this (and
/// the time their goodbye takes).
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Why a lease was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    Revoked,
    Expired,
}

impl Cut {
    pub fn message(self) -> &'static str {
        match self {
            Cut::Revoked => "the token that authenticated this connection was revoked",
            Cut::Expired => "the token that authenticated this connection has expired",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cut::Revoked => "revoked",
            Cut::Expired => "expired",
        }
    }
}

/// The leases of every token with an open connection.
#[derive(Clone)]
pub struct Revocations {
    tokens: Arc<Mutex<HashMap<String, watch::Sender<Option<Cut>>>>>,
    audit: Audit,
}

impl Revocations {
    /// Starts the watcher; it stops when every `Revocations` is dropped.
    pub fn start(store: Store, audit: Audit) -> Revocations {
        let revocations = Revocations {
            tokens: Arc::default(),
            audit,
        };
        let tokens = Arc::downgrade(&revocations.tokens);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CHECK_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(tokens) = tokens.upgrade() else {
                    return;
                };
                let ids: Vec<String> = {
                    let mut tokens = tokens.lock().unwrap();
                    tokens.retain(|_, leases| leases.receiver_count() > 0);
                    tokens.keys().cloned().collect()
                };
                if ids.is_empty() {
                    continue;
                }
                let rows = match store.tokens_by_id(&ids).await {
                    Ok(rows) => rows,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "reading leased tokens failed");
                        continue;
                    }
                };
                let now = clock::now_ms();
                let rows: HashMap<_, _> = rows.into_iter().map(|r| (r.id.clone(), r)).collect();
                let mut tokens = tokens.lock().unwrap();
                for id in ids {
                    let cut = match rows.get(&id) {
                        None => Some(Cut::Revoked),
                        Some(r) if r.revoked_at.is_some() => Some(Cut::Revoked),
                        Some(r) if r.expires_at.is_some_and(|e| e <= now) => Some(Cut::Expired),
                        Some(_) => None,
                    };
                    if let Some(leases) = cut.and_then(|_| tokens.remove(&id)) {
                        leases.send_replace(cut);
                    }
                }
            }
        });
        revocations
    }

    /// A lease on `who`'s token for one connection (`what`: "pty-ws", "sse"), on
    /// `session_id` when it has one.
    pub fn lease(&self, who: &Principal, what: &'static str, session_id: Option<&str>) -> Lease {
        let mut tokens = self.tokens.lock().unwrap();
        let cut = tokens
            .entry(who.token_id.clone())
            .or_insert_with(|| watch::channel(None).0)
            .subscribe();
        Lease {
            cut,
            token_id: who.token_id.clone(),
            what,
            session_id: session_id.map(str::to_owned),
            audit: self.audit.clone(),
        }
    }
}

/// One connection's hold on its token; dropping it ends the hold.
pub struct Lease {
    cut: watch::Receiver<Option<Cut>>,
    token_id: String,
    what: &'static str,
    session_id: Option<String>,
    audit: Audit,
}

impl Lease {
    /// Resolves when the token stops being valid, and records the cut.
    pub async fn cut(&mut self) -> Cut {
        let cut = match self.cut.wait_for(Option::is_some).await {
            Ok(cut) => *cut,
            Err(_) => None,
        };
        let Some(cut) = cut else {
            return std::future::pending().await;
        };
        self.audit.record(audit::Record {
            event: audit::Event::ConnectionCut,
            session_id: self.session_id.clone(),
            token_id: Some(self.token_id.clone()),
            client_id: None,
            detail: json!({ "connection": self.what, "reason": cut.name() }),
        });
        cut
    }
}
