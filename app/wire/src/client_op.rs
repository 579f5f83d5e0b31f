//! Client operations to and from their frames: `decode` checks an envelope and its verb's
//! payload; `encode` writes what `decode` reads back.

use serde::Serialize;
use serde_json::Value;

use crate::{
    Base64Bytes, ClientOp, DecodeError, Decoded, EXTENSION_URI, Empty, Envelope, OP_ACK, OP_JOIN,
    RequestRole, SessionInput, TaskOp,
};

impl ClientOp {
    /// The frame's `op`.
    pub fn name(&self) -> &'static str {
        match self {
            ClientOp::Task(TaskOp::SendMessage(_)) => "SendMessage",
            ClientOp::Task(TaskOp::SendStreamingMessage(_)) => "SendStreamingMessage",
            ClientOp::Task(TaskOp::GetTask(_)) => "GetTask",
            ClientOp::Task(TaskOp::ListTasks(_)) => "ListTasks",
            ClientOp::Task(TaskOp::CancelTask(_)) => "CancelTask",
            ClientOp::Task(TaskOp::SubscribeToTask(_)) => "SubscribeToTask",
            ClientOp::Task(TaskOp::Unsubscribe(_)) => "Unsubscribe",
            ClientOp::Join(_) => OP_JOIN,
            ClientOp::Leave => "pty.leave_session",
            ClientOp::Input(_) => "pty.session_input",
            ClientOp::Resize(_) => "pty.session_resize",
            ClientOp::RequestRole(_) => "pty.request_role",
            ClientOp::ReleaseRole => "pty.release_role",
            ClientOp::RequestKeyframe => "pty.request_keyframe",
            ClientOp::Ping(_) => "ping",
            ClientOp::UpdateServiceParameters(_) => "UpdateServiceParameters",
            ClientOp::Ack(_) => OP_ACK,
        }
    }

    /// The client frame's JSON text: the envelope (a join activates `pty-extensions/v1`) and
    /// the payload of the verb, which `decode` reads back to this operation.
    pub fn encode(&self, id: &str, ts: &str, replay_from: Option<u64>) -> String {
        #[derive(Serialize)]
        struct Out<'a> {
            op: &'a str,
            id: &'a str,
            ts: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            replay_from: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            extensions: Option<[&'a str; 1]>,
            payload: Value,
        }
        fn value<P: Serialize>(payload: &P) -> Value {
            serde_json::to_value(payload).expect("a client payload serializes")
        }
        let payload = match self {
            ClientOp::Task(TaskOp::SendMessage(r) | TaskOp::SendStreamingMessage(r)) => value(r),
            ClientOp::Task(
                TaskOp::GetTask(r)
                | TaskOp::CancelTask(r)
                | TaskOp::SubscribeToTask(r)
                | TaskOp::Unsubscribe(r),
            ) => value(r),
            ClientOp::Task(TaskOp::ListTasks(p)) => value(p),
            ClientOp::Join(j) => value(j),
            ClientOp::Leave | ClientOp::ReleaseRole | ClientOp::RequestKeyframe => value(&Empty {}),
            ClientOp::Input(data) => value(&SessionInput {
                data: Base64Bytes(data.clone()),
            }),
            ClientOp::Resize(r) => value(r),
            ClientOp::RequestRole(role) => value(&RequestRole { role: *role }),
            ClientOp::Ping(p) => value(p),
            ClientOp::UpdateServiceParameters(u) => value(u),
            ClientOp::Ack(a) => value(a),
        };
        let out = Out {
            op: self.name(),
            id,
            ts,
            replay_from,
            extensions: matches!(self, ClientOp::Join(_)).then_some([EXTENSION_URI]),
            payload,
        };
        serde_json::to_string(&out).expect("a client frame serializes")
    }

    /// Decodes one client text frame. Validates the envelope (a single object, no unknown
    /// fields, no `sequence`) and the payload of the named verb.
    pub fn decode(text: &str) -> Result<Decoded, (Option<String>, DecodeError)> {
        let env: Envelope = serde_json::from_str(text).map_err(|e| {
            let id = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned));
            (id, DecodeError::Invalid(format!("malformed envelope: {e}")))
        })?;
        let fail = |e: DecodeError| (Some(env.id.clone()), e);
        if env.sequence.is_some() {
            return Err(fail(DecodeError::Invalid(
                "clients must not set sequence".into(),
            )));
        }
        if env.id.is_empty() {
            return Err(fail(DecodeError::Invalid("id must not be empty".into())));
        }
        if env.payload.is_null() {
            return Err(fail(DecodeError::Invalid(
                "payload is required (an object; {} when the op takes nothing)".into(),
            )));
        }
        let mut payload = env.payload.clone();
        let session_id = match payload.as_object_mut().map(|p| p.remove("session_id")) {
            None => {
                return Err(fail(DecodeError::Invalid(
                    "payload must be an object".into(),
                )));
            }
            Some(None) => None,
            Some(Some(Value::String(s))) => Some(s),
            Some(Some(_)) => {
                return Err(fail(DecodeError::Invalid(
                    "session_id must be a string".into(),
                )));
            }
        };
        fn parse<T: serde::de::DeserializeOwned>(op: &str, p: Value) -> Result<T, DecodeError> {
            serde_json::from_value(p).map_err(|e| DecodeError::Invalid(format!("{op}: {e}")))
        }
        let op = match env.op.as_str() {
            "pty.join_session" => ClientOp::Join(parse(&env.op, payload).map_err(fail)?),
            "pty.leave_session" => parse::<Empty>(&env.op, payload)
                .map(|_| ClientOp::Leave)
                .map_err(fail)?,
            "pty.session_input" => ClientOp::Input(
                parse::<SessionInput>(&env.op, payload)
                    .map_err(fail)?
                    .data
                    .0,
            ),
            "pty.session_resize" => ClientOp::Resize(parse(&env.op, payload).map_err(fail)?),
            "pty.request_role" => {
                ClientOp::RequestRole(parse::<RequestRole>(&env.op, payload).map_err(fail)?.role)
            }
            "pty.release_role" => parse::<Empty>(&env.op, payload)
                .map(|_| ClientOp::ReleaseRole)
                .map_err(fail)?,
            "pty.request_keyframe" => parse::<Empty>(&env.op, payload)
                .map(|_| ClientOp::RequestKeyframe)
                .map_err(fail)?,
            "ping" => ClientOp::Ping(parse(&env.op, payload).map_err(fail)?),
            OP_ACK => ClientOp::Ack(parse(&env.op, payload).map_err(fail)?),
            "SendMessage" => {
                ClientOp::Task(TaskOp::SendMessage(parse(&env.op, payload).map_err(fail)?))
            }
            "SendStreamingMessage" => ClientOp::Task(TaskOp::SendStreamingMessage(
                parse(&env.op, payload).map_err(fail)?,
            )),
            "GetTask" => ClientOp::Task(TaskOp::GetTask(parse(&env.op, payload).map_err(fail)?)),
            "ListTasks" => {
                ClientOp::Task(TaskOp::ListTasks(parse(&env.op, payload).map_err(fail)?))
            }
            "CancelTask" => {
                ClientOp::Task(TaskOp::CancelTask(parse(&env.op, payload).map_err(fail)?))
            }
            "SubscribeToTask" => ClientOp::Task(TaskOp::SubscribeToTask(
                parse(&env.op, payload).map_err(fail)?,
            )),
            "Unsubscribe" => {
                ClientOp::Task(TaskOp::Unsubscribe(parse(&env.op, payload).map_err(fail)?))
            }
            "UpdateServiceParameters" => {
                ClientOp::UpdateServiceParameters(parse(&env.op, payload).map_err(fail)?)
            }
            other => return Err(fail(DecodeError::Unsupported(other.to_owned()))),
        };
        Ok(Decoded {
            envelope: env,
            op,
            session_id,
        })
    }
}
