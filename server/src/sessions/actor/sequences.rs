//! The actor's end of the write-behind: the sequences it hands out and has the store
//! reserve ahead, the queue to the writer, and what the writer reports durable. It decides
//! whether the PTY may be read: only while reserved sequences are left and the store keeps
//! up (or refuses writes, and the queue is bounded instead).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

use super::backlog::{self, Persist};
use super::persist::Persisted;

/// Sequences are reserved in the store this far ahead of the last one handed out (and again
/// when half of that is used), so a crash never reuses one a viewer saw.
pub const RESERVE_AHEAD: u64 = 65_536;
/// The PTY is read only while more than this many reserved sequences are left, which keeps
/// them for the frames that do not wait (membership, roles, keyframes).
const RESERVE_HEADROOM: u64 = 1024;
/// The PTY is not read while at least this many frames wait for the store and the oldest
/// of them has waited `MAX_BEHIND_MS`: a crash loses at most that much output, and a store
/// that refuses writes stalls the program instead of losing what it printed.
const MAX_UNPERSISTED: u64 = 8;
const MAX_BEHIND_MS: i64 = 20;
/// While the store refuses writes, the PTY is read on and at most this many bytes of
/// output wait for it; older output is lost from replay (see `backlog`).
const BACKLOG_BYTES: usize = 16 * 1024 * 1024;

pub(super) struct Sequences {
    /// The last sequence handed out.
    seq: u64,
    /// The highest sequence asked of the store so far (`Persisted::reserved` once durable).
    requested: u64,
    /// `seq`, for readers outside the actor.
    shared: Arc<AtomicU64>,
    queue: backlog::Sender,
    persisted: watch::Receiver<Persisted>,
    /// The store refuses writes: output is read on regardless, within `BACKLOG_BYTES`.
    refusing: watch::Receiver<bool>,
}

impl Sequences {
    /// Sequences that go on after `seq` (`shared` shows it), within the reservation the
    /// store reports in `persisted`.
    pub(super) fn new(
        seq: u64,
        shared: Arc<AtomicU64>,
        queue: backlog::Sender,
        persisted: watch::Receiver<Persisted>,
        refusing: watch::Receiver<bool>,
    ) -> Sequences {
        let requested = persisted.borrow().reserved;
        Sequences {
            seq,
            requested,
            shared,
            queue,
            persisted,
            refusing,
        }
    }

    /// The last sequence handed out.
    pub(super) fn current(&self) -> u64 {
        self.seq
    }

    /// The next sequence, and whether the store has reserved it yet (a crash could reuse
    /// one it has not, which the caller reports). Past half the reservation, a new one is
    /// asked of the store.
    pub(super) fn next(&mut self) -> (u64, bool) {
        self.seq += 1;
        self.shared.store(self.seq, Ordering::Release);
        if self.seq + RESERVE_AHEAD / 2 > self.requested {
            self.requested = self.seq + RESERVE_AHEAD;
            self.queue.send(Persist::Reserve(self.requested));
        }
        (self.seq, self.seq <= self.persisted.borrow().reserved)
    }

    /// Queues an operation for the writer.
    pub(super) fn send(&self, op: Persist) {
        self.queue.send(op);
    }

    /// Bounds what waits for a store that refuses writes.
    pub(super) fn shed(&self) {
        self.queue.shed(BACKLOG_BYTES);
    }

    /// The last sequence the backlog shed (not replayable).
    pub(super) fn lost_upto(&self) -> u64 {
        self.queue.lost_upto()
    }

    pub(super) fn persisted(&self) -> Persisted {
        *self.persisted.borrow()
    }

    pub(super) fn refusing(&self) -> bool {
        *self.refusing.borrow()
    }

    /// Whether the PTY may be read now, given when the oldest frame still waiting for the
    /// store after `upto` was made (`oldest_waiting`).
    pub(super) fn may_read(
        &self,
        oldest_waiting: impl FnOnce(u64) -> Option<i64>,
        now: i64,
    ) -> bool {
        let persisted = self.persisted();
        if self.seq + RESERVE_HEADROOM >= persisted.reserved {
            return false;
        }
        if self.refusing() || self.seq - persisted.upto.min(self.seq) < MAX_UNPERSISTED {
            return true;
        }
        oldest_waiting(persisted.upto).is_none_or(|at| now - at < MAX_BEHIND_MS)
    }

    /// Waits until what the store made durable, or whether it refuses writes, changes.
    pub(super) async fn changed(&mut self) {
        tokio::select! {
            _ = self.persisted.changed() => {}
            _ = self.refusing.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequences(
        upto: u64,
        reserved: u64,
    ) -> (
        Sequences,
        watch::Sender<Persisted>,
        watch::Sender<bool>,
        backlog::Receiver,
    ) {
        let from = Persisted {
            upto,
            floor: 0,
            reserved,
        };
        let (queue, rx) = backlog::channel();
        let (persisted_tx, persisted) = watch::channel(from);
        let (refusing_tx, refusing) = watch::channel(false);
        let shared = Arc::new(AtomicU64::new(upto));
        let s = Sequences::new(upto, shared, queue, persisted, refusing);
        (s, persisted_tx, refusing_tx, rx)
    }

    #[test]
    fn a_reservation_is_asked_for_once_half_of_the_last_one_is_used() {
        let (mut s, _p, _r, rx) = sequences(0, RESERVE_AHEAD);
        for _ in 0..RESERVE_AHEAD / 2 {
            s.next();
        }
        assert!(rx.try_recv().is_none(), "nothing asked while half is left");
        let (seq, reserved) = s.next();
        assert_eq!((seq, reserved), (RESERVE_AHEAD / 2 + 1, true));
        let asked = seq + RESERVE_AHEAD;
        assert!(matches!(rx.try_recv(), Some(Persist::Reserve(r)) if r == asked));
    }

    #[test]
    fn a_sequence_past_what_the_store_reserved_is_reported() {
        let (mut s, _p, _r, _rx) = sequences(10, 11);
        assert_eq!(s.next(), (11, true));
        assert_eq!(s.next(), (12, false));
    }

    #[test]
    fn the_pty_waits_for_the_store_near_the_reservation_and_when_it_falls_behind() {
        let (mut s, persisted, refusing, _rx) = sequences(0, 10 * RESERVE_HEADROOM);
        assert!(s.may_read(|_| None, 0), "nothing waits");
        for _ in 0..MAX_UNPERSISTED {
            s.next();
        }
        assert!(
            s.may_read(|_| Some(0), MAX_BEHIND_MS - 1),
            "the oldest is recent"
        );
        assert!(
            !s.may_read(|_| Some(0), MAX_BEHIND_MS),
            "the oldest waited too long"
        );
        refusing.send_replace(true);
        assert!(
            s.may_read(|_| Some(0), MAX_BEHIND_MS),
            "a refusing store is bounded instead"
        );
        persisted.send_modify(|p| p.reserved = s.current() + RESERVE_HEADROOM);
        assert!(
            !s.may_read(|_| None, 0),
            "too few reserved sequences are left"
        );
    }
}
