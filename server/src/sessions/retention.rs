//! What keeps the store bounded beyond each session's own byte cap (which its write-behind
//! enforces): a sweeper that drops the history of sessions closed longer than
//! `closed_retention`, and, while the store holds more than `max_store_bytes`, drops closed
//! sessions' history oldest first and then holds every live session to an equal share of
//! the bound (`Budget`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Sessions;
use crate::clock;

/// How often the sweeper looks at most (more often under a short `closed_retention`).
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// The store is brought down to this share of its bound, so that pruning does not run at
/// every frame once it is reached.
const TARGET_PERCENT: u64 = 90;

/// The bytes each live session may keep now; unbounded while the store is within bounds.
#[derive(Debug, Clone)]
pub struct Budget(Arc<AtomicU64>);

impl Default for Budget {
    fn default() -> Budget {
        Budget(Arc::new(AtomicU64::new(u64::MAX)))
    }
}

impl Budget {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, bytes: u64) {
        self.0.store(bytes, Ordering::Relaxed);
    }
}

/// Runs the sweeper until `sessions` is dropped.
pub fn start(sessions: &Sessions) {
    let weak = Arc::downgrade(&sessions.inner);
    let retention = sessions.settings().closed_retention;
    let every = SWEEP_EVERY
        .min(retention / 2)
        .max(Duration::from_millis(100));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let sessions = Sessions { inner };
            if let Err(e) = sweep(&sessions).await {
                tracing::warn!(error = %format!("{e:#}"), "sweeping the store failed");
            }
        }
    });
}

async fn sweep(sessions: &Sessions) -> anyhow::Result<()> {
    let store = &sessions.inner.store;
    let settings = sessions.settings();
    let expired = clock::now_ms() - settings.closed_retention.as_millis() as i64;
    for id in store
        .frames()
        .closed_with_history(Some(expired), 100)
        .await?
    {
        store.frames().drop_history(&id).await?;
        tracing::info!(session_id = %id, "dropped a closed session's history (retention)");
    }
    // A snapshot still incomplete an hour on lost its writer (a crash, a lost node).
    let stale = clock::now_ms() - 3_600_000;
    let swept = store.snapshots().sweep_incomplete(stale).await?;
    if swept > 0 {
        tracing::info!(swept, "removed snapshots their writers left incomplete");
    }
    let bound = settings.max_store_bytes;
    let target = bound / 100 * TARGET_PERCENT;
    let mut in_use = store.bytes_in_use().await?;
    if in_use <= bound {
        if in_use < target {
            settings.budget.set(u64::MAX);
        }
        return Ok(());
    }
    while in_use > target {
        let Some(oldest) = store.frames().closed_with_history(None, 1).await?.pop() else {
            break;
        };
        store.frames().drop_history(&oldest).await?;
        tracing::info!(session_id = %oldest, in_use, bound, "dropped a closed session's history (store bound)");
        in_use = store.bytes_in_use().await?;
    }
    if in_use > target {
        let live = sessions.live_count().max(1) as u64;
        settings.budget.set(target / live);
        tracing::warn!(
            in_use,
            bound,
            share = target / live,
            "the store is full: every live session keeps an equal share"
        );
    }
    Ok(())
}
