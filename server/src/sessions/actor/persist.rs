//! The write-behind: frames persisted in batches, the session's size and close, retention.

use tokio::sync::watch;
use tokio::time::Instant;
use wire::CloseReason;

use super::backlog::{self, Persist};
use super::{BATCH_WINDOW, PRUNE_INTERVAL};
use crate::clock;
use crate::sessions::SessionSettings;
use crate::store::{Frame, Store};

/// What the write-behind task has made durable: every frame up to `upto`, every retained
/// frame after `floor` (below it, retention has pruned), and the reservation of sequences
/// up to `reserved`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Persisted {
    pub upto: u64,
    pub floor: u64,
    pub(super) reserved: u64,
}

/// At most this many bytes of frames go into one batch.
const BATCH_BYTES: usize = 4 * 1024 * 1024;

/// Persists frames in batches, the session's size and its close; prunes frames outside both
/// retention bounds. A batch is what queued up within `BATCH_WINDOW` of its first frame (or
/// while the last batch was written): typing then costs one transaction per burst, written
/// after its echo went out rather than beside it.
pub(super) async fn write_behind(
    store: Store,
    id: String,
    rx: backlog::Receiver,
    persisted: watch::Sender<Persisted>,
    settings: SessionSettings,
) {
    let stored = store.frames().session_bytes(&id).await.unwrap_or(0);
    let mut w = Writer {
        store,
        id,
        backlog: rx,
        persisted,
        frames: Vec::new(),
        stored,
    };
    let mut last_prune = Instant::now();
    let mut since_prune = 0usize;
    while let Some(first) = w.backlog.recv().await {
        if matches!(first, Persist::Frame(_)) {
            tokio::time::sleep(BATCH_WINDOW).await;
        }
        let mut ops = vec![first];
        let mut bytes = 0;
        while ops.len() < 1024 && bytes < BATCH_BYTES {
            let Some(op) = w.backlog.try_recv() else {
                break;
            };
            if let Persist::Frame(f) = &op {
                bytes += f.size();
            }
            ops.push(op);
        }
        for op in ops {
            match op {
                Persist::Frame(f) => {
                    since_prune += 1;
                    w.frames.push(f);
                }
                Persist::Reserve(upto) => w.reserve(upto).await,
                Persist::Flush(done) => {
                    w.flush().await;
                    let _ = done.send(());
                }
                Persist::Size(cols, rows) => {
                    w.flush().await;
                    if let Err(e) = w.store.sessions().set_size(&w.id, cols, rows).await {
                        tracing::error!(session_id = %w.id, error = %e, "persisting size failed");
                    }
                }
                Persist::Close {
                    exit_code,
                    reason,
                    done,
                } => {
                    w.close(exit_code, reason).await;
                    let _ = done.send(());
                }
            }
        }
        w.flush().await;
        if since_prune >= settings.replay_frames || last_prune.elapsed() >= PRUNE_INTERVAL {
            last_prune = Instant::now();
            since_prune = 0;
            w.prune(&settings).await;
        }
        let cap = settings.replay_max_bytes.min(settings.budget.get());
        if w.stored > cap {
            w.prune_to_bytes(cap).await;
        }
    }
}

/// The write-behind's state: the batch being gathered and what the session's frames take in
/// the store.
struct Writer {
    store: Store,
    id: String,
    backlog: backlog::Receiver,
    persisted: watch::Sender<Persisted>,
    frames: Vec<Frame>,
    stored: u64,
}

impl Writer {
    /// Writes the batch. A write the store refuses is retried (backing off up to a second)
    /// until it succeeds: the frames stay unpersisted meanwhile, so the ring keeps them.
    /// Frames the backlog shed while the store was down are history lost: once the store
    /// takes writes again, the replay floor moves past them, so replay reports that range
    /// instead of handing out a gap.
    async fn flush(&mut self) {
        let (store, id) = (&self.store, self.id.as_str());
        let Some(last) = self.frames.last().map(|f| f.sequence) else {
            return;
        };
        let first = self.frames[0].sequence;
        let what = format!("persisting frames of session {id}");
        let frames = &self.frames;
        let bytes = store
            .until_written(&what, || store.frames().insert(id, frames))
            .await;
        tracing::trace!(session_id = %id, first, last, bytes, "persisted frames");
        self.frames.clear();
        self.stored += bytes;
        self.persisted.send_modify(|p| p.upto = last);
        let lost = self.backlog.lost_upto();
        if lost > self.persisted.borrow().floor {
            let what = format!("moving the replay floor of session {id} past lost frames");
            store
                .until_written(&what, || store.frames().raise_replay_floor(id, lost))
                .await;
            tracing::warn!(session_id = %id, lost_upto = lost, "frames the store refused are lost from replay");
            self.persisted.send_modify(|p| p.floor = p.floor.max(lost));
            self.stored = store
                .frames()
                .session_bytes(id)
                .await
                .unwrap_or(self.stored);
        }
    }

    async fn close(&mut self, exit_code: Option<i32>, reason: CloseReason) {
        self.flush().await;
        let last = self.persisted.borrow().upto;
        let reason = serde_json::to_value(reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        if let Err(e) = self
            .store
            .sessions()
            .close(&self.id, exit_code, &reason, last, clock::now_ms())
            .await
        {
            tracing::error!(session_id = %self.id, error = %e, "persisting close failed");
        }
    }

    /// Holds the session's stored frames to `cap` bytes: the oldest go (down to nine tenths
    /// of it, so this does not run at every batch) and the replay floor moves past them.
    async fn prune_to_bytes(&mut self, cap: u64) {
        let id = self.id.as_str();
        match self.store.frames().prune_to_bytes(id, cap / 10 * 9).await {
            Ok(Some(floor)) => {
                tracing::debug!(session_id = %id, floor, cap, "pruned replay frames to the byte cap");
                self.persisted.send_modify(|p| p.floor = p.floor.max(floor));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(session_id = %id, error = %e, "pruning frames to the byte cap failed")
            }
        }
        self.stored = self.store.frames().session_bytes(id).await.unwrap_or(cap);
    }

    /// Reserves sequences up to `upto`, retrying until the store takes it.
    async fn reserve(&self, upto: u64) {
        let (store, id) = (&self.store, self.id.as_str());
        let what = format!("reserving sequences of session {id}");
        store
            .until_written(&what, || store.frames().reserve_sequences(id, upto))
            .await;
        self.persisted
            .send_modify(|p| p.reserved = p.reserved.max(upto));
    }

    /// Drops the frames outside both retention bounds (count and age).
    async fn prune(&self, settings: &SessionSettings) {
        let id = self.id.as_str();
        let upto = self
            .persisted
            .borrow()
            .upto
            .saturating_sub(settings.replay_frames as u64);
        let before = clock::now_ms() - settings.replay_retention.as_millis() as i64;
        match self.store.frames().prune(id, upto, before).await {
            Ok(Some(floor)) => {
                tracing::debug!(session_id = %id, floor, "pruned replay frames");
                self.persisted.send_modify(|p| p.floor = p.floor.max(floor));
            }
            Ok(None) => {}
            Err(e) => tracing::error!(session_id = %id, error = %e, "pruning frames failed"),
        }
    }
}
