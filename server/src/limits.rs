//! Abuse limits on pty-ws: new connections and client frames are rate-limited per principal
//! (token) and per instance (GCRA, governor), and each session takes a bounded number of
//! concurrent connections, held by an RAII slot.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The instance-wide budgets are this many times a principal's.
const INSTANCE_FACTOR: u32 = 10;
/// A limiter lets this many seconds' worth through at once.
const BURST_SECONDS: u32 = 2;

#[derive(Debug, Clone, Copy)]
pub struct LimitSettings {
    /// New connections per principal per second.
    pub connections_per_sec: u32,
    /// Client frames per principal per second.
    pub frames_per_sec: u32,
    /// Concurrent connections per session.
    pub connections_per_session: usize,
}

#[derive(Clone)]
pub struct Limits {
    inner: Arc<Inner>,
}

struct Inner {
    settings: LimitSettings,
    connections: (DefaultKeyedRateLimiter<String>, DefaultDirectRateLimiter),
    frames: (DefaultKeyedRateLimiter<String>, DefaultDirectRateLimiter),
    sessions: Mutex<HashMap<String, usize>>,
}

/// Why something was refused, and when to try again.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitRefusal {
    pub message: String,
    pub retry_after: Duration,
}

fn quota(per_sec: u32) -> Quota {
    let rate = NonZeroU32::new(per_sec.max(1)).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(per_sec.max(1).saturating_mul(BURST_SECONDS)).unwrap_or(rate);
    Quota::per_second(rate).allow_burst(burst)
}

fn pair(per_sec: u32) -> (DefaultKeyedRateLimiter<String>, DefaultDirectRateLimiter) {
    (
        RateLimiter::keyed(quota(per_sec)),
        RateLimiter::direct(quota(per_sec.saturating_mul(INSTANCE_FACTOR))),
    )
}

/// One check against a principal's budget, then the instance's.
fn check(
    (per_principal, per_instance): &(DefaultKeyedRateLimiter<String>, DefaultDirectRateLimiter),
    principal: &str,
    what: &str,
) -> Result<(), LimitRefusal> {
    let (whose, outcome) = match per_principal.check_key(&principal.to_owned()) {
        Err(n) => ("this token", Err(n)),
        Ok(()) => ("this server", per_instance.check()),
    };
    outcome.map_err(|n| LimitRefusal {
        message: format!("too many {what} for {whose}; slow down"),
        // Read only on a refusal: making a clock per frame costs a CPUID, which a VM traps.
        retry_after: n.wait_time_from(per_instance.clock().now()),
    })
}

impl Limits {
    pub fn new(settings: LimitSettings) -> Limits {
        let limits = Limits {
            inner: Arc::new(Inner {
                settings,
                connections: pair(settings.connections_per_sec),
                frames: pair(settings.frames_per_sec),
                sessions: Mutex::new(HashMap::new()),
            }),
        };
        // Keyed limiters keep a cell per principal: forget the idle ones now and then.
        let weak = Arc::downgrade(&limits.inner);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            loop {
                every.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                inner.connections.0.retain_recent();
                inner.frames.0.retain_recent();
            }
        });
        limits
    }

    /// A new connection of `principal` (a token id).
    pub fn connection(&self, principal: &str) -> Result<(), LimitRefusal> {
        check(&self.inner.connections, principal, "new connections")
    }

    /// One client frame of `principal`.
    pub fn frame(&self, principal: &str) -> Result<(), LimitRefusal> {
        check(&self.inner.frames, principal, "frames")
    }

    /// A connection slot on `session_id`, released when dropped.
    pub fn session_slot(&self, session_id: &str) -> Result<SessionSlot, LimitRefusal> {
        let mut sessions = self.inner.sessions.lock().unwrap();
        let count = sessions.entry(session_id.to_owned()).or_default();
        let cap = self.inner.settings.connections_per_session;
        if *count >= cap {
            return Err(LimitRefusal {
                message: format!("session {session_id} has its maximum of {cap} connections"),
                retry_after: Duration::from_secs(1),
            });
        }
        *count += 1;
        Ok(SessionSlot {
            limits: self.clone(),
            session_id: session_id.to_owned(),
        })
    }
}

/// One of a session's connection slots.
pub struct SessionSlot {
    limits: Limits,
    session_id: String,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut sessions = self.limits.inner.sessions.lock().unwrap();
        if let Some(count) = sessions.get_mut(&self.session_id) {
            *count -= 1;
            if *count == 0 {
                sessions.remove(&self.session_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(connections_per_session: usize) -> Limits {
        Limits::new(LimitSettings {
            connections_per_sec: 2,
            frames_per_sec: 5,
            connections_per_session,
        })
    }

    #[tokio::test]
    async fn a_principal_over_its_budget_is_refused_and_others_are_not() {
        let l = limits(8);
        let admitted = (0..20).filter(|_| l.frame("a").is_ok()).count();
        assert_eq!(admitted, 10, "a burst of two seconds' worth");
        let refused = l.frame("a").unwrap_err();
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(1)
        );
        assert!(l.frame("b").is_ok(), "budgets are per principal");
        assert_eq!((0..10).filter(|_| l.connection("a").is_ok()).count(), 4);
    }

    #[tokio::test]
    async fn session_slots_are_capped_and_freed_on_drop() {
        let l = limits(2);
        let a = l.session_slot("s").unwrap();
        let _b = l.session_slot("s").unwrap();
        assert!(l.session_slot("s").is_err());
        assert!(l.session_slot("t").is_ok());
        drop(a);
        assert!(l.session_slot("s").is_ok());
    }
}
