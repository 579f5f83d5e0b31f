//! The write-behind: frames persisted in batches, the session's size and close, retention.

use super::*;

/// What the write-behind task has made durable: every frame up to `upto`, every retained
/// frame after `floor` (below it, retention has pruned), and the reservation of sequences
/// up to `reserved`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Persisted {
    pub(super) upto: u64,
    pub floor: u64,
    pub(super) reserved: u64,
}

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

/// Persists frames in batches, the session's size and its close; prunes frames outside both
/// retention bounds. A batch is what queued up within `BATCH_WINDOW` of its first frame (or
/// while the last batch was written): typing then costs one transaction per burst, written
/// after its echo went out rather than beside it.
pub(super) async fn write_behind(
    store: Store,
    id: String,
    mut rx: mpsc::UnboundedReceiver<Persist>,
    persisted: watch::Sender<Persisted>,
    settings: Settings,
) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut last_prune = Instant::now();
    let mut since_prune = 0usize;
    // The bytes this session's frames take in the store.
    let mut stored = store.session_bytes(&id).await.unwrap_or(0);
    while let Some(first) = rx.recv().await {
        if matches!(first, Persist::Frame(_)) {
            tokio::time::sleep(BATCH_WINDOW).await;
        }
        let mut ops = vec![first];
        while ops.len() < 1024 {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        for op in ops {
            match op {
                Persist::Frame(f) => {
                    since_prune += 1;
                    frames.push(f);
                }
                Persist::Reserve(upto) => reserve(&store, &id, upto, &persisted).await,
                Persist::Flush(done) => {
                    stored += flush(&store, &id, &mut frames, &persisted).await;
                    let _ = done.send(());
                }
                Persist::Size(cols, rows) => {
                    stored += flush(&store, &id, &mut frames, &persisted).await;
                    if let Err(e) = store.set_session_size(&id, cols, rows).await {
                        tracing::error!(session_id = %id, error = %e, "persisting size failed");
                    }
                }
                Persist::Close {
                    exit_code,
                    reason,
                    done,
                } => {
                    stored += flush(&store, &id, &mut frames, &persisted).await;
                    let last = persisted.borrow().upto;
                    let reason = serde_json::to_value(reason)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    if let Err(e) = store
                        .close_session(&id, exit_code, &reason, last, clock::now_ms())
                        .await
                    {
                        tracing::error!(session_id = %id, error = %e, "persisting close failed");
                    }
                    let _ = done.send(());
                }
            }
        }
        stored += flush(&store, &id, &mut frames, &persisted).await;
        if since_prune >= settings.replay_frames || last_prune.elapsed() >= PRUNE_INTERVAL {
            last_prune = Instant::now();
            since_prune = 0;
            prune(&store, &id, &persisted, &settings).await;
        }
        let cap = settings.replay_max_bytes.min(settings.budget.get());
        if stored > cap {
            stored = prune_to_bytes(&store, &id, cap, &persisted).await;
        }
    }
}

/// Writes the batch; returns the bytes it takes in the store. A write the store refuses is
/// retried (backing off up to a second) until it succeeds: the frames stay queued and
/// unpersisted meanwhile, so the ring keeps them and the session's reads wait (see
/// `MAX_UNPERSISTED`) instead of losing them.
pub(super) async fn flush(
    store: &Store,
    id: &str,
    frames: &mut Vec<Frame>,
    persisted: &watch::Sender<Persisted>,
) -> u64 {
    let Some(last) = frames.last().map(|f| f.sequence) else {
        return 0;
    };
    let first = frames[0].sequence;
    let what = format!("persisting frames of session {id}");
    let bytes = store
        .until_written(&what, || store.insert_frames(id, frames))
        .await;
    tracing::trace!(session_id = %id, first, last, bytes, "persisted frames");
    frames.clear();
    persisted.send_modify(|p| p.upto = last);
    bytes
}

/// Holds the session's stored frames to `cap` bytes: the oldest go (down to nine tenths of
/// it, so this does not run at every batch) and the replay floor moves past them. Returns
/// the bytes kept.
async fn prune_to_bytes(
    store: &Store,
    id: &str,
    cap: u64,
    persisted: &watch::Sender<Persisted>,
) -> u64 {
    match store.prune_to_bytes(id, cap / 10 * 9).await {
        Ok(Some(floor)) => {
            tracing::debug!(session_id = %id, floor, cap, "pruned replay frames to the byte cap");
            persisted.send_modify(|p| p.floor = p.floor.max(floor));
        }
        Ok(None) => {}
        Err(e) => {
            tracing::error!(session_id = %id, error = %e, "pruning frames to the byte cap failed")
        }
    }
    store.session_bytes(id).await.unwrap_or(cap)
}

/// Reserves sequences up to `upto`, retrying until the store takes it.
async fn reserve(store: &Store, id: &str, upto: u64, persisted: &watch::Sender<Persisted>) {
    let what = format!("reserving sequences of session {id}");
    store
        .until_written(&what, || store.reserve_sequences(id, upto))
        .await;
    persisted.send_modify(|p| p.reserved = p.reserved.max(upto));
}

pub(super) async fn prune(
    store: &Store,
    id: &str,
    persisted: &watch::Sender<Persisted>,
    settings: &Settings,
) {
    let upto = persisted
        .borrow()
        .upto
        .saturating_sub(settings.replay_frames as u64);
    let before = clock::now_ms() - settings.replay_retention.as_millis() as i64;
    match store.prune_frames(id, upto, before).await {
        Ok(Some(floor)) => {
            tracing::debug!(session_id = %id, floor, "pruned replay frames");
            persisted.send_modify(|p| p.floor = floor);
        }
        Ok(None) => {}
        Err(e) => tracing::error!(session_id = %id, error = %e, "pruning frames failed"),
    }
}
