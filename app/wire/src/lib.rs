//! Wire types of the `pty-ws/v1` binding and the `pty-extensions/v1` extension, and (in
//! `a2a`) the A2A data model, shared by the server, the browser, the CLI and the tests.
//! Nothing here does I/O: encoding and decoding only, with serde alone.
#![forbid(unsafe_code)]

pub mod a2a;
mod binary;
pub mod card;
mod client_op;
pub mod control;
pub mod rpc;
pub mod server;
pub mod stdio;
pub mod v03;

pub use binary::{
    BINARY_INPUT_MAGIC, BINARY_OUTPUT_MAGIC, BINARY_STREAM_PTY, binary_input, binary_output,
    executor_frame, executor_output, output_envelope, parse_binary_output,
};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

pub const BINDING_URI: &str = "https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1";
pub const BINDING_VERSION: &str = "1.0.0";
pub const EXTENSION_URI: &str = "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1";
pub const SUBPROTOCOL_JSON: &str = "pty-ws.v1";
pub const SUBPROTOCOL_BINARY: &str = "pty-ws.v1.binary";
/// Prefix of the subprotocol entry that carries a bearer token for browsers.
pub const BEARER_SUBPROTOCOL_PREFIX: &str = "bearer.";
pub const SNAPSHOT_FORMAT: &str = "vt100-screen-state-v1";
pub const OP_SESSION_FRAME: &str = "pty.session_frame";
/// The request that joins a session (`pty-extensions/v1`).
pub const OP_JOIN: &str = "pty.join_session";
/// Flow control (an extension of ours): a client that acknowledges the output it has
/// rendered (`ptyhost.ack {sequence}`) is sent at most `FLOW_WINDOW_BYTES` of output beyond
/// its acknowledgement; past that its output is skipped, and once it has caught up it gets
/// a keyframe.
pub const FLOW_CONTROL_URI: &str = "urn:ptyhost:pty-ws:flow-control:v1";
pub const OP_ACK: &str = "ptyhost.ack";
pub const FLOW_WINDOW_BYTES: usize = 256 * 1024;
/// The smallest window a client may ask for.
pub const MIN_WINDOW_BYTES: usize = 4 * 1024;
/// A client past its window gets its keyframe once no more than this is unacknowledged.
pub const FLOW_RESUME_BYTES: usize = 64 * 1024;

/// One frame on the socket. Client frames never carry `sequence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub op: String,
    pub id: String,
    pub ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_parameters: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
    #[serde(default)]
    pub payload: Value,
}

impl Envelope {
    /// An envelope of `op` with the sender's `id` and `ts`, and no optional member; a
    /// sender sets `sequence`, `replay_from` and the rest where its frame has them.
    pub fn new(op: impl Into<String>, id: String, ts: String, payload: Value) -> Envelope {
        Envelope {
            op: op.into(),
            id,
            ts,
            sequence: None,
            replay_from: None,
            service_parameters: None,
            extensions: None,
            payload,
        }
    }

    /// The JSON text of the envelope.
    pub fn to_text(&self) -> String {
        // Strings, numbers, maps and JSON values: nothing here fails to serialize.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The JSON value of a protocol type. Its members are strings, numbers, string-keyed maps
/// and JSON values, so this does not fail; were it to, the value would be `null`.
pub fn to_json(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// Raw bytes that travel as standard base64 (RFC 4648 §4) inside JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Base64Bytes(pub Vec<u8>);

impl Serialize for Base64Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Base64Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        STANDARD
            .decode(text.as_bytes())
            .map(Base64Bytes)
            .map_err(|e| serde::de::Error::custom(format!("invalid base64: {e}")))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Controller,
    Observer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::Observer => "observer",
        }
    }
}

/// A terminal dimension: 1..=1024 per the extension schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dim(pub u16);

impl<'de> Deserialize<'de> for Dim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u64::deserialize(d)?;
        if (1..=1024).contains(&v) {
            Ok(Dim(v as u16))
        } else {
            Err(serde::de::Error::custom(format!("{v} is outside 1..=1024")))
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalSize {
    pub cols: Dim,
    pub rows: Dim,
}

/// `pty.join_session`, with the binding's session-host selection (§5.1.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinSession {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<Dim>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<Dim>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "backend")]
    pub session_backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "working_dir")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_size: Option<TerminalSize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionInput {
    pub data: Base64Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionResize {
    pub cols: Dim,
    pub rows: Dim,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestRole {
    pub role: Role,
}

/// Payload of verbs that take none (`pty.leave_session`, `pty.request_keyframe`, `pty.release_role`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ping {
    pub client_ts: String,
}

/// `ptyhost.ack`: every output frame up to `sequence` is rendered. `window_bytes` asks for
/// a smaller window than `FLOW_WINDOW_BYTES` (from `MIN_WINDOW_BYTES` on): a view that only
/// glances at the screen, such as a tile of the wall, is then sent that much of a flood
/// and a keyframe per acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    pub sequence: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_bytes: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pong {
    pub client_ts: String,
    pub server_ts: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateServiceParameters {
    pub service_parameters: Map<String, Value>,
}

/// `task_id` (and `history_length`) of GetTask, CancelTask, SubscribeToTask, Unsubscribe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRef {
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u32>,
}

/// ListTasks on this binding; `filter` takes ListTasksRequest fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListTasksPayload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<crate::a2a::ListTasksRequest>,
}

/// The A2A core operations (binding §4).
#[derive(Debug, Clone, PartialEq)]
pub enum TaskOp {
    SendMessage(Box<crate::a2a::SendMessageRequest>),
    SendStreamingMessage(Box<crate::a2a::SendMessageRequest>),
    GetTask(TaskRef),
    ListTasks(ListTasksPayload),
    CancelTask(TaskRef),
    SubscribeToTask(TaskRef),
    Unsubscribe(TaskRef),
}

/// What a client asks for, decoded from an envelope's `op` and `payload`.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientOp {
    Task(TaskOp),
    Join(JoinSession),
    Leave,
    Input(Vec<u8>),
    Resize(SessionResize),
    RequestRole(Role),
    ReleaseRole,
    RequestKeyframe,
    Ping(Ping),
    UpdateServiceParameters(UpdateServiceParameters),
    Ack(Ack),
}

/// Why a client frame was refused before it reached a session.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    /// Not a JSON object of the envelope's shape, or a payload of the wrong shape.
    Invalid(String),
    /// An `op` this server does not implement.
    Unsupported(String),
}

/// The A2A core operations; named so that an honest `UNSUPPORTED_OPERATION` can say which.
pub const CORE_OPERATIONS: [&str; 6] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
];

/// A decoded client frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub envelope: Envelope,
    pub op: ClientOp,
    /// A `session_id` the payload named, which must be the connection's own.
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputStream {
    Stdout,
    Stderr,
    Log,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRef {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    Normal,
    Killed,
    Timeout,
    InstanceTerminated,
    Error,
    /// The node the session ran on stopped answering; another node closed it.
    NodeLost,
    /// The session reached its sandbox's memory cap.
    MemoryLimit,
}

impl CloseReason {
    /// Its name on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Normal => "normal",
            CloseReason::Killed => "killed",
            CloseReason::Timeout => "timeout",
            CloseReason::InstanceTerminated => "instance_terminated",
            CloseReason::Error => "error",
            CloseReason::NodeLost => "node_lost",
            CloseReason::MemoryLimit => "memory_limit",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PtyErrorCode {
    PtyWriteFailed,
    PtyResizeFailed,
    PtyOutputLagged,
    KeyframeUnavailable,
    /// Input to a paused session is refused until it resumes.
    SessionPaused,
}

/// The payload of a `pty.session_frame`, discriminated by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum SessionFrame {
    Output {
        stream: OutputStream,
        data: Base64Bytes,
    },
    Resize {
        cols: u16,
        rows: u16,
    },
    RoleAssigned {
        role: Role,
        client_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        downgraded: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    MembershipChanged {
        controllers: Vec<ClientRef>,
        observers: Vec<ClientRef>,
    },
    Keyframe {
        snapshot: Base64Bytes,
        snapshot_format: String,
        snapshot_cols: u16,
        snapshot_rows: u16,
        anchor_sequence: u64,
    },
    Closed {
        exit_code: Option<i32>,
        reason: CloseReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    Error {
        code: PtyErrorCode,
        message: String,
    },
    /// The session ends at `at` (RFC 3339) unless something happens first: input or output
    /// for an idle timeout; nothing for a ttl.
    Warning {
        code: WarningCode,
        message: String,
        at: String,
    },
    /// The session's processes were frozen (`method`: `cgroup_freezer` or `sigstop`), by a
    /// caller or for being idle (`idle`).
    Paused {
        method: PauseMethod,
        #[serde(default)]
        idle: bool,
    },
    /// The session's processes run again.
    Resumed {},
    /// A snapshot of the workspace was taken.
    Snapshotted {
        snapshot_id: String,
    },
}

/// Why a session will end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WarningCode {
    /// Nothing happened in it for its idle timeout.
    SessionIdleTimeout,
    /// It reaches its ttl.
    SessionTtl,
}

/// How a paused session's processes are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseMethod {
    /// The session's cgroup is frozen (v1 `freezer.state`, v2 `cgroup.freeze`).
    CgroupFreezer,
    /// Each of its processes got SIGSTOP (no cgroup to freeze).
    Sigstop,
}

impl SessionFrame {
    pub fn kind(&self) -> &'static str {
        match self {
            SessionFrame::Output { .. } => "Output",
            SessionFrame::Resize { .. } => "Resize",
            SessionFrame::RoleAssigned { .. } => "RoleAssigned",
            SessionFrame::MembershipChanged { .. } => "MembershipChanged",
            SessionFrame::Keyframe { .. } => "Keyframe",
            SessionFrame::Closed { .. } => "Closed",
            SessionFrame::Error { .. } => "Error",
            SessionFrame::Warning { .. } => "Warning",
            SessionFrame::Paused { .. } => "Paused",
            SessionFrame::Resumed {} => "Resumed",
            SessionFrame::Snapshotted { .. } => "Snapshotted",
        }
    }
}

/// Binding-level error codes (§6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    TaskNotFound,
    TaskNotCancelable,
    InvalidRequest,
    UnsupportedOperation,
    Unauthenticated,
    PermissionDenied,
    RateLimited,
    Internal,
    ReplayOutOfRange,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::TaskNotFound => "TASK_NOT_FOUND",
            ErrorCode::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::ReplayOutOfRange => "REPLAY_OUT_OF_RANGE",
        }
    }

    /// HTTP status and google.rpc code name of the canonical A2A error.
    fn status(self) -> (u16, &'static str) {
        match self {
            ErrorCode::TaskNotFound => (404, "NOT_FOUND"),
            ErrorCode::TaskNotCancelable | ErrorCode::UnsupportedOperation => {
                (400, "FAILED_PRECONDITION")
            }
            ErrorCode::InvalidRequest => (400, "INVALID_ARGUMENT"),
            ErrorCode::Unauthenticated => (401, "UNAUTHENTICATED"),
            ErrorCode::PermissionDenied => (403, "PERMISSION_DENIED"),
            ErrorCode::RateLimited => (429, "RESOURCE_EXHAUSTED"),
            ErrorCode::Internal => (500, "INTERNAL"),
            ErrorCode::ReplayOutOfRange => (400, "OUT_OF_RANGE"),
        }
    }

    pub fn retryable(self) -> bool {
        matches!(self, ErrorCode::RateLimited | ErrorCode::Internal)
    }
}

#[cfg(test)]
mod tests;
