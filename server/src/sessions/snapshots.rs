//! Pausing, resuming and snapshotting a running session, as its callers ask: the actor
//! freezes and thaws it, and a snapshot archives its workspace while it is frozen.

use wire::ErrorCode;

use super::{Pause, SessionCommand, SessionId, SessionRefusal, Sessions};
use crate::clock;
use crate::lifecycle::{self, SnapshotError};
use crate::store::SnapshotRow;

/// Why an operation on a running session did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("session {0} is not running here")]
    NotRunning(String),
    #[error("session {0} has no workspace to snapshot: only a sandboxed session has one")]
    NoWorkspace(String),
    #[error("{}", .0.message)]
    Refused(SessionRefusal),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

impl Sessions {
    /// Freezes session `id` (a caller's pause: input and tasks wait until it resumes).
    pub async fn pause(&self, id: &SessionId) -> Result<Pause, LifecycleError> {
        let handle = self.running(id)?;
        handle
            .ask(|reply| SessionCommand::Pause(false, reply))
            .await
            .ok_or_else(|| LifecycleError::NotRunning(id.to_string()))?
            .map_err(LifecycleError::Refused)
    }

    /// Thaws session `id`; false when it was not paused.
    pub async fn resume(&self, id: &SessionId) -> Result<bool, LifecycleError> {
        let handle = self.running(id)?;
        handle
            .ask(SessionCommand::Resume)
            .await
            .ok_or_else(|| LifecycleError::NotRunning(id.to_string()))
    }

    /// Archives session `id`'s workspace while the session is frozen, then thaws it
    /// (unless a caller had paused it). Snapshots count against `--max-snapshot-bytes`
    /// and, with the rest of the store, against `--max-store-bytes`.
    pub async fn snapshot(
        &self,
        id: &SessionId,
        label: Option<String>,
    ) -> Result<SnapshotRow, LifecycleError> {
        let handle = self.running(id)?;
        let workspace = (handle.sandboxed())
            .map(|s| s.workspace.clone())
            .ok_or_else(|| LifecycleError::NoWorkspace(id.to_string()))?;
        let store = &self.inner.store;
        let settings = &self.inner.settings;
        let snapshots_left = (settings.lifecycle.max_snapshot_bytes)
            .saturating_sub(store.snapshots().total_bytes().await.map_err(from_store)?);
        let store_left = (settings.max_store_bytes)
            .saturating_sub(store.bytes_in_use().await.map_err(from_store)?);
        let limit = match snapshots_left <= store_left {
            true => (snapshots_left, "--max-snapshot-bytes"),
            false => (store_left, "--max-store-bytes"),
        };
        handle
            .ask(|reply| SessionCommand::Pause(true, reply))
            .await
            .ok_or_else(|| LifecycleError::NotRunning(id.to_string()))?
            .map_err(LifecycleError::Refused)?;
        let mut row = SnapshotRow {
            id: uuid::Uuid::now_v7().to_string(),
            instance_id: self.inner.instance_id.clone(),
            session_id: id.to_string(),
            label,
            bytes: 0,
            files: 0,
            created_at: clock::now_ms(),
        };
        let taken = async {
            store.snapshots().begin(&row).await.map_err(from_store)?;
            let taken = lifecycle::take(store, &row.id, &workspace, limit).await?;
            store
                .snapshots()
                .finish(&row.id, taken.bytes, taken.files)
                .await
                .map_err(from_store)?;
            Ok::<_, LifecycleError>(taken)
        }
        .await;
        let done = taken.as_ref().ok().map(|_| row.id.clone());
        handle.tell(SessionCommand::Snapshotted(done)).await;
        let taken = match taken {
            Ok(taken) => taken,
            Err(e) => {
                if let Err(d) = store.snapshots().delete(&row.id).await {
                    tracing::warn!(snapshot_id = %row.id, error = %d, "removing a failed snapshot failed");
                }
                return Err(e);
            }
        };
        (row.bytes, row.files) = (taken.bytes, taken.files);
        tracing::info!(session_id = %id, snapshot_id = %row.id, bytes = row.bytes, files = row.files, "snapshot taken");
        Ok(row)
    }

    /// The handle of a session running here.
    fn running(&self, id: &SessionId) -> Result<super::SessionHandle, LifecycleError> {
        self.live(id)
            .ok_or_else(|| LifecycleError::NotRunning(id.to_string()))
    }
}

fn from_store(e: anyhow::Error) -> LifecycleError {
    LifecycleError::Snapshot(SnapshotError::Failed(e))
}

impl LifecycleError {
    /// The binding-neutral code of the refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            LifecycleError::Refused(r) => r.code,
            LifecycleError::Snapshot(SnapshotError::Failed(_)) => ErrorCode::Internal,
            _ => ErrorCode::UnsupportedOperation,
        }
    }
}
