//! The queue from the actor to its write-behind. While the store keeps up it never grows
//! far: the actor stops reading the PTY when too much waits (`MAX_UNPERSISTED`). While the
//! store refuses writes the actor reads on, and the queue sheds its oldest frames past a
//! byte bound, remembering the newest it shed: that much history is lost, and the replay
//! floor moves past it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, oneshot};
use wire::CloseReason;

use crate::store::Frame;

/// One write the actor asks of its write-behind.
pub(super) enum Persist {
    Frame(Frame),
    /// Sequences up to this one may be handed out.
    Reserve(u64),
    /// Everything queued so far is written.
    Flush(oneshot::Sender<()>),
    Size(u16, u16),
    Close {
        exit_code: Option<i32>,
        reason: CloseReason,
        done: oneshot::Sender<()>,
    },
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    ready: Notify,
}

#[derive(Default)]
struct State {
    ops: VecDeque<Persist>,
    /// The bytes of the frames in `ops`.
    frame_bytes: usize,
    /// The newest sequence shed unpersisted (0: none).
    lost_upto: u64,
    closed: bool,
}

/// The actor's end; dropping it ends the write-behind once the queue is drained.
pub(super) struct Sender(Arc<Shared>);

/// The write-behind's end.
pub(super) struct Receiver(Arc<Shared>);

pub(super) fn channel() -> (Sender, Receiver) {
    let shared = Arc::new(Shared::default());
    (Sender(shared.clone()), Receiver(shared))
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Sender {
    pub(super) fn send(&self, op: Persist) {
        let mut state = self.0.state();
        if let Persist::Frame(f) = &op {
            state.frame_bytes += f.size();
        }
        state.ops.push_back(op);
        drop(state);
        self.0.ready.notify_one();
    }

    /// Drops the oldest queued frames until their bytes are within `cap`; the other
    /// operations stay, in order.
    pub(super) fn shed(&self, cap: usize) {
        let mut state = self.0.state();
        while state.frame_bytes > cap {
            let Some(i) = state
                .ops
                .iter()
                .position(|o| matches!(o, Persist::Frame(_)))
            else {
                break;
            };
            if let Some(Persist::Frame(f)) = state.ops.remove(i) {
                state.frame_bytes -= f.size();
                state.lost_upto = state.lost_upto.max(f.sequence);
            }
        }
    }

    pub(super) fn lost_upto(&self) -> u64 {
        self.0.state().lost_upto
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.state().closed = true;
        self.0.ready.notify_one();
    }
}

impl Receiver {
    /// The next operation; `None` once the actor is gone and everything it sent is taken.
    pub(super) async fn recv(&self) -> Option<Persist> {
        loop {
            {
                let mut state = self.0.state();
                if let Some(op) = state.take() {
                    return Some(op);
                }
                if state.closed {
                    return None;
                }
            }
            self.0.ready.notified().await;
        }
    }

    pub(super) fn try_recv(&self) -> Option<Persist> {
        self.0.state().take()
    }

    pub(super) fn lost_upto(&self) -> u64 {
        self.0.state().lost_upto
    }
}

impl State {
    fn take(&mut self) -> Option<Persist> {
        let op = self.ops.pop_front()?;
        if let Persist::Frame(f) = &op {
            self.frame_bytes -= f.size();
        }
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::store::{Frame, FrameBody};

    fn frame(sequence: u64, len: usize) -> Persist {
        Persist::Frame(Frame {
            sequence,
            created_at: 0,
            body: FrameBody::Output {
                envelope_id: String::new(),
                data: Bytes::from(vec![b'x'; len]),
            },
        })
    }

    fn sequences(rx: &Receiver) -> Vec<Option<u64>> {
        std::iter::from_fn(|| rx.try_recv())
            .map(|op| match op {
                Persist::Frame(f) => Some(f.sequence),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn shedding_drops_the_oldest_frames_keeps_other_operations_and_remembers_the_loss() {
        let (tx, rx) = channel();
        tx.send(frame(1, 10));
        tx.send(Persist::Reserve(100));
        for seq in 2..=5 {
            tx.send(frame(seq, 10));
        }
        tx.shed(25);
        assert_eq!(tx.lost_upto(), 3);
        assert_eq!(rx.lost_upto(), 3);
        assert_eq!(sequences(&rx), [None, Some(4), Some(5)]);
    }

    #[test]
    fn a_queue_within_its_bound_loses_nothing() {
        let (tx, rx) = channel();
        for seq in 1..=3 {
            tx.send(frame(seq, 10));
        }
        tx.shed(30);
        assert_eq!(rx.lost_upto(), 0);
        assert_eq!(sequences(&rx), [Some(1), Some(2), Some(3)]);
    }

    #[tokio::test]
    async fn the_receiver_drains_what_was_sent_before_the_sender_went() {
        let (tx, rx) = channel();
        tx.send(frame(1, 1));
        drop(tx);
        assert!(matches!(rx.recv().await, Some(Persist::Frame(_))));
        assert!(rx.recv().await.is_none());
    }
}
