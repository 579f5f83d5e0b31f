//! The owner task of one session. It alone touches the PTY, the emulator, the sequence
//! counter, the replay ring and the member list. It never waits on a viewer (bounded
//! queues, `try_send`) or on the disk (frames go to a write-behind task, `persist`). Its
//! other parts: `members` (joins, roles, input), `shell` (marks and tasks), `window`
//! (flow control), `ending` (the program's end and the session's), `backlog` (the queue to
//! the write-behind).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::Resumed;
use super::host::Host;
use crate::audit::Audit;
use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tokio_util::task::TaskTracker;
use wire::{self, CloseReason, SessionFrame};

mod backlog;
mod ending;
mod fanout;
mod lifetime;
mod members;
mod persist;
mod roster;
mod sequences;
mod shell;
mod updates;
mod window;
use window::KeyframeClock;

use super::pty::{Exit, Pty, PtyEvents, PtyOutput};
use super::replay::Ring;
use super::screen::Screen;
use super::{LiveStatus, Outbound, SessionCommand, SessionHandle, SessionSettings, Sessions};
use crate::clock;
use crate::store::Store;
pub use lifetime::{Pause, Timing};
pub use persist::Persisted;
use persist::write_behind;
use roster::{Member, Roster};
pub use sequences::RESERVE_AHEAD;
use sequences::Sequences;
use shell::ShellSide;
pub use shell::{TaskEvent, TaskRun};

/// Frames queued for one viewer before it counts as lagging.
const VIEWER_QUEUE: usize = 256;
/// A lagging viewer is re-keyed (an error and a keyframe) at most this often while output
/// goes on; it skips output between.
const REKEY_PACE: Duration = Duration::from_millis(100);
/// How long a slow viewer's last frames may wait for room in its queue.
const FAREWELL_WAIT: Duration = Duration::from_secs(10);
/// Output chunks are coalesced into frames of up to this many bytes.
const MAX_OUTPUT_FRAME: usize = 128 * 1024;
/// A read this large filled the terminal's buffer (4 KiB): more output is on its way.
const FULL_READ: usize = 4000;
/// How long a flood's frame gathers output before it goes out unless it is full.
const GATHER: Duration = Duration::from_millis(2);
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
/// A screen with no output for this long is compacted (`Screen::compact`).
const COMPACT_AFTER: Duration = Duration::from_secs(1);
/// Retention is enforced at least this often, and after every `replay_frames` frames.
const PRUNE_INTERVAL: Duration = Duration::from_secs(30);

pub struct Start {
    pub id: String,
    pub pty: Pty,
    pub events: PtyEvents,
    pub screen: Screen,
    pub settings: SessionSettings,
    pub store: Store,
    pub audit: Audit,
    pub registry: Sessions,
    pub shell_integration: bool,
    pub host: Host,
    /// A re-adopted session goes on from its stored sequence.
    pub resumed: Resumed,
    pub sandboxed: Option<Arc<super::Sandboxed>>,
    pub timing: Timing,
}

pub fn viewer_queue() -> (mpsc::Sender<Outbound>, mpsc::Receiver<Outbound>) {
    mpsc::channel(VIEWER_QUEUE)
}

pub fn start(tasks: &TaskTracker, s: Start) -> SessionHandle {
    let (commands, command_rx) = mpsc::channel(256);
    let (cols, rows) = s.screen.size();
    let (status_tx, status) = watch::channel(LiveStatus {
        cols,
        rows,
        ..LiveStatus::default()
    });
    let clocks = lifetime::Clocks::new(&s.timing, s.settings.lifecycle.pause_when_idle);
    let last_active = clocks.active_ms();
    let last_sequence = Arc::new(AtomicU64::new(s.resumed.sequence));
    let (persist, persist_rx) = backlog::channel();
    let refusing = s.store.refusal();
    let (persisted_tx, persisted) = watch::channel(Persisted {
        upto: s.resumed.sequence,
        floor: s.resumed.replay_floor,
        reserved: s.resumed.reserved,
    });
    let (program, host, sandboxed) = (s.pty.program(), s.host.clone(), s.sandboxed.clone());
    tasks.spawn(write_behind(
        s.store,
        s.id.clone(),
        persist_rx,
        persisted_tx,
        s.settings.clone(),
    ));
    let keyframes = KeyframeClock::new(s.settings.keyframe_frames, s.settings.keyframe_interval);
    let members = Roster::new(s.settings.max_controllers, s.settings.max_observers);
    let actor = Actor {
        id: s.id.clone(),
        pty: s.pty,
        screen: s.screen,
        ring: Ring::new(s.settings.replay_frames, RING_BYTES),
        settings: s.settings,
        sequences: Sequences::new(
            s.resumed.sequence,
            last_sequence.clone(),
            persist,
            persisted.clone(),
            refusing,
        ),
        members,
        status: status_tx,
        keyframes,
        close_reason: None,
        registry: s.registry,
        audit: s.audit,
        host: s.host,
        shell: s.shell_integration.then(ShellSide::default),
        numbered: Default::default(),
        sandboxed: s.sandboxed,
        clocks,
        rekey: None,
        compact_at: None,
    };
    actor.publish_status();
    tasks.spawn(actor.run(command_rx, s.events));
    SessionHandle {
        id: s.id.into(),
        shell: s.shell_integration,
        commands,
        status,
        last_sequence,
        persisted,
        program,
        host,
        sandboxed,
        last_active,
    }
}

struct Actor {
    id: String,
    pty: Pty,
    screen: Screen,
    ring: Ring,
    settings: SessionSettings,
    /// Sequences handed out and reserved, and the write-behind they go through.
    sequences: Sequences,
    members: Roster,
    status: watch::Sender<LiveStatus>,
    keyframes: KeyframeClock,
    close_reason: Option<CloseReason>,
    registry: Sessions,
    audit: Audit,
    host: Host,
    /// Present when the program marks its prompts (OSC 133): it runs tasks.
    shell: Option<ShellSide>,
    numbered: updates::Numbered,
    sandboxed: Option<Arc<super::Sandboxed>>,
    clocks: lifetime::Clocks,
    /// The last re-keying's two frames, until anything else is numbered (`next_seq`):
    /// members re-keyed meanwhile get the same.
    rekey: Option<[Bytes; 2]>,
    /// When the screen, in use now, is to be compacted.
    compact_at: Option<Instant>,
}

impl Actor {
    async fn run(mut self, mut commands: mpsc::Receiver<SessionCommand>, events: PtyEvents) {
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
            let readable = self.may_read();
            let lifetime = self
                .clocks
                .next(self.busy())
                .filter(|_| self.close_reason.is_none());
            if self.compact_at.is_none() && self.screen.in_use() {
                self.compact_at = Some(Instant::now() + COMPACT_AFTER);
            }
            let wake = [drain_until, kill_at, task_kill, lifetime, self.compact_at]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                biased;
                Some(cmd) = commands.recv() => {
                    if let Some(reason) = self.command(cmd) {
                        kill_at = self.begin_close(reason).or(kill_at);
                    }
                }
                first = output.read(), if !eof && readable => match first {
                    Some(first) => {
                        let data = gather(first, &mut output).await;
                        self.output(data);
                    }
                    None => eof = true,
                },
                _ = self.sequences.changed(), if !eof && !readable => {}
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
                    if self.compact_at.is_some_and(|t| t <= now) {
                        self.compact_at = None;
                        self.screen.compact();
                    }
                    if self.close_reason.is_none()
                        && let Some(reason) = self.lifetime_due()
                    {
                        kill_at = self.begin_close(reason).or(kill_at);
                    }
                    if drain_until.is_some_and(|t| t <= now) {
                        // Output held back for the store is still to be read: wait for it.
                        if !eof && !self.may_read() {
                            drain_until = Some(now + EXIT_DRAIN);
                        } else {
                            break;
                        }
                    }
                }
                _ = input_check.tick(), if self.shell.as_ref().is_some_and(|s| s.state.may_wait_for_input()) => {
                    self.check_input_required();
                }
                _ = ticker.tick() => {
                    if self.keyframes.stale(Instant::now())
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
    fn command(&mut self, cmd: SessionCommand) -> Option<CloseReason> {
        match cmd {
            SessionCommand::Join(req, reply) => {
                let _ = reply.send(self.join(req));
            }
            SessionCommand::Leave(client_id, reply) => {
                let frame = self.leave(&client_id);
                if let (Some(reply), Some(frame)) = (reply, frame) {
                    let _ = reply.send(frame);
                }
            }
            SessionCommand::Input(client_id, data, reply) => {
                let _ = reply.send(self.input(&client_id, data));
            }
            SessionCommand::Resize(client_id, cols, rows, reply) => {
                let _ = reply.send(self.resize_by(&client_id, cols, rows));
            }
            SessionCommand::RequestRole(client_id, role, reply) => {
                let _ = reply.send(self.request_role(&client_id, role));
            }
            SessionCommand::RequestKeyframe(client_id, reply) => {
                let _ = reply.send(self.request_keyframe(&client_id));
            }
            SessionCommand::Keyframe(reply) => {
                let _ = reply.send(self.personal_keyframe());
            }
            SessionCommand::Resync(client_id) => {
                if let Some(i) = self.index(&client_id) {
                    self.resync(i);
                }
            }
            SessionCommand::Ack(client_id, ack, reply) => {
                let _ = reply.send(self.ack(&client_id, ack));
            }
            SessionCommand::Type(data, reply) => {
                let _ = reply.send(self.type_in(data));
            }
            SessionCommand::Screen(reply) => {
                let _ = reply.send(self.screen_text());
            }
            SessionCommand::RunTask(run, reply) => {
                let _ = reply.send(self.run_task(run));
            }
            SessionCommand::AnswerTask(task_id, message, reply) => {
                let typed = self
                    .shell
                    .as_mut()
                    .is_some_and(|s| s.state.answer(&task_id, message, &self.pty));
                let _ = reply.send(typed);
            }
            SessionCommand::CancelTask(task_id) => {
                if let Some(shell) = self.shell.as_mut() {
                    shell.state.cancel(&task_id, &self.pty);
                }
            }
            SessionCommand::TaskUpdate(update) => self.task_update(update),
            SessionCommand::Replay(after, reply) => {
                let _ = reply.send(self.replay_plan(after));
            }
            SessionCommand::Pause(snapshot, reply) => {
                let _ = reply.send(self.pause(false, snapshot));
            }
            SessionCommand::Resume(reply) => {
                let _ = reply.send(self.resume());
            }
            SessionCommand::Snapshotted(taken) => self.snapshotted(taken),
            SessionCommand::Arm => {
                self.clocks.arm(clock::now_ms());
                self.publish_status();
            }
            SessionCommand::Terminate(reason) => return Some(reason),
        }
        None
    }

    /// Starts ending the session for `reason` (a paused one is thawed first, so that its
    /// processes can end); when its program gets SIGKILL. Nothing if it is ending already.
    fn begin_close(&mut self, reason: CloseReason) -> Option<Instant> {
        if self.close_reason.is_some() {
            return None;
        }
        self.resume();
        self.close_reason = Some(reason);
        self.end_program();
        Some(Instant::now() + KILL_GRACE)
    }

    /// A snapshot was taken (`Some`) or failed; a session paused for it alone resumes.
    fn snapshotted(&mut self, taken: Option<String>) {
        if self.clocks.paused.is_some_and(|p| p.snapshot) {
            self.resume();
        }
        if let Some(snapshot_id) = taken {
            self.broadcast(SessionFrame::Snapshotted { snapshot_id }, None);
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.rekey = None;
        let (seq, reserved) = self.sequences.next();
        if !reserved {
            tracing::warn!(session_id = %self.id, seq, "a sequence beyond the store's reservation was handed out");
        }
        seq
    }

    /// Whether the PTY may be read now: the store has reserved sequences for its output
    /// and keeps up with it, or refuses writes (then output is read on, and what waits for
    /// the store is bounded instead).
    fn may_read(&self) -> bool {
        let oldest = |upto| self.ring.after(upto).next().map(|f| f.created_at);
        self.sequences.may_read(oldest, clock::now_ms())
    }
}

/// One output frame: `first` and whatever the terminal has after it, up to
/// `MAX_OUTPUT_FRAME`. A read that filled the terminal's buffer says a flood is on: then
/// output is read as it comes for up to `GATHER`, so a flood goes out in large frames (each
/// is numbered, retained, persisted and sent) and wakes the rest of the actor once a frame
/// rather than once a 4 KiB read. Interactive output (an echo, a prompt) does not fill the
/// buffer and goes at once.
async fn gather(mut data: Vec<u8>, output: &mut PtyOutput) -> Vec<u8> {
    let flooding = data.len() >= FULL_READ;
    let until = Instant::now() + if flooding { GATHER } else { Duration::ZERO };
    if flooding {
        // Room for the whole frame at once: grown a read at a time, it was copied over and
        // over as it grew.
        data.reserve_exact(MAX_OUTPUT_FRAME.saturating_sub(data.len()));
    }
    output.read_more(&mut data, MAX_OUTPUT_FRAME, until).await;
    // The frame is kept for replay: without the room reads left in it.
    data.shrink_to_fit();
    data
}
