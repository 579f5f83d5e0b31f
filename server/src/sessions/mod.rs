//! PTY sessions, independent of any transport: the registry, the spec a session is started
//! from, and the commands its owner task (see `actor`) accepts.

mod actor;

pub use actor::{Pause, TaskEvent, TaskRun, Timing, viewer_queue};

pub mod host;
pub mod marks;
mod output;
pub use output::OutputRead;
mod pool;
pub use pool::{PoolView, READY_WAIT};
mod protocol;
pub mod pty;
pub mod sandboxed;
pub use sandboxed::Sandboxed;
mod recovery;
pub mod replay;
pub mod retention;
pub mod screen;
mod snapshots;
mod spec;
pub use protocol::*;
pub use recovery::{Resumed, rebuild_screen};
pub use snapshots::LifecycleError;
pub use spec::*;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use host::Host;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::task::TaskTracker;
use wire::{self, CloseReason, SessionFrame};

use crate::clock;
use crate::store::{SessionRow, Store};

/// The knobs of every session, from the `serve` flags.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub replay_frames: usize,
    pub replay_retention: Duration,
    /// Bytes of frames one session keeps in the store at most.
    pub replay_max_bytes: u64,
    /// Bytes the whole store may hold in use; past it closed sessions' history goes first,
    /// then every live session is held to an equal share (`Budget`).
    pub max_store_bytes: u64,
    /// How long a closed session keeps its frames and tasks.
    pub closed_retention: Duration,
    /// The share of the store each live session may keep now.
    pub budget: retention::Budget,
    pub keyframe_interval: Duration,
    pub keyframe_frames: u64,
    pub max_controllers: usize,
    pub max_observers: usize,
    pub default_cols: u16,
    pub default_rows: u16,
    /// The bash rc file with shell-integration marks; login-shell sessions use it when set.
    pub shell_rc: Option<PathBuf>,
    /// ptyhost's own tmux socket, when tmux is installed (managed sessions).
    pub tmux_socket: Option<PathBuf>,
    /// Default shells kept started for messages without a contextId (`--shell-pool`).
    pub shell_pool: usize,
    /// How sessions are confined (`--sandbox`).
    pub sandbox: crate::sandbox::SandboxSettings,
    pub lifecycle: Lifecycle,
}

/// How long sessions live, and what they may keep.
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    /// `--session-idle-timeout`.
    pub idle_timeout: Option<Duration>,
    /// `--max-session-ttl`.
    pub max_ttl: Option<Duration>,
    /// `--pause-when-idle`.
    pub pause_when_idle: Option<Duration>,
    /// `--max-snapshot-bytes`.
    pub max_snapshot_bytes: u64,
}

/// Live facts about a session for listings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveStatus {
    pub controllers: usize,
    pub observers: usize,
    pub cols: u16,
    pub rows: u16,
    /// The program is a shell that has printed its first prompt.
    pub prompted: bool,
    /// A task runs or waits: the session is not idle.
    pub busy: bool,
    pub paused: Option<Pause>,
    /// When its ttl ends (unix ms).
    pub ttl_end_ms: Option<i64>,
    pub idle_timeout: Option<Duration>,
}

#[derive(Clone)]
pub struct SessionHandle {
    pub id: SessionId,
    /// The session's program is a shell with integration: it can run tasks.
    pub shell: bool,
    commands: mpsc::Sender<SessionCommand>,
    status: watch::Receiver<LiveStatus>,
    last_sequence: Arc<AtomicU64>,
    persisted: watch::Receiver<actor::Persisted>,
    /// The session's program (for a managed session, its tmux client).
    program: Arc<pty::ProgramPid>,
    host: Host,
    sandboxed: Option<Arc<Sandboxed>>,
    /// When something last happened in it (unix ms).
    last_active: Arc<std::sync::atomic::AtomicI64>,
}

impl SessionHandle {
    /// When the session will close if nothing happens first (unix ms): its ttl's end, or
    /// its idle timeout counted from its last activity, whichever comes first.
    pub fn ends_at_ms(&self) -> Option<i64> {
        let status = self.status();
        let idle_end = (status.idle_timeout)
            .filter(|_| !status.busy)
            .map(|t| self.last_active.load(Ordering::Relaxed) + t.as_millis() as i64);
        [status.ttl_end_ms, idle_end].into_iter().flatten().min()
    }

    /// Its program runs in a sandbox.
    pub fn is_sandboxed(&self) -> bool {
        self.sandboxed.is_some()
    }

    /// The directory the session's program is in now (it follows `cd`). A sandboxed
    /// session's is its workspace whenever the program is outside it: nothing else of its
    /// view has the same path on the host.
    pub async fn working_dir(&self) -> Option<PathBuf> {
        let now = match &self.host {
            Host::Tmux(tmux) => tmux.current_path(&self.id).await,
            Host::Native => {
                (self.program.get()).and_then(|p| std::fs::read_link(format!("/proc/{p}/cwd")).ok())
            }
        };
        match &self.sandboxed {
            Some(s) => Some(
                now.filter(|d| d.starts_with(&s.workspace))
                    .unwrap_or_else(|| s.workspace.clone()),
            ),
            None => now,
        }
    }

    /// The sandbox of a sandboxed session.
    pub fn sandboxed(&self) -> Option<&Sandboxed> {
        self.sandboxed.as_deref()
    }

    pub fn status(&self) -> LiveStatus {
        *self.status.borrow()
    }

    /// Waits until the shell has printed its first prompt; false if the session ended first.
    pub async fn prompted(&self) -> bool {
        let mut status = self.status.clone();
        status.wait_for(|s| s.prompted).await.is_ok()
    }

    pub fn current_sequence(&self) -> u64 {
        self.last_sequence.load(Ordering::Acquire)
    }

    pub fn replay_floor(&self) -> u64 {
        self.persisted.borrow().floor
    }

    /// Sends a command and waits for its reply; `None` when the session has ended.
    pub async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> SessionCommand,
    ) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(make(tx)).await.ok()?;
        rx.await.ok()
    }

    pub async fn tell(&self, command: SessionCommand) -> bool {
        self.commands.send(command).await.is_ok()
    }

    /// For drop guards: a leave that must not wait.
    pub fn leave_now(&self, client_id: String) {
        if let Err(mpsc::error::TrySendError::Full(cmd)) = self
            .commands
            .try_send(SessionCommand::Leave(ClientId(client_id), None))
        {
            let commands = self.commands.clone();
            tokio::spawn(async move { commands.send(cmd).await });
        }
    }
}

/// A session as listed: its stored row plus live counts when it is running.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub row: SessionRow,
    pub live: Option<LiveStatus>,
    /// Replay covers every retained frame after this sequence.
    pub replay_floor: u64,
}

/// All sessions of this process.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    audit: crate::audit::Audit,
    settings: SessionSettings,
    instance_id: String,
    /// The node this process is (sessions it creates run here).
    node_id: String,
    live: Mutex<HashMap<SessionId, SessionHandle>>,
    tasks: TaskTracker,
    pool: pool::Pool,
}

impl Sessions {
    pub fn new(
        store: Store,
        audit: crate::audit::Audit,
        settings: SessionSettings,
        instance_id: String,
        node_id: String,
    ) -> Sessions {
        Sessions {
            inner: Arc::new(Inner {
                store,
                audit,
                pool: pool::Pool::new(settings.shell_pool),
                settings,
                instance_id,
                node_id,
                live: Mutex::new(HashMap::new()),
                tasks: TaskTracker::new(),
            }),
        }
    }

    pub fn settings(&self) -> &SessionSettings {
        &self.inner.settings
    }

    pub fn audit(&self) -> &crate::audit::Audit {
        &self.inner.audit
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Starts a session. A program that cannot start still makes a (closed) session whose
    /// history holds its one `Closed` frame.
    pub async fn create(&self, spec: SessionSpec) -> Result<SessionRow> {
        self.create_as(spec, "running").await
    }

    /// Starts a session stored in `state` (`running`, or `pooled` for the shell pool).
    async fn create_as(&self, spec: SessionSpec, state: &str) -> Result<SessionRow> {
        let id = uuid::Uuid::now_v7().to_string();
        let sandbox = &self.inner.settings.sandbox;
        let sandboxed = (spec.confined.as_ref())
            .map(|c| Sandboxed::make(&id, c, sandbox).map(Arc::new))
            .transpose()
            .context("preparing the session's sandbox")?;
        let mut row = SessionRow {
            id: id.clone(),
            instance_id: self.inner.instance_id.clone(),
            node_id: self.inner.node_id.clone(),
            label: spec.label.clone(),
            argv: spec.argv.clone(),
            cwd: match &sandboxed {
                Some(s) => Some(s.workspace.display().to_string()),
                None => spec.cwd.as_ref().map(|c| c.display().to_string()),
            },
            workspace: sandboxed
                .as_ref()
                .map(|s| s.workspace.display().to_string()),
            sandbox: sandboxed.as_ref().map(|s| {
                let egress = s.net.as_ref().map(|n| n.rules());
                sandboxed::stored(&s.limits, egress.as_ref())
            }),
            lifetime: spec.lifetime.stored(),
            env: spec.env.clone(),
            backend: spec.host.backend().into(),
            class: spec.host.class().into(),
            cols: spec.cols,
            rows: spec.rows,
            state: state.into(),
            exit_code: None,
            close_reason: None,
            last_sequence: 0,
            replay_floor: 0,
            sequence_reserved: actor::RESERVE_AHEAD,
            created_at: clock::now_ms(),
            closed_at: None,
        };
        self.inner.store.sessions().insert(&row).await?;
        let restored = match (&spec.from_snapshot, &sandboxed) {
            (Some(snapshot), Some(s)) => {
                crate::lifecycle::restore(&self.inner.store, snapshot, &s.workspace)
                    .await
                    .map_err(anyhow::Error::from)
            }
            _ => Ok(()),
        };
        let started = match restored {
            Ok(()) => self.start_program(&id, &spec, sandboxed.as_deref()).await,
            Err(e) => Err(e),
        };
        match started {
            Ok((pty, events)) => {
                let screen = screen::Screen::new(spec.cols, spec.rows);
                let resumed = Resumed {
                    reserved: actor::RESERVE_AHEAD,
                    ..Resumed::default()
                };
                let timing = Timing {
                    lifetime: spec.lifetime,
                    since_ms: row.created_at,
                    armed: state != "pooled",
                };
                self.launch(
                    &id,
                    pty,
                    events,
                    screen,
                    spec.host.clone(),
                    spec.shell_integration,
                    resumed,
                    sandboxed,
                    timing,
                );
                tracing::info!(session_id = %row.id, argv = ?row.argv, host = spec.host.backend(), sandboxed = spec.confined.is_some(), "session started");
            }
            Err(e) => {
                if let Some(s) = &sandboxed {
                    s.remove();
                }
                let detail = format!("failed to start {:?}: {e:#}", spec.argv[0]);
                tracing::warn!(session_id = %row.id, %detail, "session failed to start");
                let frame = SessionFrame::Closed {
                    exit_code: None,
                    reason: CloseReason::Error,
                    detail: Some(detail),
                };
                let now = clock::now_ms();
                self.inner
                    .store
                    .frames()
                    .insert(&row.id, &[new_frame(1, &frame, now)])
                    .await?;
                self.inner
                    .store
                    .sessions()
                    .close(&row.id, None, "error", 1, now)
                    .await?;
                row = self
                    .inner
                    .store
                    .sessions()
                    .get(&row.id)
                    .await?
                    .unwrap_or(row);
            }
        }
        Ok(row)
    }

    /// Starts the session's program on a PTY: directly, through tmux, and (sandboxed)
    /// through the sandbox's helper, started on the spawner thread.
    async fn start_program(
        &self,
        id: &str,
        spec: &SessionSpec,
        sandboxed: Option<&Sandboxed>,
    ) -> Result<(pty::Pty, pty::PtyEvents)> {
        let program = match sandboxed {
            Some(s) => s.wrap(spec)?,
            None => spec.clone(),
        };
        match (&spec.host, sandboxed) {
            (Host::Native, None) => pty::spawn(&program),
            (Host::Native, Some(_)) => {
                crate::sandbox::on_spawner_thread(move || pty::spawn(&program))?
            }
            (Host::Tmux(tmux), _) => {
                tmux.create(id, &program).await?;
                pty::spawn(&tmux.attach_spec(id, spec.cols, spec.rows))
            }
        }
    }

    /// Starts a session's owner task on a running program.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        id: &str,
        pty: pty::Pty,
        events: pty::PtyEvents,
        screen: screen::Screen,
        host: Host,
        shell_integration: bool,
        resumed: Resumed,
        sandboxed: Option<Arc<Sandboxed>>,
        timing: Timing,
    ) {
        let handle = actor::start(
            &self.inner.tasks,
            actor::Start {
                id: id.to_owned(),
                pty,
                events,
                screen,
                settings: self.inner.settings.clone(),
                store: self.inner.store.clone(),
                audit: self.inner.audit.clone(),
                registry: self.clone(),
                shell_integration,
                host,
                resumed,
                sandboxed,
                timing,
            },
        );
        if let Some(s) = &handle.sandboxed {
            self.watch_memory(id, s, handle.commands.clone());
            s.start_egress(id, self.inner.audit.clone());
        }
        self.inner.live.lock().unwrap().insert(id.into(), handle);
    }

    /// Running sessions (pooled shells not counted).
    pub fn live_count(&self) -> usize {
        let live = self.inner.live.lock().unwrap().len();
        live.saturating_sub(self.pooled_count())
    }

    /// The session, while it runs here.
    pub fn live(&self, id: &SessionId) -> Option<SessionHandle> {
        self.inner.live.lock().unwrap().get(id).cloned()
    }

    /// Called by a session's owner task once its history is fully persisted.
    fn retire(&self, id: &str) {
        self.inner.live.lock().unwrap().remove(id);
        self.pooled_ended(id);
    }

    pub async fn view(&self, id: &SessionId) -> Result<Option<SessionView>> {
        let row = self.inner.store.sessions().get(id).await?;
        Ok(row.map(|row| self.with_live(row)))
    }

    pub async fn list(&self) -> Result<Vec<SessionView>> {
        let rows = self
            .inner
            .store
            .sessions()
            .list(&self.inner.instance_id)
            .await?;
        Ok(rows.into_iter().map(|r| self.with_live(r)).collect())
    }

    fn with_live(&self, mut row: SessionRow) -> SessionView {
        let handle = self.live(&SessionId::from(&row.id));
        let live = handle.as_ref().map(|h| {
            row.last_sequence = h.current_sequence();
            h.status()
        });
        if let Some(l) = live {
            (row.cols, row.rows) = (l.cols, l.rows);
        }
        let replay_floor = handle.map_or(row.replay_floor, |h| h.replay_floor());
        SessionView {
            row,
            live,
            replay_floor,
        }
    }

    /// Where a session's files are: the directory its program is in now, or for one that
    /// has ended, the one it started in (by default `$HOME`).
    pub async fn working_dir(&self, view: &SessionView) -> Option<PathBuf> {
        let now = match self.live(&SessionId::from(&view.row.id)) {
            Some(h) => h.working_dir().await,
            None => None,
        };
        now.or_else(|| view.row.cwd.as_ref().map(PathBuf::from))
            .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
    }

    /// Ends a running session; false when it is not running.
    pub async fn terminate(&self, id: &SessionId, reason: CloseReason) -> bool {
        match self.live(id) {
            Some(h) => h.tell(SessionCommand::Terminate(reason)).await,
            None => false,
        }
    }

    /// Ends every running session (each emits its `Closed` and says goodbye) and waits
    /// until their histories are persisted.
    pub async fn shutdown(&self) {
        self.close_pool();
        let handles: Vec<SessionHandle> =
            self.inner.live.lock().unwrap().values().cloned().collect();
        for h in handles {
            h.tell(SessionCommand::Terminate(CloseReason::InstanceTerminated))
                .await;
        }
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SessionSettings {
        SessionSettings {
            replay_frames: 1000,
            replay_retention: Duration::from_secs(86400),
            replay_max_bytes: 256 << 20,
            max_store_bytes: 4 << 30,
            closed_retention: Duration::from_secs(7 * 86400),
            budget: Default::default(),
            keyframe_interval: Duration::from_secs(5),
            keyframe_frames: 100,
            max_controllers: 1,
            max_observers: 32,
            default_cols: 120,
            default_rows: 30,
            shell_rc: None,
            tmux_socket: None,
            shell_pool: 0,
            sandbox: crate::sandbox::SandboxSettings::off(),
            lifecycle: Lifecycle::default(),
        }
    }

    #[test]
    fn unsupported_backend_and_class_fail_closed_with_their_codes() {
        let req = |b: &str, c: &str| SpecRequest {
            session_backend: Some(b.into()),
            session_class: Some(c.into()),
            ..Default::default()
        };
        let e = req("tmux", "managed").into_spec(&settings()).unwrap_err();
        assert_eq!(e.code(), "session_backend.not_implemented");
        let e = req("native", "managed").into_spec(&settings()).unwrap_err();
        assert_eq!(e.code(), "session_class.not_implemented");
        assert!(req("native", "direct").into_spec(&settings()).is_ok());
    }

    #[test]
    fn command_runs_through_sh_lc_and_no_program_means_the_login_shell() {
        let spec = SpecRequest {
            command: Some("echo hi".into()),
            ..Default::default()
        }
        .into_spec(&settings())
        .unwrap();
        assert_eq!(spec.argv, ["/bin/sh", "-lc", "echo hi"]);
        assert_eq!((spec.cols, spec.rows), (120, 30));
        let shell = SpecRequest::default().into_spec(&settings()).unwrap();
        assert_eq!(shell.argv.last().map(String::as_str), Some("-l"));
    }

    #[test]
    fn bad_specs_are_refused() {
        for req in [
            SpecRequest {
                argv: Some(vec![]),
                ..Default::default()
            },
            SpecRequest {
                argv: Some(vec!["a".into()]),
                command: Some("b".into()),
                ..Default::default()
            },
            SpecRequest {
                cwd: Some("/definitely/not/here".into()),
                ..Default::default()
            },
            SpecRequest {
                cols: Some(0),
                ..Default::default()
            },
            SpecRequest {
                rows: Some(2000),
                ..Default::default()
            },
        ] {
            assert!(matches!(
                req.into_spec(&settings()),
                Err(SpecError::Invalid(_))
            ));
        }
    }
}
