//! The owner task of one session. It alone touches the PTY, the emulator, the sequence
//! counter, the replay ring and the member list. It never waits on a viewer (bounded
//! queues, `try_send`) or on the disk (frames go to a write-behind task).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Resumed;
use super::host::Host;
use crate::audit::{self, Audit};
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until};
use tokio_util::task::TaskTracker;
use wire::{
    self, Base64Bytes, ClientRef, CloseReason, ErrorCode, PtyErrorCode, Role, SNAPSHOT_FORMAT,
    SessionFrame,
};

use super::marks::{Mark, MarkScanner, Piece};
use super::pty::{Exit, InputError, Pty, PtyEvents};
use super::replay::Ring;
use super::screen::Screen;
use super::{
    Command, JoinRequest, Joined, LiveStatus, Outbound, Refusal, Replay, SessionHandle, Sessions,
    Settings, encode_frame, envelope, new_frame, new_output,
};
use crate::auth::Scope;
use crate::clock;
use crate::store::{Frame, Store};

/// Frames queued for one viewer before it counts as lagging.
const VIEWER_QUEUE: usize = 256;
/// How long a slow viewer's last frames may wait for room in its queue.
const FAREWELL_WAIT: Duration = Duration::from_secs(10);
/// Output chunks are coalesced into frames of up to this many bytes.
const MAX_OUTPUT_FRAME: usize = 64 * 1024;
/// A read this large filled the terminal's buffer (4 KiB): more output is on its way.
const FULL_READ: usize = 4000;
/// How long a flood's frame that is not full yet waits for more output, once.
const GATHER: Duration = Duration::from_millis(1);
/// The hot ring's byte bound (frames beyond it are served from the store).
const RING_BYTES: usize = 16 * 1024 * 1024;
/// How long output may still drain after the process exited.
const EXIT_DRAIN: Duration = Duration::from_millis(250);
/// Grace between SIGHUP and SIGKILL when a session is terminated.
const KILL_GRACE: Duration = Duration::from_secs(2);
const KEYFRAME_REQUEST_INTERVAL: Duration = Duration::from_secs(1);
/// Grace between Ctrl-C and SIGKILL of the foreground job when a task is canceled.
const CANCEL_GRACE: Duration = Duration::from_secs(2);
/// A running command silent this long while blocked reading the terminal needs input.
const INPUT_IDLE: Duration = Duration::from_millis(800);
/// How long the write-behind lets frames gather before it writes them.
const BATCH_WINDOW: Duration = Duration::from_millis(5);
/// Retention is enforced at least this often, and after every `replay_frames` frames.
const PRUNE_INTERVAL: Duration = Duration::from_secs(30);

pub struct Start {
    pub id: String,
    pub pty: Pty,
    pub events: PtyEvents,
    pub screen: Screen,
    pub settings: Settings,
    pub store: Store,
    pub audit: Audit,
    pub registry: Sessions,
    pub shell_integration: bool,
    pub host: Host,
    /// A re-adopted session goes on from its stored sequence.
    pub resumed: Resumed,
}

pub fn viewer_queue() -> (mpsc::Sender<Outbound>, mpsc::Receiver<Outbound>) {
    mpsc::channel(VIEWER_QUEUE)
}

pub fn start(tasks: &TaskTracker, s: Start) -> SessionHandle {
    let (commands, command_rx) = mpsc::channel(256);
    let (cols, rows) = s.screen.size();
    let (status_tx, status) = watch::channel(LiveStatus {
        controllers: 0,
        observers: 0,
        cols,
        rows,
    });
    let last_sequence = Arc::new(AtomicU64::new(s.resumed.sequence));
    let (persist, persist_rx) = mpsc::unbounded_channel();
    let (persisted_tx, persisted) = watch::channel(Persisted {
        upto: s.resumed.sequence,
        floor: s.resumed.replay_floor,
    });
    tasks.spawn(write_behind(
        s.store,
        s.id.clone(),
        persist_rx,
        persisted_tx,
        s.settings.clone(),
    ));
    let actor = Actor {
        id: s.id.clone(),
        pty: s.pty,
        screen: s.screen,
        ring: Ring::new(s.settings.replay_frames, RING_BYTES),
        settings: s.settings,
        seq: s.resumed.sequence,
        last_sequence: last_sequence.clone(),
        members: Vec::new(),
        had_controller: false,
        persist,
        persisted: persisted.clone(),
        status: status_tx,
        outputs_since_keyframe: 0,
        last_keyframe: Instant::now(),
        close_reason: None,
        registry: s.registry,
        audit: s.audit,
        host: s.host,
        shell: s.shell_integration.then(Shell::default),
    };
    tasks.spawn(actor.run(command_rx, s.events));
    SessionHandle {
        id: s.id,
        shell: s.shell_integration,
        commands,
        status,
        last_sequence,
        persisted,
    }
}

struct Member {
    client_id: String,
    role: Role,
    scope: Scope,
    label: Option<String>,
    out: mpsc::Sender<Outbound>,
    /// Takes output as `PW1O` binary frames (`pty-ws.v1.binary`).
    binary: bool,
    /// Set once the member acknowledges output (`ptyhost.ack`).
    flow: Option<Window>,
    lagged: bool,
    last_keyframe_request: Option<Instant>,
}

/// A flow-controlled member's output in flight: (sequence, bytes) not yet acknowledged.
#[derive(Debug, Default)]
struct Window {
    in_flight: std::collections::VecDeque<(u64, usize)>,
    bytes: usize,
    /// Output was skipped: the member needs a keyframe once it has caught up.
    skipped: bool,
}

impl Window {
    /// Whether an output frame fits the window (it is then in flight).
    fn admit(&mut self, seq: u64, len: usize) -> bool {
        if self.skipped || self.bytes + len > wire::FLOW_WINDOW_BYTES {
            self.skipped = true;
            return false;
        }
        self.in_flight.push_back((seq, len));
        self.bytes += len;
        true
    }

    /// Acknowledges up to `sequence`; true when the member has caught up after a skip and
    /// should now get a keyframe.
    fn ack(&mut self, sequence: u64) -> bool {
        while let Some(&(seq, len)) = self.in_flight.front() {
            if seq > sequence {
                break;
            }
            self.in_flight.pop_front();
            self.bytes -= len;
        }
        let resume = self.skipped && self.bytes <= wire::FLOW_RESUME_BYTES;
        if resume {
            self.skipped = false;
        }
        resume
    }
}

/// What the write-behind task has made durable: every frame up to `upto`, and every
/// retained frame after `floor` (below it, retention has pruned).
#[derive(Debug, Clone, Copy, Default)]
pub struct Persisted {
    upto: u64,
    pub floor: u64,
}

enum Persist {
    Frame(Frame),
    /// Everything queued so far is written.
    Flush(oneshot::Sender<()>),
    Size(u16, u16),
    Close {
        exit_code: Option<i32>,
        reason: CloseReason,
        done: oneshot::Sender<()>,
    },
}

struct Actor {
    id: String,
    pty: Pty,
    screen: Screen,
    ring: Ring,
    settings: Settings,
    seq: u64,
    last_sequence: Arc<AtomicU64>,
    members: Vec<Member>,
    had_controller: bool,
    persist: mpsc::UnboundedSender<Persist>,
    persisted: watch::Receiver<Persisted>,
    status: watch::Sender<LiveStatus>,
    outputs_since_keyframe: u64,
    last_keyframe: Instant,
    close_reason: Option<CloseReason>,
    registry: Sessions,
    audit: Audit,
    host: Host,
    /// Present when the program marks its prompts (OSC 133): it runs tasks.
    shell: Option<Shell>,
}

/// What a task's runner hears from the session.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    /// The command was typed at the prompt.
    Started,
    /// Bytes the command printed (between the C and D marks, exactly).
    Output(Vec<u8>),
    /// The shell reported the command's exit status.
    Finished(Option<i32>),
    /// The command waits for the terminal, showing this prompt.
    InputRequired(String),
    /// An answer was typed; the command goes on.
    Resumed(wire::a2a::Message),
    /// Canceled before it was typed.
    Dequeued,
    /// The session ended first.
    Ended,
}

/// A command line to run in the session's shell, and where its events go.
pub struct TaskRun {
    pub task_id: String,
    pub line: String,
    pub events: mpsc::UnboundedSender<TaskEvent>,
}

struct Running {
    run: TaskRun,
    capturing: bool,
    kill_at: Option<Instant>,
    last_output: Instant,
    /// InputRequired was reported and not answered yet.
    asked: bool,
}

/// The shell side of a session: marks in its output, and the commands queued for it.
#[derive(Default)]
struct Shell {
    scanner: MarkScanner,
    state: ShellState,
}

#[derive(Default)]
struct ShellState {
    /// The prompt is on screen and nothing has been typed for a task since.
    prompt_ready: bool,
    running: Option<Running>,
    queue: std::collections::VecDeque<TaskRun>,
}

impl ShellState {
    fn on_piece(&mut self, piece: Piece<'_>, pty: &Pty) {
        match piece {
            Piece::Text(t) => {
                if let Some(r) = self.running.as_mut().filter(|r| r.capturing) {
                    r.last_output = Instant::now();
                    let _ = r.run.events.send(TaskEvent::Output(t.to_vec()));
                }
            }
            Piece::Mark(Mark::PromptEnd) => {
                self.prompt_ready = true;
                self.start_next(pty);
            }
            Piece::Mark(Mark::PromptStart) => {}
            Piece::Mark(Mark::OutputStart) => {
                if let Some(r) = self.running.as_mut() {
                    r.capturing = true;
                }
            }
            // Typed only after a prompt, so any status that follows is our command's.
            Piece::Mark(Mark::Finished(code)) => {
                if let Some(r) = self.running.take() {
                    let _ = r.run.events.send(TaskEvent::Finished(code));
                }
            }
        }
    }

    fn start_next(&mut self, pty: &Pty) {
        if !self.prompt_ready || self.running.is_some() {
            return;
        }
        let Some(run) = self.queue.pop_front() else {
            return;
        };
        let mut line = run.line.clone().into_bytes();
        line.push(b'\r');
        match pty.write(line) {
            Ok(()) => {
                self.prompt_ready = false;
                let _ = run.events.send(TaskEvent::Started);
                self.running = Some(Running {
                    run,
                    capturing: false,
                    kill_at: None,
                    last_output: Instant::now(),
                    asked: false,
                });
            }
            Err(_) => {
                let _ = run.events.send(TaskEvent::Ended);
            }
        }
    }

    fn cancel(&mut self, task_id: &str, pty: &Pty) {
        if let Some(i) = self.queue.iter().position(|r| r.task_id == task_id) {
            if let Some(run) = self.queue.remove(i) {
                let _ = run.events.send(TaskEvent::Dequeued);
            }
        } else if let Some(r) = self.running.as_mut().filter(|r| r.run.task_id == task_id) {
            let _ = pty.write(vec![0x03]);
            r.kill_at.get_or_insert(Instant::now() + CANCEL_GRACE);
        }
    }

    /// A running command has been silent for the idle window and not yet reported.
    fn may_wait_for_input(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| r.capturing && !r.asked && r.last_output.elapsed() >= INPUT_IDLE)
    }

    /// Reports the running command as waiting for input, with the visible prompt.
    fn input_required(&mut self, prompt: String) {
        if let Some(r) = self.running.as_mut() {
            r.asked = true;
            let _ = r.run.events.send(TaskEvent::InputRequired(prompt));
        }
    }

    /// Types an answer for the running task; false when it is not the one waiting.
    fn answer(&mut self, task_id: &str, message: wire::a2a::Message, pty: &Pty) -> bool {
        let Some(r) = self
            .running
            .as_mut()
            .filter(|r| r.run.task_id == task_id && r.asked)
        else {
            return false;
        };
        let mut line = message.text().into_bytes();
        line.push(b'\r');
        if pty.write(line).is_err() {
            return false;
        }
        r.asked = false;
        r.last_output = Instant::now();
        let _ = r.run.events.send(TaskEvent::Resumed(message));
        true
    }

    fn kill_at(&self) -> Option<Instant> {
        self.running.as_ref().and_then(|r| r.kill_at)
    }

    /// The grace period of a cancel ran out: kill the foreground job (never the shell).
    fn kill_overdue(&mut self, pty: &Pty) {
        if let Some(r) = self
            .running
            .as_mut()
            .filter(|r| r.kill_at.is_some_and(|t| t <= Instant::now()))
        {
            r.kill_at = None;
            pty.kill_foreground_job();
        }
    }

    fn end(&mut self) {
        for run in self
            .running
            .take()
            .map(|r| r.run)
            .into_iter()
            .chain(self.queue.drain(..))
        {
            let _ = run.events.send(TaskEvent::Ended);
        }
    }
}

impl Actor {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>, events: PtyEvents) {
        let PtyEvents {
            mut output,
            mut exit,
        } = events;
        let mut eof = false;
        let mut exited: Option<Exit> = None;
        let mut drain_until: Option<Instant> = None;
        let mut kill_at: Option<Instant> = None;
        let mut ticker = tokio::time::interval(self.settings.keyframe_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut input_check = tokio::time::interval(INPUT_IDLE / 4);
        input_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let task_kill = self.shell.as_ref().and_then(|s| s.state.kill_at());
            let wake = [drain_until, kill_at, task_kill]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                biased;
                Some(cmd) = commands.recv() => {
                    if let Some(reason) = self.command(cmd)
                        && self.close_reason.is_none()
                    {
                        self.close_reason = Some(reason);
                        self.end_program();
                        kill_at = Some(Instant::now() + KILL_GRACE);
                    }
                }
                chunk = output.recv(), if !eof => match chunk {
                    Some(first) => {
                        let data = gather(first, &mut output).await;
                        self.output(data);
                    }
                    None => eof = true,
                },
                status = &mut exit, if exited.is_none() => {
                    exited = Some(status.unwrap_or(Exit { code: None }));
                    drain_until = Some(Instant::now() + EXIT_DRAIN);
                }
                _ = sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                    let now = Instant::now();
                    if kill_at.is_some_and(|t| t <= now) {
                        kill_at = None;
                        if exited.is_none() {
                            self.pty.signal_group(crate::sys::Signal::KILL);
                        }
                    }
                    if let Some(shell) = self.shell.as_mut() {
                        shell.state.kill_overdue(&self.pty);
                    }
                    if drain_until.is_some_and(|t| t <= now) {
                        break;
                    }
                }
                _ = input_check.tick(), if self.shell.as_ref().is_some_and(|s| s.state.may_wait_for_input()) => {
                    self.check_input_required();
                }
                _ = ticker.tick() => {
                    if self.outputs_since_keyframe > 0
                        && self.last_keyframe.elapsed() >= self.settings.keyframe_interval
                    {
                        self.broadcast_keyframe();
                    }
                }
            }
            if exited.is_some() && eof {
                break;
            }
        }
        self.close(exited.unwrap_or(Exit { code: None })).await;
    }

    /// Handles one command; returns a close reason when the session must end.
    fn command(&mut self, cmd: Command) -> Option<CloseReason> {
        match cmd {
            Command::Join(req, reply) => {
                let _ = reply.send(self.join(req));
            }
            Command::Leave(client_id, reply) => {
                let frame = self.leave(&client_id);
                if let (Some(reply), Some(frame)) = (reply, frame) {
                    let _ = reply.send(frame);
                }
            }
            Command::Input(client_id, data, reply) => {
                let _ = reply.send(self.input(&client_id, data));
            }
            Command::Resize(client_id, cols, rows, reply) => {
                let _ = reply.send(self.resize_by(&client_id, cols, rows));
            }
            Command::RequestRole(client_id, role, reply) => {
                let _ = reply.send(self.request_role(&client_id, role));
            }
            Command::RequestKeyframe(client_id, reply) => {
                let _ = reply.send(self.request_keyframe(&client_id));
            }
            Command::Ack(client_id, sequence, reply) => {
                let _ = reply.send(self.ack(&client_id, sequence));
            }
            Command::RunTask(run, reply) => {
                let _ = reply.send(self.run_task(run));
            }
            Command::AnswerTask(task_id, message, reply) => {
                let typed = self
                    .shell
                    .as_mut()
                    .is_some_and(|s| s.state.answer(&task_id, message, &self.pty));
                let _ = reply.send(typed);
            }
            Command::CancelTask(task_id) => {
                if let Some(shell) = self.shell.as_mut() {
                    shell.state.cancel(&task_id, &self.pty);
                }
            }
            Command::Terminate(reason) => return Some(reason),
        }
        None
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.last_sequence.store(self.seq, Ordering::Release);
        self.seq
    }

    /// Numbers, encodes, retains, persists and fans out one frame; `skip` does not get it
    /// through its queue (the joiner receives it in its initial flush instead).
    fn broadcast(&mut self, frame: SessionFrame, skip: Option<&str>) -> Bytes {
        let seq = self.next_seq();
        let retained = new_frame(seq, &frame, clock::now_ms());
        let json = envelope(&retained);
        self.retain(retained);
        for i in 0..self.members.len() {
            if skip != Some(self.members[i].client_id.as_str()) {
                self.deliver(i, Outbound::Frame(json.clone()));
            }
        }
        json
    }

    /// Numbers, retains, persists and fans out PTY output: binary members get it as `PW1O`,
    /// JSON members as its envelope, each encoded once and only if someone takes it; a
    /// member whose acknowledgement window is full skips it.
    fn broadcast_output(&mut self, data: Vec<u8>) {
        let seq = self.next_seq();
        let len = data.len();
        let binary = self
            .members
            .iter()
            .any(|m| m.binary)
            .then(|| Bytes::from(wire::binary_output(seq, &data)));
        let retained = new_output(seq, Bytes::from(data), clock::now_ms());
        let json = self
            .members
            .iter()
            .any(|m| !m.binary)
            .then(|| envelope(&retained));
        self.retain(retained);
        for i in 0..self.members.len() {
            if let Some(flow) = self.members[i].flow.as_mut()
                && !flow.admit(seq, len)
            {
                continue;
            }
            let out = match (&binary, &json) {
                (Some(b), _) if self.members[i].binary => Outbound::Binary(b.clone()),
                (_, Some(j)) => Outbound::Frame(j.clone()),
                _ => continue,
            };
            self.deliver(i, out);
        }
    }

    /// Keeps a numbered frame for replay: in the ring, and in the store behind.
    fn retain(&mut self, frame: Frame) {
        self.ring.push(frame.clone());
        self.ring.evict(self.persisted.borrow().upto);
        let _ = self.persist.send(Persist::Frame(frame));
    }

    /// A frame for one member only: numbered from the shared counter, never retained.
    fn personal(&mut self, frame: SessionFrame) -> Bytes {
        let seq = self.next_seq();
        encode_frame(seq, &frame)
    }

    /// Queues a frame for member `i` without waiting. A full queue marks it lagging; once
    /// its queue has room again it gets `PTY_OUTPUT_LAGGED` and a fresh keyframe instead of
    /// what it missed.
    fn deliver(&mut self, i: usize, out: Outbound) {
        if self.members[i].lagged {
            if self.members[i].out.capacity() < 2 {
                return;
            }
            let lagged = self.personal(SessionFrame::Error {
                code: PtyErrorCode::PtyOutputLagged,
                message: "this viewer fell behind; continuing from a keyframe".into(),
            });
            let keyframe = self.keyframe_frame();
            let keyframe = self.personal(keyframe);
            let m = &mut self.members[i];
            m.lagged = false;
            for f in [lagged, keyframe] {
                let _ = m.out.try_send(Outbound::Frame(f));
            }
            return;
        }
        let m = &mut self.members[i];
        if let Err(mpsc::error::TrySendError::Full(_)) = m.out.try_send(out) {
            tracing::debug!(session_id = %self.id, client_id = %m.client_id, "viewer lagging");
            m.lagged = true;
        }
    }

    /// An acknowledgement: the member's window moves on, and a member whose output was
    /// skipped gets a keyframe once it has caught up.
    fn ack(&mut self, client_id: &str, sequence: u64) -> Result<(), Refusal> {
        let i = self
            .index(client_id)
            .ok_or_else(|| Refusal::new(ErrorCode::InvalidRequest, "join the session first"))?;
        if sequence > self.seq {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!("sequence {sequence} has not been sent yet"),
            ));
        }
        let flow = self.members[i].flow.get_or_insert_with(Window::default);
        if flow.ack(sequence) {
            let keyframe = self.personal_keyframe();
            self.deliver(i, Outbound::Frame(keyframe));
        }
        Ok(())
    }

    fn deliver_to(&mut self, client_id: &str, json: Bytes) {
        if let Some(i) = self.index(client_id) {
            self.deliver(i, Outbound::Frame(json));
        }
    }

    fn index(&self, client_id: &str) -> Option<usize> {
        self.members.iter().position(|m| m.client_id == client_id)
    }

    fn output(&mut self, data: Vec<u8>) {
        self.screen.feed(&data);
        if let Some(Shell { scanner, state }) = self.shell.as_mut() {
            let pty = &self.pty;
            scanner.scan(&data, |piece| state.on_piece(piece, pty));
        }
        self.broadcast_output(data);
        self.outputs_since_keyframe += 1;
        if self.outputs_since_keyframe >= self.settings.keyframe_frames {
            self.broadcast_keyframe();
        }
    }

    /// A keyframe of the current screen, anchored at the last frame numbered so far.
    fn keyframe_frame(&mut self) -> SessionFrame {
        let (cols, rows) = self.screen.size();
        SessionFrame::Keyframe {
            snapshot: Base64Bytes(self.screen.snapshot()),
            snapshot_format: SNAPSHOT_FORMAT.into(),
            snapshot_cols: cols,
            snapshot_rows: rows,
            anchor_sequence: self.seq,
        }
    }

    fn personal_keyframe(&mut self) -> Bytes {
        let frame = self.keyframe_frame();
        self.personal(frame)
    }

    fn broadcast_keyframe(&mut self) {
        let frame = self.keyframe_frame();
        self.broadcast(frame, None);
        self.outputs_since_keyframe = 0;
        self.last_keyframe = Instant::now();
    }

    fn membership_frame(&self) -> SessionFrame {
        let refs = |role: Role| {
            self.members
                .iter()
                .filter(|m| m.role == role)
                .map(|m| ClientRef {
                    client_id: m.client_id.clone(),
                    label: m.label.clone(),
                })
                .collect()
        };
        SessionFrame::MembershipChanged {
            controllers: refs(Role::Controller),
            observers: refs(Role::Observer),
        }
    }

    fn count(&self, role: Role) -> usize {
        self.members.iter().filter(|m| m.role == role).count()
    }

    fn publish_status(&self) {
        let (cols, rows) = self.screen.size();
        self.status.send_replace(LiveStatus {
            controllers: self.count(Role::Controller),
            observers: self.count(Role::Observer),
            cols,
            rows,
        });
    }

    fn membership_changed(&mut self, skip: Option<&str>) -> Bytes {
        self.publish_status();
        let frame = self.membership_frame();
        self.broadcast(frame, skip)
    }

    fn join(&mut self, req: JoinRequest) -> Result<Joined, Refusal> {
        if self.close_reason.is_some() {
            return Err(Refusal::new(ErrorCode::Internal, "the session is closing"));
        }
        if req.role == Role::Controller && req.scope < Scope::Control {
            return Err(Refusal::new(
                ErrorCode::PermissionDenied,
                "a pty:observe token cannot take the controller role",
            ));
        }
        let (role, downgrade) = match req.role {
            Role::Controller if self.count(Role::Controller) < self.settings.max_controllers => {
                (Role::Controller, None)
            }
            Role::Controller => (Role::Observer, Some(self.capacity_reason())),
            Role::Observer => (Role::Observer, None),
        };
        if role == Role::Observer && self.count(Role::Observer) >= self.settings.max_observers {
            return Err(Refusal::new(
                ErrorCode::RateLimited,
                format!(
                    "observer capacity ({}) reached",
                    self.settings.max_observers
                ),
            ));
        }
        if role == Role::Controller && !self.had_controller {
            self.had_controller = true;
            if let Some((cols, rows)) = req.size {
                self.apply_resize(cols, rows)
                    .map_err(|m| Refusal::new(ErrorCode::Internal, m))?;
            }
        }
        let client_id = uuid::Uuid::now_v7().to_string();
        let first = self.personal(SessionFrame::RoleAssigned {
            role,
            client_id: client_id.clone(),
            downgraded: downgrade.as_ref().map(|_| true),
            reason: downgrade,
        });
        let replay = match req.replay_from {
            None => Replay::None,
            Some(after) => self.replay_plan(after),
        };
        tracing::info!(
            session_id = %self.id, %client_id, role = ?role, scope = %req.scope,
            label = req.label.as_deref().unwrap_or(""), "member joined"
        );
        self.members.push(Member {
            client_id: client_id.clone(),
            role,
            scope: req.scope,
            label: req.label,
            out: req.out,
            binary: req.binary,
            flow: None,
            lagged: false,
            last_keyframe_request: None,
        });
        let rest = match replay {
            Replay::None => {
                let membership = self.membership_changed(Some(&client_id));
                vec![membership, self.personal_keyframe()]
            }
            _ => {
                let keyframe = self.personal_keyframe();
                vec![keyframe, self.membership_changed(Some(&client_id))]
            }
        };
        Ok(Joined {
            client_id,
            role,
            first,
            replay,
            rest,
        })
    }

    fn capacity_reason(&self) -> String {
        format!(
            "controller capacity ({}) reached",
            self.settings.max_controllers
        )
    }

    /// Which retained frames follow `after`; the store holds what the ring no longer does.
    fn replay_plan(&self, after: u64) -> Replay {
        let current = self.seq;
        let ring_oldest = self.ring.oldest();
        let floor = self.persisted.borrow().floor;
        if after > current || after < floor {
            return Replay::OutOfRange { floor, current };
        }
        let store = match ring_oldest {
            Some(r) if r > after + 1 => Some((after, r)),
            Some(_) => None,
            None => Some((after, current + 1)),
        };
        Replay::Range {
            store,
            ring: self.ring.after(after).cloned().collect(),
        }
    }

    fn leave(&mut self, client_id: &str) -> Option<Bytes> {
        let i = self.index(client_id)?;
        let m = self.members.remove(i);
        tracing::info!(session_id = %self.id, client_id, role = ?m.role, "member left");
        Some(self.membership_changed(None))
    }

    /// The member, if it holds the controller role with a scope that allows control.
    fn controller(&self, client_id: &str, what: &str) -> Result<usize, Refusal> {
        let i = self
            .index(client_id)
            .ok_or_else(|| Refusal::new(ErrorCode::InvalidRequest, "join the session first"))?;
        let m = &self.members[i];
        if m.role != Role::Controller || m.scope < Scope::Control {
            tracing::info!(session_id = %self.id, client_id, what, "denied write from a non-controller");
            return Err(Refusal::new(
                ErrorCode::PermissionDenied,
                format!("only the controller may send {what}"),
            ));
        }
        Ok(i)
    }

    fn input(&mut self, client_id: &str, data: Vec<u8>) -> Result<(), Refusal> {
        self.controller(client_id, "input")?;
        if let Err(e) = self.pty.write(data) {
            let code = PtyErrorCode::PtyWriteFailed;
            let message = match e {
                InputError::Full => "input dropped: the program is not reading its terminal",
                InputError::Closed => "input dropped: the terminal is closed",
            };
            let frame = self.personal(SessionFrame::Error {
                code,
                message: message.into(),
            });
            self.deliver_to(client_id, frame);
        }
        Ok(())
    }

    fn apply_resize(&mut self, cols: u16, rows: u16) -> Result<(), String> {
        self.pty
            .resize(cols, rows)
            .map_err(|e| format!("resize failed: {e}"))?;
        self.screen.resize(cols, rows);
        self.broadcast(SessionFrame::Resize { cols, rows }, None);
        let _ = self.persist.send(Persist::Size(cols, rows));
        self.publish_status();
        Ok(())
    }

    fn resize_by(&mut self, client_id: &str, cols: u16, rows: u16) -> Result<(), Refusal> {
        self.controller(client_id, "resize")?;
        if let Err(message) = self.apply_resize(cols, rows) {
            let frame = self.personal(SessionFrame::Error {
                code: PtyErrorCode::PtyResizeFailed,
                message,
            });
            self.deliver_to(client_id, frame);
        }
        Ok(())
    }

    fn request_role(&mut self, client_id: &str, role: Role) -> Result<(), Refusal> {
        let i = self
            .index(client_id)
            .ok_or_else(|| Refusal::new(ErrorCode::InvalidRequest, "join the session first"))?;
        let (current, scope) = (self.members[i].role, self.members[i].scope);
        if role == Role::Controller && scope < Scope::Control {
            return Err(Refusal::new(
                ErrorCode::PermissionDenied,
                "a pty:observe token cannot take the controller role",
            ));
        }
        let (granted, downgrade) = match (role, current) {
            (Role::Controller, Role::Observer)
                if self.count(Role::Controller) >= self.settings.max_controllers =>
            {
                (Role::Observer, Some(self.capacity_reason()))
            }
            _ => (role, None),
        };
        let assigned = self.personal(SessionFrame::RoleAssigned {
            role: granted,
            client_id: client_id.to_owned(),
            downgraded: downgrade.as_ref().map(|_| true),
            reason: downgrade,
        });
        self.deliver(i, Outbound::Frame(assigned));
        if granted != current {
            self.members[i].role = granted;
            self.audit.record(
                audit::Record::new(audit::Event::RoleChanged, &self.id)
                    .client(client_id)
                    .detail(serde_json::json!({ "from": current, "to": granted })),
            );
            self.membership_changed(None);
        }
        Ok(())
    }

    /// A silent command blocked reading the terminal needs input: report the prompt line.
    fn check_input_required(&mut self) {
        if !self.pty.foreground_reads_terminal() {
            return;
        }
        let row = self.screen.cursor().position().map_or(0, |(_, row)| row);
        let prompt = self.screen.text().get(row).cloned().unwrap_or_default();
        if let Some(shell) = self.shell.as_mut() {
            shell.state.input_required(prompt);
        }
    }

    fn run_task(&mut self, run: TaskRun) -> Result<(), Refusal> {
        if self.close_reason.is_some() {
            return Err(Refusal::new(ErrorCode::Internal, "the session is closing"));
        }
        let Some(shell) = self.shell.as_mut() else {
            return Err(Refusal::new(
                ErrorCode::UnsupportedOperation,
                "this session runs a program without shell integration; tasks need a session started as a shell",
            ));
        };
        shell.state.queue.push_back(run);
        shell.state.start_next(&self.pty);
        Ok(())
    }

    fn request_keyframe(&mut self, client_id: &str) -> Result<(), Refusal> {
        let i = self
            .index(client_id)
            .ok_or_else(|| Refusal::new(ErrorCode::InvalidRequest, "join the session first"))?;
        let now = Instant::now();
        if self.members[i]
            .last_keyframe_request
            .is_some_and(|t| now.duration_since(t) < KEYFRAME_REQUEST_INTERVAL)
        {
            return Err(Refusal::new(
                ErrorCode::RateLimited,
                "keyframes can be requested once per second",
            ));
        }
        self.members[i].last_keyframe_request = Some(now);
        let frame = self.personal_keyframe();
        self.deliver(i, Outbound::Frame(frame));
        Ok(())
    }

    /// Emits the final keyframe and the one `Closed`, says goodbye to every member, waits
    /// until the history is durable, and retires the session.
    /// Whether ptyhost is stopping while this session's program lives on (managed).
    fn detaching(&self) -> bool {
        matches!(self.host, Host::Tmux(_))
            && self.close_reason == Some(CloseReason::InstanceTerminated)
    }

    /// Ends the program: SIGHUP to its process group; a managed program's tmux session is
    /// killed instead, unless ptyhost is only stopping (then its client just detaches).
    fn end_program(&self) {
        match &self.host {
            Host::Tmux(tmux) if !self.detaching() => tmux.kill(&self.id),
            _ => self.pty.signal_group(crate::sys::Signal::HUP),
        }
    }

    async fn close(mut self, exit: Exit) {
        if let Some(shell) = self.shell.as_mut() {
            shell.state.end();
        }
        if self.detaching() {
            return self.detach().await;
        }
        let reason = self.close_reason.unwrap_or(match exit.code {
            Some(_) => CloseReason::Normal,
            None => CloseReason::Killed,
        });
        let keyframe = self.keyframe_frame();
        let keyframe = self.broadcast(keyframe, None);
        let closed = self.broadcast(
            SessionFrame::Closed {
                exit_code: exit.code,
                reason,
                detail: None,
            },
            None,
        );
        let goodbye = if reason == CloseReason::InstanceTerminated {
            "server_shutdown"
        } else {
            "session_closed"
        };
        self.farewell(&[keyframe, closed], goodbye);
        self.publish_status();
        let (done, flushed) = oneshot::channel();
        let _ = self.persist.send(Persist::Close {
            exit_code: exit.code,
            reason,
            done,
        });
        let _ = flushed.await;
        tracing::info!(session_id = %self.id, exit_code = ?exit.code, reason = ?reason, "session closed");
        self.registry.retire(&self.id);
    }
}

impl Actor {
    /// Says goodbye to every member. One that fell behind (its queue was full for the
    /// last frames) first gets `last` — the final keyframe and `Closed` — waiting for room
    /// in its queue, so no viewer misses how the session ended.
    fn farewell(&mut self, last: &[Bytes], goodbye: &'static str) {
        for m in self.members.drain(..) {
            let mut tail: Vec<Outbound> = if m.lagged {
                last.iter().cloned().map(Outbound::Frame).collect()
            } else {
                Vec::new()
            };
            tail.push(Outbound::Goodbye(goodbye));
            let out = m.out;
            tokio::spawn(async move {
                let send_all = async {
                    for o in tail {
                        if out.send(o).await.is_err() {
                            return;
                        }
                    }
                };
                let _ = tokio::time::timeout(FAREWELL_WAIT, send_all).await;
            });
        }
    }

    /// ptyhost stops, the managed program goes on: a keyframe for the next process to
    /// rebuild from, goodbyes, every frame persisted, and no `Closed`.
    async fn detach(mut self) {
        let keyframe = self.keyframe_frame();
        let keyframe = self.broadcast(keyframe, None);
        self.farewell(&[keyframe], "server_shutdown");
        let (done, flushed) = oneshot::channel();
        let _ = self.persist.send(Persist::Flush(done));
        let _ = flushed.await;
        tracing::info!(session_id = %self.id, "detached from a managed session; it goes on");
        self.registry.retire(&self.id);
    }
}

/// One output frame: `first` and whatever already followed it, up to `MAX_OUTPUT_FRAME`. A
/// read that filled the terminal's buffer says a flood is on: then, if the frame is not
/// full yet, it waits `GATHER` once and takes what arrived meanwhile, so a flood goes out in
/// large frames (each is numbered, retained, persisted and sent) and wakes the actor once a
/// frame rather than once a 4 KiB read. Interactive output (an echo, a prompt) does not
/// fill the buffer and goes at once.
async fn gather(first: Bytes, more: &mut mpsc::Receiver<Bytes>) -> Vec<u8> {
    let flooding = first.len() >= FULL_READ;
    let mut data = first.to_vec();
    take_queued(&mut data, more);
    if flooding && data.len() < MAX_OUTPUT_FRAME {
        tokio::time::sleep(GATHER).await;
        take_queued(&mut data, more);
    }
    data
}

fn take_queued(data: &mut Vec<u8>, more: &mut mpsc::Receiver<Bytes>) {
    while data.len() < MAX_OUTPUT_FRAME {
        match more.try_recv() {
            Ok(chunk) => data.extend_from_slice(&chunk),
            Err(_) => break,
        }
    }
}

/// Persists frames in batches, the session's size and its close; prunes frames outside both
/// retention bounds. A batch is what queued up within `BATCH_WINDOW` of its first frame (or
/// while the last batch was written): typing then costs one transaction per burst, written
/// after its echo went out rather than beside it.
async fn write_behind(
    store: Store,
    id: String,
    mut rx: mpsc::UnboundedReceiver<Persist>,
    persisted: watch::Sender<Persisted>,
    settings: Settings,
) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut last_prune = Instant::now();
    let mut since_prune = 0usize;
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
                Persist::Flush(done) => {
                    flush(&store, &id, &mut frames, &persisted).await;
                    let _ = done.send(());
                }
                Persist::Size(cols, rows) => {
                    flush(&store, &id, &mut frames, &persisted).await;
                    if let Err(e) = store.set_session_size(&id, cols, rows).await {
                        tracing::error!(session_id = %id, error = %e, "persisting size failed");
                    }
                }
                Persist::Close {
                    exit_code,
                    reason,
                    done,
                } => {
                    flush(&store, &id, &mut frames, &persisted).await;
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
        flush(&store, &id, &mut frames, &persisted).await;
        if since_prune >= settings.replay_frames || last_prune.elapsed() >= PRUNE_INTERVAL {
            last_prune = Instant::now();
            since_prune = 0;
            prune(&store, &id, &persisted, &settings).await;
        }
    }
}

async fn flush(
    store: &Store,
    id: &str,
    frames: &mut Vec<Frame>,
    persisted: &watch::Sender<Persisted>,
) {
    let Some(last) = frames.last().map(|f| f.sequence) else {
        return;
    };
    let first = frames[0].sequence;
    let mut delay = Duration::from_millis(50);
    for attempt in 1..=5 {
        match store.insert_frames(id, frames).await {
            Ok(()) => break,
            Err(e) if attempt < 5 => {
                tracing::warn!(session_id = %id, error = %e, attempt, "persisting frames failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(e) => {
                tracing::error!(session_id = %id, error = %e, first, last, "persisting frames failed")
            }
        }
    }
    frames.clear();
    persisted.send_modify(|p| p.upto = last);
}

async fn prune(store: &Store, id: &str, persisted: &watch::Sender<Persisted>, settings: &Settings) {
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
