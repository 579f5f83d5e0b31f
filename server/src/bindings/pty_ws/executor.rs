//! The agentic-sandbox executor's dialect of pty-ws/v1 (DESIGN.md, "The agentic-sandbox
//! executor's pty-ws shape"): frames are `{op, seq, ts, payload}` with no `id`, session
//! frames are top-level snake_case ops, errors carry dotted codes and an HTTP status, and
//! A2A operations use the 0.3 names and shapes.
//!
//! The connection runs one loop over one typed set of operations whatever the dialect: this
//! module decodes an executor frame into the same `wire::Decoded` the spec's frames decode
//! to, and encodes each frame the connection would send in the spec's shape into this one.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wire::a2a::{ListTasksRequest, StreamResponse, TaskState};
use wire::{
    ClientOp, CloseReason, DecodeError, Decoded, Envelope, ErrorCode, ListTasksPayload,
    PtyErrorCode, Role, SessionFrame, TaskOp, TaskRef,
};

use crate::a2a::v03;
use wire::server::{BindingHello, ErrorPayload, Sent, ServerFrame, ServerOp};

/// How a connection's frames are shaped; fixed by its first client frame (or by a
/// `replay_from` in its URL, which only the executor's clients send).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `pty-ws/v1` as the binding spec writes it.
    Spec,
    /// The agentic-sandbox executor's shape.
    Executor,
}

impl Dialect {
    /// The dialect a first client frame speaks: the executor's when it has no `id`.
    pub fn of_first_frame(text: &str) -> Dialect {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(o)) if !o.contains_key("id") => Dialect::Executor,
            _ => Dialect::Spec,
        }
    }
}

/// The operations the executor's clients may send, as its `binding_hello` lists them.
pub const OPERATIONS: [&str; 14] = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/subscribe",
    "tasks/resubscribe",
    "pty.join_session",
    "pty.session_input",
    "pty.session_resize",
    "pty.request_keyframe",
    "pty.request_role",
    "pty.release_role",
    "pty.leave_session",
];

/// A client frame: `{op, ts, payload}`. Like the executor, other members (a `seq`) are
/// ignored.
#[derive(Deserialize)]
struct ClientFrame {
    op: String,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    payload: Value,
}

/// Decodes an executor client frame into the operation a spec frame would name. A join
/// without a role asks for the one the token allows (`default_role`), as the executor does.
pub fn decode(text: &str, default_role: Role) -> Result<Decoded, (Option<String>, DecodeError)> {
    let invalid = |m: String| (None, DecodeError::Invalid(m));
    let frame: ClientFrame =
        serde_json::from_str(text).map_err(|e| invalid(format!("malformed frame: {e}")))?;
    let mut payload = match frame.payload {
        Value::Null => Map::new(),
        Value::Object(o) => o,
        _ => return Err(invalid("payload must be an object".into())),
    };
    let session_id = match payload.remove("session_id") {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(invalid("session_id must be a string".into())),
    };
    let id = uuid::Uuid::now_v7().to_string();
    let ts = frame.ts.unwrap_or_else(crate::clock::now_rfc3339);
    let envelope = Envelope::new(frame.op.clone(), id, ts, Value::Object(payload.clone()));
    let op = match frame.op.as_str() {
        "message/send" => ClientOp::Task(TaskOp::SendMessage(Box::new(send(&payload)?))),
        "message/stream" => ClientOp::Task(TaskOp::SendStreamingMessage(Box::new(send(&payload)?))),
        "tasks/get" => ClientOp::Task(TaskOp::GetTask(task_ref(&payload)?)),
        "tasks/cancel" => ClientOp::Task(TaskOp::CancelTask(task_ref(&payload)?)),
        "tasks/subscribe" | "tasks/resubscribe" => {
            ClientOp::Task(TaskOp::SubscribeToTask(task_ref(&payload)?))
        }
        "tasks/list" => ClientOp::Task(TaskOp::ListTasks(list(&payload)?)),
        verb if verb.starts_with("pty.") || verb == "ping" || verb == wire::OP_ACK => {
            if verb == "pty.join_session" && !payload.contains_key("role") {
                payload.insert("role".into(), Value::from(default_role.as_str()));
            }
            // The executor's input may carry the terminal's size; ptyhost resizes only on
            // `pty.session_resize`.
            if verb == "pty.session_input" {
                payload.remove("terminal_size");
            }
            let spec = Envelope::new(
                verb,
                envelope.id.clone(),
                envelope.ts.clone(),
                payload.into(),
            );
            let decoded = ClientOp::decode(&spec.to_text()).map_err(|(_, e)| (None, e))?;
            decoded.op
        }
        other => return Err((None, DecodeError::Unsupported(other.to_owned()))),
    };
    Ok(Decoded {
        envelope,
        op,
        session_id,
    })
}

fn send(
    payload: &Map<String, Value>,
) -> Result<wire::a2a::SendMessageRequest, (Option<String>, DecodeError)> {
    v03::send_params(&Value::Object(payload.clone()))
        .map_err(|e| (None, DecodeError::Invalid(e.to_string())))
}

/// `{task_id}` (or 0.3's `{id}`), with `history_length` / `historyLength`.
fn task_ref(payload: &Map<String, Value>) -> Result<TaskRef, (Option<String>, DecodeError)> {
    let task_id = ["task_id", "id", "taskId"]
        .iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_str))
        .ok_or_else(|| {
            (
                None,
                DecodeError::Invalid("payload.task_id required".into()),
            )
        })?;
    let history_length = ["history_length", "historyLength"]
        .iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_u64))
        .map(|n| n.min(u32::MAX as u64) as u32);
    Ok(TaskRef {
        task_id: task_id.to_owned(),
        history_length,
    })
}

/// `{limit?, state?, page_token?}`: a state by its 0.3 name (`input-required`).
fn list(payload: &Map<String, Value>) -> Result<ListTasksPayload, (Option<String>, DecodeError)> {
    let status = match payload.get("state").and_then(Value::as_str) {
        None => None,
        Some(name) => {
            let proto = format!("TASK_STATE_{}", name.to_ascii_uppercase().replace('-', "_"));
            let state = TaskState::from_name(&proto).ok_or_else(|| {
                (
                    None,
                    DecodeError::Invalid(format!("Unknown task state: {name}")),
                )
            })?;
            Some(state)
        }
    };
    let page_size = payload
        .get("limit")
        .and_then(Value::as_u64)
        .map(|n| n.clamp(1, 100) as u32);
    let page_token = ["page_token", "cursor"]
        .iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_str))
        .map(str::to_owned);
    Ok(ListTasksPayload {
        page_size,
        page_token,
        filter: Some(ListTasksRequest {
            status,
            ..Default::default()
        }),
    })
}

/// A spec frame as the executor would send it; `None` for frames the executor's shape has
/// no counterpart of (acknowledgements of streams, the goodbye, which is the close itself).
/// The spec's frame is read back into its type and written out again in this shape: a
/// second encoder of the same `ServerOp`.
pub fn encode(spec: &str) -> Option<String> {
    let ServerFrame {
        sequence: seq,
        ts,
        op,
        ..
    } = ServerFrame::decode(spec).ok()?;
    let (name, payload) = match op {
        ServerOp::Session(session) => return Some(session_frame(seq, &ts, session)),
        ServerOp::Error(e) => ("error", to_value(ExecutorError::of(&e))),
        ServerOp::Hello(hello) => ("binding_hello", to_value(executor_hello(*hello))),
        ServerOp::Goodbye(_) | ServerOp::StreamAccepted(_) | ServerOp::SubscribeAccepted(_) => {
            return None;
        }
        ServerOp::SendMessage(sent) => match *sent {
            Sent::Message(m) => ("message", v03::message(&m)),
            Sent::Task(t) => ("task", v03::task(&t)),
        },
        ServerOp::GetTask(a) | ServerOp::CancelTask(a) => ("task", v03::task(&a.task)),
        ServerOp::ListTasks(page) => {
            let list = TaskList {
                tasks: page.tasks.iter().map(v03::task).collect(),
                next_cursor: Some(page.next_page_token).filter(|t| !t.is_empty()),
            };
            ("task_list", to_value(list))
        }
        ServerOp::TaskUpdate(update) => {
            let name = match &update.delta {
                StreamResponse::Task(_) => "task",
                StreamResponse::Message(_) => "message",
                StreamResponse::StatusUpdate(_) => "status_update",
                StreamResponse::ArtifactUpdate(_) => "artifact_update",
            };
            (name, v03::event(&update.delta))
        }
        other @ (ServerOp::Pong(_)
        | ServerOp::Unsubscribed(_)
        | ServerOp::ServiceParametersUpdated(_)) => {
            let name = other.name();
            (name, to_value(other)["payload"].take())
        }
    };
    Some(frame(name, seq, &ts, payload))
}

fn frame(op: &str, seq: Option<u64>, ts: &str, payload: impl Serialize) -> String {
    String::from_utf8(wire::executor_frame(op, seq, ts, payload)).expect("JSON is UTF-8")
}

fn to_value(payload: impl Serialize) -> Value {
    serde_json::to_value(payload).expect("a payload serializes")
}

/// `task_list`: the tasks in 0.3 JSON and the cursor of the next page.
#[derive(Serialize)]
struct TaskList {
    tasks: Vec<Value>,
    next_cursor: Option<String>,
}

/// The executor's `error`: its dotted code, the message and the HTTP status; what the
/// spec's payload adds (`oldest` of a replay, `retry_after_ms`) stays.
#[derive(Serialize)]
struct ExecutorError<'a> {
    code: &'static str,
    message: &'a str,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    oldest: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
}

impl ExecutorError<'_> {
    fn of(e: &ErrorPayload) -> ExecutorError<'_> {
        let (code, status) = binding_error(e.code);
        ExecutorError {
            code,
            message: &e.message,
            status,
            oldest: e.oldest,
            retry_after_ms: e.retry_after_ms,
        }
    }
}

/// The spec's hello with the executor's additions: `pty-extensions/v1` is active on every
/// executor connection, and the operations are the executor's names.
fn executor_hello(mut hello: BindingHello) -> BindingHello {
    hello.activated_extensions = vec![wire::EXTENSION_URI.into()];
    hello.supported_operations = OPERATIONS.iter().map(|o| o.to_string()).collect();
    hello
}

/// A session frame as a top-level op; output as the session itself encodes it for the
/// executor's clients (`wire::executor_output`).
fn session_frame(seq: Option<u64>, ts: &str, session: SessionFrame) -> String {
    match session {
        SessionFrame::Output { data, .. } => {
            let output = wire::executor_output(seq.unwrap_or(0), ts, &data.0);
            String::from_utf8(output).expect("JSON is UTF-8")
        }
        SessionFrame::Resize { cols, rows } => frame("resize", seq, ts, Size { cols, rows }),
        SessionFrame::RoleAssigned {
            role,
            client_id,
            downgraded,
            reason,
        } => {
            let downgraded = downgraded == Some(true);
            let assigned = RoleAssigned {
                client_id,
                role,
                downgraded: downgraded.then_some(true),
                reason: downgraded.then_some(reason),
            };
            frame("role_assigned", seq, ts, assigned)
        }
        SessionFrame::MembershipChanged {
            controllers,
            observers,
        } => {
            let member = |role: Role| {
                move |c: wire::ClientRef| Member {
                    client_id: c.client_id,
                    role,
                    label: c.label,
                }
            };
            let members = (controllers.into_iter().map(member(Role::Controller)))
                .chain(observers.into_iter().map(member(Role::Observer)))
                .collect();
            frame("membership_changed", seq, ts, Members { members })
        }
        SessionFrame::Keyframe {
            snapshot,
            snapshot_cols,
            snapshot_rows,
            anchor_sequence,
            ..
        } => {
            let keyframe = Keyframe {
                cursor: anchor_sequence,
                frames: (
                    Nested {
                        op: "resize",
                        payload: Size {
                            cols: snapshot_cols,
                            rows: snapshot_rows,
                        },
                    },
                    Nested {
                        op: "output",
                        payload: Data { data: snapshot },
                    },
                ),
            };
            frame("keyframe", seq, ts, keyframe)
        }
        SessionFrame::Closed {
            exit_code, reason, ..
        } => frame("closed", seq, ts, Closed { reason, exit_code }),
        SessionFrame::Error { code, message } => {
            let (code, status) = pty_error(code);
            let error = ExecutorError {
                code,
                message: &message,
                status,
                oldest: None,
                retry_after_ms: None,
            };
            frame("error", seq, ts, error)
        }
        SessionFrame::Warning { code, message, at } => frame(
            "warning",
            seq,
            ts,
            serde_json::json!({ "code": code, "message": message, "at": at }),
        ),
        SessionFrame::Paused { method, idle } => frame(
            "paused",
            seq,
            ts,
            serde_json::json!({ "method": method, "idle": idle }),
        ),
        SessionFrame::Resumed {} => frame("resumed", seq, ts, serde_json::json!({})),
        SessionFrame::Snapshotted { snapshot_id } => frame(
            "snapshotted",
            seq,
            ts,
            serde_json::json!({ "snapshot_id": snapshot_id }),
        ),
    }
}

#[derive(Serialize)]
struct Size {
    cols: u16,
    rows: u16,
}

/// `role_assigned`; a downgrade says so, with its reason.
#[derive(Serialize)]
struct RoleAssigned {
    client_id: String,
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    downgraded: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Option<String>>,
}

#[derive(Serialize)]
struct Member {
    client_id: String,
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

#[derive(Serialize)]
struct Members {
    members: Vec<Member>,
}

/// `keyframe`: the cursor it stands at, and a resize and the output that repaint a reset
/// terminal.
#[derive(Serialize)]
struct Keyframe {
    cursor: u64,
    frames: (Nested<Size>, Nested<Data>),
}

#[derive(Serialize)]
struct Nested<P> {
    op: &'static str,
    payload: P,
}

#[derive(Serialize)]
struct Data {
    data: wire::Base64Bytes,
}

#[derive(Serialize)]
struct Closed {
    reason: CloseReason,
    exit_code: Option<i32>,
}

/// The executor's dotted code and HTTP status for a binding error.
pub fn binding_error(code: ErrorCode) -> (&'static str, u16) {
    match code {
        ErrorCode::TaskNotFound => ("task.not_found", 404),
        ErrorCode::TaskNotCancelable => ("task.not_cancelable", 409),
        ErrorCode::InvalidRequest => ("request.invalid_params", 400),
        ErrorCode::UnsupportedOperation => ("request.unsupported_operation", 400),
        ErrorCode::Unauthenticated => ("auth.unauthenticated", 401),
        ErrorCode::PermissionDenied => ("pty.permission_denied", 403),
        ErrorCode::RateLimited => ("request.rate_limited", 429),
        ErrorCode::Internal => ("internal.error", 500),
        ErrorCode::ReplayOutOfRange => ("replay.out_of_range", 416),
    }
}

fn pty_error(code: PtyErrorCode) -> (&'static str, u16) {
    match code {
        PtyErrorCode::PtyOutputLagged => ("broadcast.lagged", 200),
        PtyErrorCode::PtyWriteFailed => ("pty.write_failed", 500),
        PtyErrorCode::PtyResizeFailed => ("pty.resize_failed", 500),
        PtyErrorCode::KeyframeUnavailable => ("keyframe.unavailable", 503),
        PtyErrorCode::SessionPaused => ("session.paused", 409),
    }
}

/// An error that only the executor's shape names: `session.closed` (409) for a join of a
/// session that has ended.
pub fn session_closed(message: &str) -> String {
    let error = ExecutorError {
        code: "session.closed",
        message,
        status: 409,
        oldest: None,
        retry_after_ms: None,
    };
    frame("error", None, &crate::clock::now_rfc3339(), error)
}

#[cfg(test)]
mod tests;
