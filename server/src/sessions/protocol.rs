//! How connections and the task service talk to a session's owner task: the commands it
//! takes, what a join gets, and the frames it sends, encoded once.

use anyhow::Result;
use bytes::Bytes;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use wire::{CloseReason, Role, SessionFrame};

use super::actor::TaskRun;
use crate::auth::Scope;
use crate::clock;
use crate::store::{Frame, FrameBody};

/// Encodes a `pty.session_frame` envelope once; every subscriber gets the same bytes.
pub fn encode_frame(sequence: u64, frame: &SessionFrame) -> Bytes {
    let id = uuid::Uuid::now_v7().to_string();
    encode_envelope(sequence, &id, clock::now_ms(), frame)
}

pub(super) fn encode_envelope(sequence: u64, id: &str, at_ms: i64, frame: &SessionFrame) -> Bytes {
    let ts = clock::rfc3339(at_ms);
    let text =
        wire::server::encode_envelope(wire::OP_SESSION_FRAME, id, &ts, Some(sequence), frame);
    Bytes::from(text)
}

/// A frame numbered `sequence`, encoded once for clients (stamped `created_at`) and ready
/// to retain.
pub fn new_frame(sequence: u64, frame: &SessionFrame, created_at: i64) -> Frame {
    let id = uuid::Uuid::now_v7().to_string();
    Frame {
        sequence,
        created_at,
        body: FrameBody::Envelope {
            kind: frame.kind().into(),
            text: encode_envelope(sequence, &id, created_at, frame),
        },
    }
}

/// Output numbered `sequence`, under a fresh envelope id.
pub fn new_output(sequence: u64, data: Bytes, created_at: i64) -> Frame {
    Frame {
        sequence,
        created_at,
        body: FrameBody::Output {
            envelope_id: uuid::Uuid::now_v7().to_string(),
            data,
        },
    }
}

/// A retained frame's JSON text: what every JSON viewer got live, byte for byte (output is
/// rendered from its bytes, envelope id and time).
pub fn envelope(frame: &Frame) -> Bytes {
    match &frame.body {
        FrameBody::Envelope { text, .. } => text.clone(),
        FrameBody::Output { envelope_id, data } => {
            let ts = clock::rfc3339(frame.created_at);
            let op = wire::OP_SESSION_FRAME;
            Bytes::from(wire::output_envelope(
                op,
                envelope_id,
                &ts,
                frame.sequence,
                data,
            ))
        }
    }
}

/// What a connection receives from its session after joining.
#[derive(Debug)]
pub enum Outbound {
    /// A JSON text frame.
    Frame(Bytes),
    /// PTY output in the member's encoding (`binary`: a `PW1O` frame), and when it was queued:
    /// a connection that falls behind skips output gone stale (`SessionCommand::Resync`).
    Output {
        frame: Bytes,
        binary: bool,
        queued: std::time::Instant,
    },
    /// The newest membership list, a JSON text frame. While it waits at the tail of the
    /// queue, a newer list replaces it in place (a burst of joins sends the last one only);
    /// the connection takes it out when it gets there.
    Membership(MembershipSlot),
    /// The session is over (or the server stops): say goodbye with this reason and close.
    Goodbye(&'static str),
}

/// Where a queued `Outbound::Membership` keeps its frame until the connection takes it.
pub type MembershipSlot = std::sync::Arc<std::sync::Mutex<Option<Bytes>>>;

/// The op of a task event in the session's stream, and the kind it is retained as.
pub const TASK_UPDATE: &str = "TaskStatusUpdate";

/// Whether a retained frame is a task event (replayed to that task's subscribers only).
pub fn is_task_update(frame: &Frame) -> bool {
    matches!(&frame.body, FrameBody::Envelope { kind, .. } if kind == TASK_UPDATE)
}

/// An event of a task that a connection follows. Every follower asks with the event's
/// place in the task's stream (`(n, snapshot)`); the first ask numbers it, the others get
/// the same sequence and id.
pub struct TaskUpdate {
    pub task_id: String,
    pub place: (u64, bool),
    /// The `TaskStatusUpdate` payload.
    pub payload: Box<wire::server::TaskUpdate>,
    /// A joined follower's client id: the frame goes into its queue, in order.
    pub member: Option<String>,
    pub service_parameters: Option<serde_json::Map<String, serde_json::Value>>,
    /// The follower has sent every update up to this sequence already (a replay).
    pub sent_upto: u64,
    /// The frame to send, when it did not go into a member's queue (or was sent already).
    pub reply: oneshot::Sender<Option<Bytes>>,
}

/// How a member takes PTY output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputEncoding {
    /// The spec's JSON envelope (`pty.session_frame` Output).
    Json,
    /// `PW1O` binary frames (`pty-ws.v1.binary`).
    Binary,
    /// The agentic-sandbox executor's `output` frame.
    Executor,
}

/// The visible screen as text rows, its cursor and size, and the command running in the
/// terminal, if any (what MCP's `read_screen` answers, schema included).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ScreenText {
    /// The visible rows, trailing blanks trimmed.
    pub lines: Vec<String>,
    pub cursor: ScreenCursor,
    pub cols: u16,
    pub rows: u16,
    /// The command running in the terminal, if any (none while the shell waits at its prompt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
}

/// Zero-based.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ScreenCursor {
    pub row: usize,
    pub col: usize,
}

/// A client asking to join.
pub struct JoinRequest {
    pub role: Role,
    pub scope: Scope,
    pub label: Option<String>,
    pub replay_from: Option<u64>,
    pub size: Option<(u16, u16)>,
    pub out: mpsc::Sender<Outbound>,
    pub output: OutputEncoding,
}

/// The joiner's initial flush, in the order it must be written.
#[derive(Debug)]
pub struct Joined {
    pub client_id: String,
    pub role: Role,
    /// `RoleAssigned`.
    pub first: Bytes,
    pub replay: Replay,
    /// `MembershipChanged` and `Keyframe`, in the order the case calls for.
    pub rest: Vec<Bytes>,
}

#[derive(Debug)]
pub enum Replay {
    None,
    /// Frames after `after`: those below the ring (read from the store) and the ring's own.
    Range {
        store: Option<(u64, u64)>,
        ring: Vec<Frame>,
    },
    OutOfRange {
        floor: u64,
        current: u64,
    },
}

/// A refusal from the session, in the binding's vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRefusal {
    pub code: wire::ErrorCode,
    pub message: String,
}

impl SessionRefusal {
    pub fn new(code: wire::ErrorCode, message: impl Into<String>) -> SessionRefusal {
        SessionRefusal {
            code,
            message: message.into(),
        }
    }
}

/// A member's id in its session (`client_id` on the wire), which every member command
/// names first; a task id cannot stand in for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientId(pub String);

/// An A2A task's id, as the session's shell queue knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskId(pub String);

/// A session's id: the key of the live registry, of its rows in the store and of its
/// pty-ws URL. A client or task id cannot stand in for it.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for SessionId {
    fn from(id: String) -> SessionId {
        SessionId(id)
    }
}

impl From<&String> for SessionId {
    fn from(id: &String) -> SessionId {
        SessionId(id.clone())
    }
}

impl From<&str> for SessionId {
    fn from(id: &str) -> SessionId {
        SessionId(id.to_owned())
    }
}

impl std::borrow::Borrow<str> for SessionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for ClientId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for TaskId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

pub enum SessionCommand {
    Join(JoinRequest, oneshot::Sender<Result<Joined, SessionRefusal>>),
    /// Leave; the reply (if asked for) is the final `MembershipChanged`.
    Leave(ClientId, Option<oneshot::Sender<Bytes>>),
    Input(
        ClientId,
        Vec<u8>,
        oneshot::Sender<Result<(), SessionRefusal>>,
    ),
    Resize(
        ClientId,
        u16,
        u16,
        oneshot::Sender<Result<(), SessionRefusal>>,
    ),
    RequestRole(ClientId, Role, oneshot::Sender<Result<(), SessionRefusal>>),
    RequestKeyframe(ClientId, oneshot::Sender<Result<(), SessionRefusal>>),
    /// A keyframe of the screen now, for a connection that has not joined.
    Keyframe(oneshot::Sender<Bytes>),
    /// The member's connection skipped stale output: send it `PTY_OUTPUT_LAGGED` and a
    /// fresh keyframe.
    Resync(ClientId),
    /// The member has rendered every output frame up to the ack's sequence (and may ask
    /// for a smaller window).
    Ack(
        ClientId,
        wire::Ack,
        oneshot::Sender<Result<(), SessionRefusal>>,
    ),
    /// Input from an agent's tool call (MCP `send_keys`): typed as a controller types,
    /// without joining.
    Type(Vec<u8>, oneshot::Sender<Result<(), SessionRefusal>>),
    /// The visible screen as text, and what runs in the terminal.
    Screen(oneshot::Sender<ScreenText>),
    /// Queue a command line for the session's shell.
    RunTask(TaskRun, oneshot::Sender<Result<(), SessionRefusal>>),
    /// Type the answer to a task waiting for input; the reply says whether it was typed.
    AnswerTask(TaskId, wire::a2a::Message, oneshot::Sender<bool>),
    /// Cancel a queued or running task: Ctrl-C, then SIGKILL of the foreground job.
    CancelTask(TaskId),
    /// Number (once) and deliver an event of a task a connection follows.
    TaskUpdate(TaskUpdate),
    /// Which retained frames follow this sequence.
    Replay(u64, oneshot::Sender<Replay>),
    /// Freezes the session (`true`: for a snapshot, which resumes it when taken).
    Pause(bool, oneshot::Sender<Result<super::Pause, SessionRefusal>>),
    /// Thaws it; false when it was not paused.
    Resume(oneshot::Sender<bool>),
    /// A snapshot was taken (its id) or failed.
    Snapshotted(Option<String>),
    /// A pooled shell was taken: its ttl and idle clocks start now.
    Arm,
    Terminate(CloseReason),
}
