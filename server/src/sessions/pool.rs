//! The warm shell pool (`--shell-pool N`): default login shells started ahead, their
//! integration marks working and a prompt printed, and listed nowhere. A message without a
//! contextId that needs only the default shell takes one, and the pool refills behind it.
//!
//! A pooled session is stored from its start with the state `pooled`, so its frames belong
//! to it from the first one, and every listing and lookup skips it. Taken, it turns
//! `running` with the moment it was taken as its creation: from then on nothing tells it
//! from a session started for the message, and its replay starts at its first frame. A
//! pooled shell that dies is deleted and replaced; a previous process's are deleted at
//! start. The pool never holds more than N, counting the shells still starting.

use crate::sessions::SessionId;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use super::{SessionHandle, Sessions, SpecRequest};
use crate::clock;

/// How long a new shell may take to print its first prompt before it is given up.
pub const READY_WAIT: Duration = Duration::from_secs(20);
/// The pause before a pool that failed to start a shell tries again.
const RETRY: Duration = Duration::from_secs(1);

pub(super) struct Pool {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Shells whose prompt is printed, oldest first.
    ready: VecDeque<String>,
    /// Shells started and not yet ready.
    starting: usize,
    /// Every pooled session not taken yet, ready or starting.
    members: HashSet<String>,
    /// Shells taken so far.
    taken: u64,
    /// Asked for a shell and found none ready.
    missed: u64,
    /// How many it keeps (`--shell-pool`, or `PUT B/pool`).
    wanted: usize,
    /// The sandbox its shells start with, as asked (`None`: the server's defaults).
    sandbox: Option<serde_json::Value>,
    /// Set once the server stops: the pool refills no more.
    closed: bool,
}

/// The pool as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolView {
    pub wanted: usize,
    pub sandbox: Option<serde_json::Value>,
    pub ready: usize,
    pub hits: u64,
    pub misses: u64,
}

impl Pool {
    pub(super) fn new(wanted: usize) -> Pool {
        Pool {
            state: Mutex::new(State {
                wanted,
                ..State::default()
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Sessions {
    /// Shells ready in the pool and starting for it.
    pub fn pool_size(&self) -> usize {
        let state = self.inner.pool.state();
        state.ready.len() + state.starting
    }

    /// Its size, sandbox and counts.
    pub fn pool(&self) -> PoolView {
        let state = self.inner.pool.state();
        PoolView {
            wanted: state.wanted,
            sandbox: state.sandbox.clone(),
            ready: state.ready.len(),
            hits: state.taken,
            misses: state.missed,
        }
    }

    /// Keeps `wanted` shells from now on, started with `sandbox` when it is given. Ready
    /// shells beyond the size, or started with another sandbox, are ended; the pool fills
    /// behind. Refused when the sandbox is one this server cannot give.
    pub async fn set_pool(
        &self,
        wanted: Option<usize>,
        sandbox: Option<serde_json::Value>,
    ) -> Result<PoolView, super::SpecError> {
        if let Some(asked) = &sandbox {
            pool_spec(&self.inner.settings, Some(asked))?;
        }
        let ended: Vec<String> = {
            let mut state = self.inner.pool.state();
            let mut ended = Vec::new();
            if let Some(asked) = sandbox
                && state.sandbox.as_ref() != Some(&asked)
            {
                state.sandbox = Some(asked);
                ended.extend(state.ready.drain(..));
            }
            if let Some(wanted) = wanted {
                state.wanted = wanted;
            }
            while state.ready.len() > state.wanted {
                ended.extend(state.ready.pop_back());
            }
            ended
        };
        for id in ended {
            self.end_pooled(&id).await;
        }
        self.fill_pool();
        Ok(self.pool())
    }

    /// Ends pooled shell `id` (never taken): its session and its row.
    async fn end_pooled(&self, id: &str) {
        if let Some(handle) = self.live(&SessionId::from(id)) {
            handle
                .tell(super::SessionCommand::Terminate(
                    wire::CloseReason::InstanceTerminated,
                ))
                .await;
        }
        self.pooled_ended(id);
    }

    /// Pooled sessions that run (ready or printing their first prompt).
    pub(super) fn pooled_count(&self) -> usize {
        self.inner.pool.state().members.len()
    }

    /// Starts pooled shells until the pool holds `--shell-pool` of them.
    pub fn fill_pool(&self) {
        loop {
            {
                let mut state = self.inner.pool.state();
                if state.closed || state.ready.len() + state.starting >= state.wanted {
                    return;
                }
                state.starting += 1;
            }
            let sessions = self.clone();
            self.inner.tasks.spawn(async move {
                let ready = sessions.start_pooled().await;
                let (retry, surplus) = {
                    let mut state = sessions.inner.pool.state();
                    state.starting -= 1;
                    match ready {
                        // The pool shrank, or took another sandbox, while it started.
                        Some((id, sandbox))
                            if state.ready.len() >= state.wanted || sandbox != state.sandbox =>
                        {
                            (false, Some(id))
                        }
                        Some((id, _)) if !state.closed => {
                            state.ready.push_back(id);
                            (false, None)
                        }
                        Some(_) => (false, None),
                        None => (!state.closed, None),
                    }
                };
                if let Some(id) = surplus {
                    sessions.end_pooled(&id).await;
                    sessions.fill_pool();
                }
                if retry {
                    tokio::time::sleep(RETRY).await;
                    sessions.fill_pool();
                }
            });
        }
    }

    /// Starts one pooled shell and waits for its first prompt; once it is ready, its id
    /// and the sandbox it was started with.
    async fn start_pooled(&self) -> Option<(String, Option<serde_json::Value>)> {
        let sandbox = self.inner.pool.state().sandbox.clone();
        let spec = match pool_spec(&self.inner.settings, sandbox.as_ref()) {
            Ok(spec) if spec.shell_integration => spec,
            Ok(_) => {
                tracing::warn!("the default shell has no integration: the shell pool stays empty");
                return None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the default shell cannot start: the shell pool stays empty");
                return None;
            }
        };
        let row = match self.create_as(spec, "pooled").await {
            Ok(row) => row,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "starting a pooled shell failed");
                return None;
            }
        };
        let handle = self.live(&SessionId::from(&row.id))?;
        let closed = {
            let mut state = self.inner.pool.state();
            state.members.insert(row.id.clone());
            state.closed
        };
        if closed {
            // Started while the server stops, after it told every session to end.
            handle
                .tell(super::SessionCommand::Terminate(
                    wire::CloseReason::InstanceTerminated,
                ))
                .await;
            return None;
        }
        match tokio::time::timeout(READY_WAIT, handle.prompted()).await {
            Ok(true) => Some((row.id, sandbox)),
            _ => {
                tracing::warn!(session_id = %row.id, "a pooled shell printed no prompt; it is ended");
                handle
                    .tell(super::SessionCommand::Terminate(wire::CloseReason::Error))
                    .await;
                None
            }
        }
    }

    /// A ready default shell from the pool, now a running session; `None` when the pool
    /// is empty. The pool refills behind it.
    pub async fn take_pooled(&self) -> Option<SessionHandle> {
        loop {
            let id = {
                let mut state = self.inner.pool.state();
                let Some(id) = state.ready.pop_front() else {
                    state.missed += 1;
                    return None;
                };
                state.members.remove(&id);
                id
            };
            self.fill_pool();
            let Some(handle) = self.live(&SessionId::from(&id)) else {
                continue;
            };
            match self
                .inner
                .store
                .sessions()
                .take_pooled(&id, clock::now_ms())
                .await
            {
                Ok(true) => {
                    self.inner.pool.state().taken += 1;
                    // Its ttl and idle clocks start now.
                    handle.tell(super::SessionCommand::Arm).await;
                    tracing::info!(session_id = %id, "took a shell from the pool");
                    return Some(handle);
                }
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(session_id = %id, error = %e, "taking a pooled shell failed");
                    return None;
                }
            }
        }
    }

    /// A session ended: if it was pooled (never taken), its row goes and the pool refills.
    pub(super) fn pooled_ended(&self, id: &str) {
        let was_ready = {
            let mut state = self.inner.pool.state();
            if !state.members.remove(id) {
                return;
            }
            let before = state.ready.len();
            state.ready.retain(|r| r != id);
            state.ready.len() != before
        };
        let sessions = self.clone();
        let id = id.to_owned();
        self.inner.tasks.spawn(async move {
            if let Err(e) = sessions
                .inner
                .store
                .sessions()
                .delete_pooled(Some(&id))
                .await
            {
                tracing::warn!(session_id = %id, error = %e, "deleting a pooled shell failed");
            }
            if was_ready {
                sessions.fill_pool();
            }
        });
    }

    /// The server stops: no more pooled shells start.
    pub(super) fn close_pool(&self) {
        self.inner.pool.state().closed = true;
    }
}

/// What a pooled shell runs: the default shell, in `sandbox` (a pool's policy is the
/// operator's, so it may raise caps).
fn pool_spec(
    settings: &super::SessionSettings,
    sandbox: Option<&serde_json::Value>,
) -> Result<super::SessionSpec, super::SpecError> {
    let sandbox = sandbox
        .map(|s| serde_json::from_value(s.clone()))
        .transpose()
        .map_err(|e| super::SpecError::Invalid(format!("sandbox: {e}")))?;
    SpecRequest {
        sandbox,
        admin: true,
        ..SpecRequest::default()
    }
    .into_spec(settings)
}
