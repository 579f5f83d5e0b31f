//! Which TCP connections the server takes: at most `max_open` at once, and from one address
//! at most `max_unauthenticated` that have not yet authenticated a request. A connection
//! is admitted with an RAII `Admitted` that gives its places back when dropped; the first
//! request on it that authenticates a token moves it out of its address's count. When the
//! server is full, the oldest connection that never authenticated is evicted to make room
//! (a slowloris spread over many addresses cannot lock out a health check or an operator);
//! only when every connection has authenticated is a new one turned away.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy)]
pub struct AdmissionSettings {
    pub max_open: usize,
    pub max_unauthenticated: usize,
}

/// Why a connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turned {
    /// The server holds `max_open` connections, every one authenticated.
    Full,
    /// The address holds `max_unauthenticated` connections that never authenticated.
    Address,
}

#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

struct Inner {
    settings: AdmissionSettings,
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    open: usize,
    unauthenticated: HashMap<IpAddr, usize>,
    /// Connections that never authenticated, oldest first, and how to evict each.
    evictable: BTreeMap<u64, CancellationToken>,
    next: u64,
}

impl Admission {
    pub fn new(settings: AdmissionSettings) -> Admission {
        Admission {
            inner: Arc::new(Inner {
                settings,
                counts: Mutex::default(),
            }),
        }
    }

    pub fn admit(&self, ip: IpAddr) -> Result<Admitted, Turned> {
        let settings = self.inner.settings;
        let mut counts = self.inner.counts.lock().unwrap();
        if counts
            .unauthenticated
            .get(&ip)
            .is_some_and(|n| *n >= settings.max_unauthenticated)
        {
            return Err(Turned::Address);
        }
        if counts.open >= settings.max_open {
            // Its places are given back when its connection has closed.
            let (_, oldest) = counts.evictable.pop_first().ok_or(Turned::Full)?;
            oldest.cancel();
        }
        *counts.unauthenticated.entry(ip).or_default() += 1;
        counts.open += 1;
        let (seq, evicted) = (counts.next, CancellationToken::new());
        counts.next += 1;
        counts.evictable.insert(seq, evicted.clone());
        Ok(Admitted {
            admission: self.clone(),
            ip,
            seq,
            evicted,
            authenticated: AtomicBool::new(false),
        })
    }

    /// Connections open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.inner.counts.lock().unwrap().open
    }

    fn leave_pending(counts: &mut Counts, ip: IpAddr, seq: u64) {
        counts.evictable.remove(&seq);
        if let Some(n) = counts.unauthenticated.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                counts.unauthenticated.remove(&ip);
            }
        }
    }
}

/// One admitted connection.
pub struct Admitted {
    admission: Admission,
    ip: IpAddr,
    seq: u64,
    evicted: CancellationToken,
    authenticated: AtomicBool,
}

impl Admitted {
    /// A request on this connection authenticated a token: it no longer counts against
    /// its address.
    pub fn authenticated(&self) {
        if !self.authenticated.swap(true, Ordering::AcqRel) {
            let mut counts = self.admission.inner.counts.lock().unwrap();
            Admission::leave_pending(&mut counts, self.ip, self.seq);
        }
    }

    /// Resolves when the server evicts this connection to make room.
    pub async fn evicted(&self) {
        self.evicted.cancelled().await
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut counts = self.admission.inner.counts.lock().unwrap();
        counts.open -= 1;
        if !*self.authenticated.get_mut() {
            Admission::leave_pending(&mut counts, self.ip, self.seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(max_open: usize, max_unauthenticated: usize) -> Admission {
        Admission::new(AdmissionSettings {
            max_open,
            max_unauthenticated,
        })
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn an_address_holds_a_bounded_number_of_unauthenticated_connections() {
        let admission = admission(10, 2);
        let first = admission.admit(ip(2)).unwrap();
        let _second = admission.admit(ip(2)).unwrap();
        assert_eq!(admission.admit(ip(2)).err(), Some(Turned::Address));
        assert!(admission.admit(ip(3)).is_ok());
        first.authenticated();
        first.authenticated();
        let _third = admission.admit(ip(2)).unwrap();
        assert_eq!(admission.admit(ip(2)).err(), Some(Turned::Address));
        drop(first);
        assert_eq!(admission.admit(ip(2)).err(), Some(Turned::Address));
    }

    #[test]
    fn a_full_server_evicts_its_oldest_unauthenticated_connection_and_never_an_authenticated_one() {
        let admission = admission(2, 5);
        let operator = admission.admit(ip(2)).unwrap();
        operator.authenticated();
        let idle = admission.admit(ip(3)).unwrap();
        let newcomer = admission.admit(ip(4)).unwrap();
        assert!(idle.evicted.is_cancelled());
        assert!(!operator.evicted.is_cancelled() && !newcomer.evicted.is_cancelled());
        drop(idle);
        newcomer.authenticated();
        assert_eq!(admission.admit(ip(5)).err(), Some(Turned::Full));
        drop(newcomer);
        assert_eq!(admission.open(), 1);
        assert!(admission.admit(ip(5)).is_ok());
    }
}
