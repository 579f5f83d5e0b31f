//! How connections and the task service talk to a session's owner task: the commands it
//! takes, what a join gets, and the frames it sends, encoded once.

use super::*;

/// Encodes a `pty.session_frame` envelope once; every subscriber gets the same bytes.
pub fn encode_frame(sequence: u64, frame: &SessionFrame) -> Bytes {
    let id = uuid::Uuid::now_v7().to_string();
    encode_envelope(sequence, &id, clock::now_ms(), frame)
}

pub(super) fn encode_envelope(sequence: u64, id: &str, at_ms: i64, frame: &SessionFrame) -> Bytes {
    #[derive(Serialize)]
    struct Out<'a> {
        op: &'static str,
        id: &'a str,
        ts: String,
        sequence: u64,
        payload: &'a SessionFrame,
    }
    let out = Out {
        op: wire::OP_SESSION_FRAME,
        id,
        ts: clock::rfc3339(at_ms),
        sequence,
        payload: frame,
    };
    Bytes::from(serde_json::to_vec(&out).expect("session frames serialize"))
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
            let output = SessionFrame::Output {
                stream: OutputStream::Stdout,
                data: wire::Base64Bytes(data.to_vec()),
            };
            encode_envelope(frame.sequence, envelope_id, frame.created_at, &output)
        }
    }
}

/// What a connection receives from its session after joining.
#[derive(Debug)]
pub enum Outbound {
    /// A JSON text frame.
    Frame(Bytes),
    /// PTY output: its JSON envelope, or (`binary`) its `PW1O` frame, and when it was queued:
    /// a connection that falls behind skips output gone stale (`Command::Resync`).
    Output {
        frame: Bytes,
        binary: bool,
        queued: std::time::Instant,
    },
    /// The session is over (or the server stops): say goodbye with this reason and close.
    Goodbye(&'static str),
}

/// A client asking to join.
pub struct JoinRequest {
    pub role: Role,
    pub scope: Scope,
    pub label: Option<String>,
    pub replay_from: Option<u64>,
    pub size: Option<(u16, u16)>,
    pub out: mpsc::Sender<Outbound>,
    /// Output as `PW1O` binary frames.
    pub binary: bool,
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
pub struct Refusal {
    pub code: wire::ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: wire::ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

pub enum Command {
    Join(JoinRequest, oneshot::Sender<Result<Joined, Refusal>>),
    /// Leave; the reply (if asked for) is the final `MembershipChanged`.
    Leave(String, Option<oneshot::Sender<Bytes>>),
    Input(String, Vec<u8>, oneshot::Sender<Result<(), Refusal>>),
    Resize(String, u16, u16, oneshot::Sender<Result<(), Refusal>>),
    RequestRole(String, Role, oneshot::Sender<Result<(), Refusal>>),
    RequestKeyframe(String, oneshot::Sender<Result<(), Refusal>>),
    /// The member's connection skipped stale output: send it `PTY_OUTPUT_LAGGED` and a
    /// fresh keyframe.
    Resync(String),
    /// The member has rendered every output frame up to this sequence.
    Ack(String, u64, oneshot::Sender<Result<(), Refusal>>),
    /// Queue a command line for the session's shell.
    RunTask(TaskRun, oneshot::Sender<Result<(), Refusal>>),
    /// Type the answer to a task waiting for input; the reply says whether it was typed.
    AnswerTask(String, wire::a2a::Message, oneshot::Sender<bool>),
    /// Cancel a queued or running task: Ctrl-C, then SIGKILL of the foreground job.
    CancelTask(String),
    Terminate(CloseReason),
}
