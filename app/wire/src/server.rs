//! What the server sends on pty-ws, typed: the op and payload of every frame (`ServerOp`),
//! and the envelope around it (`ServerFrame`). Encoding goes through one function,
//! `encode_envelope`, which the session's hot path calls with a borrowed payload, so output
//! is never copied into an owned frame first. The agentic-sandbox executor's shape is a
//! second encoder of these same types, in the server.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::a2a::{Message, StreamResponse, Task};
use crate::rpc::{ErrorInfo, RpcStatus};
use crate::{ErrorCode, Pong, SessionFrame};

/// The payload of a binding `Error` frame (§6): the binding code, the canonical A2A error,
/// whether a retry may succeed, and the members some codes add.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorPayload {
    pub code: ErrorCode,
    pub message: String,
    pub a2a_error: RpcStatus,
    pub retryable: bool,
    /// `RATE_LIMITED`: when to try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// `REPLAY_OUT_OF_RANGE`: the oldest sequence still held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest: Option<u64>,
}

impl ErrorPayload {
    /// The error of `code`, with the canonical A2A error its code maps to.
    pub fn new(code: ErrorCode, message: &str) -> ErrorPayload {
        let (http, status) = code.status();
        ErrorPayload {
            code,
            message: message.to_owned(),
            a2a_error: RpcStatus {
                code: http,
                status: status.to_owned(),
                message: message.to_owned(),
                details: vec![ErrorInfo::a2a(code.as_str())],
                data: None,
            },
            retryable: code.retryable(),
            retry_after_ms: None,
            oldest: None,
        }
    }
}

/// `binding_goodbye`: why the server closes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goodbye {
    pub reason: String,
}

/// `binding_hello` (§5.1): what this binding and session offer, first on every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BindingHello {
    pub binding_uri: String,
    pub binding_version: String,
    pub supported_operations: Vec<String>,
    pub activated_extensions: Vec<String>,
    pub session: HelloSession,
    pub session_host: SessionHost,
    pub flow_control: FlowControl,
    pub payload_mode: PayloadMode,
    pub server_info: ServerInfo,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloSession {
    pub session_id: String,
    pub current_sequence: u64,
}

/// The session hosts this server offers (§5.1.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHost {
    pub supported_backends: Vec<String>,
    pub default_backend: String,
    pub supported_classes: Vec<String>,
    pub default_class: String,
    pub observe_supported: bool,
    pub drive_supported: bool,
    pub reattach_supported: bool,
}

/// The flow-control extension's terms (`ptyhost.ack`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowControl {
    pub extension: String,
    pub ack_op: String,
    pub window_bytes: u64,
    pub min_window_bytes: u64,
    pub resume_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadMode {
    pub binary: bool,
    pub binary_subprotocol: String,
    pub json_subprotocol: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

/// What SendMessage answers: the task, or (in some conformance scenarios) a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Sent {
    Task(Task),
    Message(Message),
}

/// GetTask and CancelTask answer with the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskAnswer {
    pub task: Task,
}

/// ListTasks on this binding: the session's tasks, newest first, and the next page's token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
}

/// `SendStreamingMessage.Accepted`: the task its updates are about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamAccepted {
    pub task_id: String,
}

/// `SubscribeToTask.Accepted`: the session's sequence when the subscription began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscribeAccepted {
    pub current_sequence: u64,
}

/// `TaskStatusUpdate`: the task as it now stands, the event that made it so, and its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskUpdate {
    pub task: Task,
    pub delta: StreamResponse,
    pub task_id: String,
}

/// Empty answers (`Unsubscribe.Response`, `UpdateServiceParameters.Response`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Done {}

/// Every frame the server sends in the spec's JSON shape, by `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "payload")]
pub enum ServerOp {
    #[serde(rename = "binding_hello")]
    Hello(Box<BindingHello>),
    #[serde(rename = "binding_goodbye")]
    Goodbye(Goodbye),
    #[serde(rename = "Error")]
    Error(Box<ErrorPayload>),
    #[serde(rename = "pty.session_frame")]
    Session(SessionFrame),
    #[serde(rename = "pong")]
    Pong(Pong),
    #[serde(rename = "SendMessage.Response")]
    SendMessage(Box<Sent>),
    #[serde(rename = "GetTask.Response")]
    GetTask(Box<TaskAnswer>),
    #[serde(rename = "CancelTask.Response")]
    CancelTask(Box<TaskAnswer>),
    #[serde(rename = "ListTasks.Response")]
    ListTasks(TaskPage),
    #[serde(rename = "SendStreamingMessage.Accepted")]
    StreamAccepted(StreamAccepted),
    #[serde(rename = "SubscribeToTask.Accepted")]
    SubscribeAccepted(SubscribeAccepted),
    #[serde(rename = "TaskStatusUpdate")]
    TaskUpdate(Box<TaskUpdate>),
    #[serde(rename = "Unsubscribe.Response")]
    Unsubscribed(Done),
    #[serde(rename = "UpdateServiceParameters.Response")]
    ServiceParametersUpdated(Done),
}

impl ServerOp {
    /// The frame's `op`.
    pub fn name(&self) -> &'static str {
        match self {
            ServerOp::Hello(_) => "binding_hello",
            ServerOp::Goodbye(_) => "binding_goodbye",
            ServerOp::Error(_) => "Error",
            ServerOp::Session(_) => crate::OP_SESSION_FRAME,
            ServerOp::Pong(_) => "pong",
            ServerOp::SendMessage(_) => "SendMessage.Response",
            ServerOp::GetTask(_) => "GetTask.Response",
            ServerOp::CancelTask(_) => "CancelTask.Response",
            ServerOp::ListTasks(_) => "ListTasks.Response",
            ServerOp::StreamAccepted(_) => "SendStreamingMessage.Accepted",
            ServerOp::SubscribeAccepted(_) => "SubscribeToTask.Accepted",
            ServerOp::TaskUpdate(_) => "TaskStatusUpdate",
            ServerOp::Unsubscribed(_) => "Unsubscribe.Response",
            ServerOp::ServiceParametersUpdated(_) => "UpdateServiceParameters.Response",
        }
    }
}

/// A whole server frame: the envelope's members and its op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerFrame {
    pub id: String,
    pub ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_parameters: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub op: ServerOp,
}

impl ServerFrame {
    /// The frame's JSON text.
    pub fn to_text(&self) -> String {
        // Typed members and JSON values: nothing here fails to serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a server frame; a client uses this for every text frame it receives.
    pub fn decode(text: &str) -> Result<ServerFrame, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The envelope of one frame, around a payload the caller still owns: what the session
/// actor writes once per frame for every JSON viewer and the store.
pub fn encode_envelope<P: Serialize + ?Sized>(
    op: &str,
    id: &str,
    ts: &str,
    sequence: Option<u64>,
    payload: &P,
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a, P: Serialize + ?Sized> {
        op: &'a str,
        id: &'a str,
        ts: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        sequence: Option<u64>,
        payload: &'a P,
    }
    let out = Out {
        op,
        id,
        ts,
        sequence,
        payload,
    };
    serde_json::to_vec(&out).expect("an envelope of a serializable payload serializes")
}
