//! Tokens stop working everywhere at once, and a valid token is read from the store once
//! rather than on every request. Every long-lived connection (a pty-ws socket, an SSE
//! stream) holds a `Lease` on the token that authenticated it, and every token that
//! authenticated a request lately is remembered with its principal. One watcher reads the
//! leased and remembered tokens every `CHECK_EVERY`, whichever process revoked them; when
//! one was revoked, has expired or is gone, it is forgotten and every lease on it is cut.
//! A revocation made in this process takes effect before it is answered. The holder of a
//! lease then ends its connection in its binding's words; the cut is an audit record.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::audit::{self, Audit};
use crate::auth::{self, AuthError, Principal};
use crate::clock;
use crate::store::Store;

/// How often leased and remembered tokens are read: a token revoked by another process is
/// refused, and its connections end, within this (and the time their goodbye takes).
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// A remembered token not used for this long is forgotten (and no longer read).
const REMEMBER_IDLE: Duration = Duration::from_secs(60);

/// At most this many tokens are remembered; the least recently used goes first.
const REMEMBER_AT_MOST: usize = 4096;

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

/// The leases of every token with an open connection, and the tokens remembered.
#[derive(Clone)]
pub struct Revocations {
    held: Arc<Mutex<Held>>,
    audit: Audit,
}

#[derive(Default)]
struct Held {
    /// By token id.
    leases: HashMap<String, watch::Sender<Option<Cut>>>,
    /// By token hash.
    known: HashMap<String, Known>,
    /// Counts revocations made in this process: a lookup that overlapped one is not
    /// remembered.
    revoked: u64,
}

struct Known {
    principal: Principal,
    expires_at: Option<i64>,
    used: Instant,
}

impl Held {
    /// The ids of the tokens to read, after forgetting idle ones and unheld leases.
    fn watched(&mut self) -> Vec<String> {
        self.leases.retain(|_, leases| leases.receiver_count() > 0);
        self.known.retain(|_, k| k.used.elapsed() < REMEMBER_IDLE);
        let known = self.known.values().map(|k| &k.principal.token_id);
        let ids: HashSet<&String> = self.leases.keys().chain(known).collect();
        ids.into_iter().cloned().collect()
    }

    /// Forgets token `id` and cuts its leases.
    fn cut(&mut self, id: &str, cut: Cut) {
        self.known.retain(|_, k| k.principal.token_id != id);
        if let Some(leases) = self.leases.remove(id) {
            leases.send_replace(Some(cut));
        }
    }

    fn remember(&mut self, hash: String, known: Known) {
        if self.known.len() >= REMEMBER_AT_MOST
            && let Some(oldest) = self
                .known
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(h, _)| h.clone())
        {
            self.known.remove(&oldest);
        }
        self.known.insert(hash, known);
    }
}

impl Revocations {
    /// Starts the watcher; it stops when every `Revocations` is dropped.
    pub fn start(store: Store, audit: Audit) -> Revocations {
        let revocations = Revocations {
            held: Arc::default(),
            audit,
        };
        let held = Arc::downgrade(&revocations.held);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CHECK_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(held) = held.upgrade() else {
                    return;
                };
                let ids = held.lock().unwrap().watched();
                if ids.is_empty() {
                    continue;
                }
                let rows = match store.tokens().by_ids(&ids).await {
                    Ok(rows) => rows,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "reading watched tokens failed");
                        continue;
                    }
                };
                let now = clock::now_ms();
                let rows: HashMap<_, _> = rows.into_iter().map(|r| (r.id.clone(), r)).collect();
                let mut held = held.lock().unwrap();
                for id in ids {
                    let cut = match rows.get(&id) {
                        None => Some(Cut::Revoked),
                        Some(r) if r.revoked_at.is_some() => Some(Cut::Revoked),
                        Some(r) if r.expires_at.is_some_and(|e| e <= now) => Some(Cut::Expired),
                        Some(_) => None,
                    };
                    if let Some(cut) = cut {
                        held.cut(&id, cut);
                    }
                }
            }
        });
        revocations
    }

    /// Who `token` is: remembered, or read from the store (and then remembered).
    pub async fn authenticate(
        &self,
        store: &Store,
        token: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let token = token.filter(|t| !t.is_empty()).ok_or(AuthError::Missing)?;
        let hash = auth::hash(token);
        let revoked = {
            let mut held = self.held.lock().unwrap();
            let now = clock::now_ms();
            match held.known.get_mut(&hash) {
                Some(k) if k.expires_at.is_none_or(|e| e > now) => {
                    k.used = Instant::now();
                    auth::note_authenticated();
                    return Ok(k.principal.clone());
                }
                Some(_) => {
                    held.known.remove(&hash);
                    return Err(AuthError::Invalid);
                }
                None => held.revoked,
            }
        };
        let (principal, expires_at) = auth::lookup(store, &hash).await?;
        let mut held = self.held.lock().unwrap();
        if held.revoked == revoked {
            let known = Known {
                principal: principal.clone(),
                expires_at,
                used: Instant::now(),
            };
            held.remember(hash, known);
        }
        Ok(principal)
    }

    /// Token `id` was revoked in this process: it is refused from now on, and the
    /// connections it opened are cut.
    pub fn revoked(&self, id: &str) {
        let mut held = self.held.lock().unwrap();
        held.revoked += 1;
        held.cut(id, Cut::Revoked);
    }

    /// A lease on `who`'s token for one connection (`what`: "pty-ws", "sse"), on
    /// `session_id` when it has one.
    pub fn lease(&self, who: &Principal, what: &'static str, session_id: Option<&str>) -> Lease {
        let mut held = self.held.lock().unwrap();
        let cut = held
            .leases
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
            detail: audit::Detail::Cut {
                connection: self.what.to_owned(),
                reason: cut.name().to_owned(),
            },
        });
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scope;

    fn known(id: &str) -> Known {
        Known {
            principal: Principal {
                token_id: id.into(),
                scope: Scope::Observe,
                session_id: None,
                label: None,
                share_link: false,
            },
            expires_at: None,
            used: Instant::now(),
        }
    }

    #[test]
    fn remembering_past_the_bound_forgets_the_least_recently_used_token() {
        let mut held = Held::default();
        let start = Instant::now();
        for i in 0..REMEMBER_AT_MOST {
            let mut k = known(&format!("t{i}"));
            k.used = start + Duration::from_millis(i as u64);
            held.remember(format!("h{i}"), k);
        }
        held.known.get_mut("h0").unwrap().used = start + Duration::from_secs(60);
        held.remember("new".into(), known("t-new"));
        assert_eq!(held.known.len(), REMEMBER_AT_MOST);
        assert!(held.known.contains_key("h0") && held.known.contains_key("new"));
        assert!(!held.known.contains_key("h1"), "h1 was used least recently");
    }

    #[test]
    fn a_cut_token_is_forgotten_and_its_leases_hear_why() {
        let mut held = Held::default();
        held.remember("h".into(), known("t"));
        let (sender, mut lease) = watch::channel(None);
        held.leases.insert("t".into(), sender);
        assert_eq!(held.watched(), vec!["t".to_owned()]);
        held.cut("t", Cut::Revoked);
        assert!(held.known.is_empty() && held.leases.is_empty());
        assert_eq!(*lease.borrow_and_update(), Some(Cut::Revoked));
    }
}
