//! `lf.a2a.v1` messages (prost's types, generated at build time from `proto/a2a.proto`)
//! to and from the task model (`wire::a2a`), with no JSON between: what the hot methods
//! take and answer. Tests pin each conversion to the ProtoJSON mapping the other bindings
//! use, so the two cannot drift.

use prost_types::value::Kind;
use serde_json::{Map, Number, Value};
use wire::a2a::{
    Artifact, AuthenticationInfo, Content, Message, Part, Role, SendMessageConfiguration,
    SendMessageRequest, StreamResponse, Task, TaskArtifactUpdateEvent, TaskIdRequest,
    TaskPushNotificationConfig, TaskStatus, TaskStatusUpdateEvent,
};
use wire::server::Sent;

use crate::a2a::A2aError;

/// The generated messages of package `lf.a2a.v1` (clients such as `a2a_bench` use them
/// too). The push-config, list and card methods still go through ProtoJSON
/// (`through_json`), so ptyhost does not use their messages yet.
#[allow(clippy::all, clippy::pedantic, dead_code)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
}

fn invalid(what: &str) -> A2aError {
    A2aError::InvalidParams(what.to_owned())
}

fn some(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn count(n: Option<i32>, what: &str) -> Result<Option<u32>, A2aError> {
    n.map(|n| u32::try_from(n).map_err(|_| invalid(&format!("{what} must not be negative"))))
        .transpose()
}

// Requests: protobuf in, the model out.

pub fn send_request(r: pb::SendMessageRequest) -> Result<SendMessageRequest, A2aError> {
    let message = r.message.ok_or_else(|| invalid("message is required"))?;
    Ok(SendMessageRequest {
        tenant: some(r.tenant),
        message: message_in(message)?,
        configuration: r.configuration.map(configuration_in).transpose()?,
        metadata: r.metadata.map(struct_in),
    })
}

pub fn get_request(r: pb::GetTaskRequest) -> Result<TaskIdRequest, A2aError> {
    Ok(TaskIdRequest {
        tenant: some(r.tenant),
        id: r.id,
        history_length: count(r.history_length, "historyLength")?,
    })
}

fn configuration_in(c: pb::SendMessageConfiguration) -> Result<SendMessageConfiguration, A2aError> {
    Ok(SendMessageConfiguration {
        accepted_output_modes: c.accepted_output_modes,
        history_length: count(c.history_length, "historyLength")?,
        return_immediately: c.return_immediately,
        task_push_notification_config: c.task_push_notification_config.map(push_config_in),
    })
}

fn push_config_in(c: pb::TaskPushNotificationConfig) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        tenant: some(c.tenant),
        id: c.id,
        task_id: c.task_id,
        url: c.url,
        token: some(c.token),
        authentication: c.authentication.map(|a| AuthenticationInfo {
            scheme: a.scheme,
            credentials: some(a.credentials),
        }),
    }
}

fn message_in(m: pb::Message) -> Result<Message, A2aError> {
    let role = match pb::Role::try_from(m.role) {
        Ok(pb::Role::User) => Role::User,
        Ok(pb::Role::Agent) => Role::Agent,
        _ => return Err(invalid("message.role must be ROLE_USER or ROLE_AGENT")),
    };
    Ok(Message {
        message_id: m.message_id,
        context_id: some(m.context_id),
        task_id: some(m.task_id),
        role,
        parts: m.parts.into_iter().map(part_in).collect::<Result<_, _>>()?,
        metadata: m.metadata.map(struct_in),
        extensions: m.extensions,
        reference_task_ids: m.reference_task_ids,
    })
}

fn part_in(p: pb::Part) -> Result<Part, A2aError> {
    use pb::part::Content as C;
    let content = match p.content {
        Some(C::Text(t)) => Content::Text(t),
        Some(C::Raw(r)) => Content::Raw(r),
        Some(C::Url(u)) => Content::Url(u),
        Some(C::Data(d)) => Content::Data(value_in(d)),
        None => return Err(invalid("a part needs one of text, raw, url or data")),
    };
    Ok(Part {
        content,
        media_type: some(p.media_type),
        filename: some(p.filename),
        metadata: p.metadata.map(struct_in),
    })
}

fn struct_in(s: prost_types::Struct) -> Map<String, Value> {
    s.fields
        .into_iter()
        .map(|(k, v)| (k, value_in(v)))
        .collect()
}

/// A protobuf Value as JSON: numbers are doubles, as the ProtoJSON mapping reads them.
fn value_in(v: prost_types::Value) -> Value {
    match v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => Number::from_f64(n).map_or(Value::Null, Value::Number),
        Some(Kind::StringValue(s)) => Value::String(s),
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        Some(Kind::StructValue(s)) => Value::Object(struct_in(s)),
        Some(Kind::ListValue(l)) => Value::Array(l.values.into_iter().map(value_in).collect()),
    }
}

// Answers: the model in, protobuf out.

pub fn sent(s: Sent) -> pb::SendMessageResponse {
    use pb::send_message_response::Payload;
    pb::SendMessageResponse {
        payload: Some(match s {
            Sent::Task(t) => Payload::Task(task(t)),
            Sent::Message(m) => Payload::Message(message(m)),
        }),
    }
}

pub fn event(e: StreamResponse) -> pb::StreamResponse {
    use pb::stream_response::Payload;
    pb::StreamResponse {
        payload: Some(match e {
            StreamResponse::Task(t) => Payload::Task(task(t)),
            StreamResponse::Message(m) => Payload::Message(message(m)),
            StreamResponse::StatusUpdate(u) => Payload::StatusUpdate(status_update(u)),
            StreamResponse::ArtifactUpdate(u) => Payload::ArtifactUpdate(artifact_update(u)),
        }),
    }
}

pub fn task(t: Task) -> pb::Task {
    pb::Task {
        id: t.id,
        context_id: t.context_id,
        status: Some(status(t.status)),
        artifacts: t
            .artifacts
            .unwrap_or_default()
            .into_iter()
            .map(artifact)
            .collect(),
        history: t.history.into_iter().map(message).collect(),
        metadata: t.metadata.map(struct_out),
    }
}

fn status(s: TaskStatus) -> pb::TaskStatus {
    pb::TaskStatus {
        state: pb::TaskState::from_str_name(s.state.name()).map_or(0, |s| s as i32),
        message: s.message.map(message),
        timestamp: s.timestamp.as_deref().and_then(timestamp),
    }
}

fn status_update(u: TaskStatusUpdateEvent) -> pb::TaskStatusUpdateEvent {
    pb::TaskStatusUpdateEvent {
        task_id: u.task_id,
        context_id: u.context_id,
        status: Some(status(u.status)),
        metadata: u.metadata.map(struct_out),
    }
}

fn artifact_update(u: TaskArtifactUpdateEvent) -> pb::TaskArtifactUpdateEvent {
    pb::TaskArtifactUpdateEvent {
        task_id: u.task_id,
        context_id: u.context_id,
        artifact: Some(artifact(u.artifact)),
        append: u.append,
        last_chunk: u.last_chunk,
        metadata: u.metadata.map(struct_out),
    }
}

fn artifact(a: Artifact) -> pb::Artifact {
    pb::Artifact {
        artifact_id: a.artifact_id,
        name: a.name.unwrap_or_default(),
        description: a.description.unwrap_or_default(),
        parts: a.parts.into_iter().map(part).collect(),
        metadata: a.metadata.map(struct_out),
        extensions: Vec::new(),
    }
}

fn message(m: Message) -> pb::Message {
    pb::Message {
        message_id: m.message_id,
        context_id: m.context_id.unwrap_or_default(),
        task_id: m.task_id.unwrap_or_default(),
        role: match m.role {
            Role::User => pb::Role::User,
            Role::Agent => pb::Role::Agent,
        } as i32,
        parts: m.parts.into_iter().map(part).collect(),
        metadata: m.metadata.map(struct_out),
        extensions: m.extensions,
        reference_task_ids: m.reference_task_ids,
    }
}

fn part(p: Part) -> pb::Part {
    use pb::part::Content as C;
    pb::Part {
        content: Some(match p.content {
            Content::Text(t) => C::Text(t),
            Content::Raw(r) => C::Raw(r),
            Content::Url(u) => C::Url(u),
            Content::Data(d) => C::Data(value_out(d)),
        }),
        metadata: p.metadata.map(struct_out),
        filename: p.filename.unwrap_or_default(),
        media_type: p.media_type.unwrap_or_default(),
    }
}

fn struct_out(m: Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: m.into_iter().map(|(k, v)| (k, value_out(v))).collect(),
    }
}

fn value_out(v: Value) -> prost_types::Value {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.into_iter().map(value_out).collect(),
        }),
        Value::Object(o) => Kind::StructValue(struct_out(o)),
    };
    prost_types::Value { kind: Some(kind) }
}

/// An RFC 3339 time as a protobuf Timestamp.
fn timestamp(s: &str) -> Option<prost_types::Timestamp> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: t.nanosecond() as i32,
    })
}

#[cfg(test)]
mod tests;
