//! The A2A 0.3 JSON shapes at the edge: `kind`-discriminated objects, lowercase roles and
//! kebab-case states, `file` / `data` parts, unwrapped results and `final` on status
//! updates. Converted to and from the one normalized model.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};
use wire::a2a::{
    Artifact, AuthenticationInfo, Content, Message, Part, Role, SendMessageConfiguration,
    SendMessageRequest, StreamResponse, Task, TaskPushNotificationConfig, TaskState, TaskStatus,
};

use super::A2aError;

pub fn state(s: TaskState) -> &'static str {
    match s {
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::Rejected => "rejected",
        TaskState::InputRequired => "input-required",
        TaskState::AuthRequired => "auth-required",
    }
}

fn role(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Agent => "agent",
    }
}

fn part(p: &Part) -> Value {
    let mut v = match &p.content {
        Content::Text(t) => json!({ "kind": "text", "text": t }),
        Content::Data(d) => json!({ "kind": "data", "data": d }),
        Content::Raw(b) => json!({ "kind": "file", "file": { "bytes": STANDARD.encode(b) } }),
        Content::Url(u) => json!({ "kind": "file", "file": { "uri": u } }),
    };
    if let Some(file) = v.get_mut("file") {
        if let Some(m) = &p.media_type {
            file["mimeType"] = json!(m);
        }
        if let Some(n) = &p.filename {
            file["name"] = json!(n);
        }
    }
    if let Some(m) = &p.metadata {
        v["metadata"] = json!(m);
    }
    v
}

pub fn message(m: &Message) -> Value {
    let mut v = json!({
        "kind": "message",
        "messageId": m.message_id,
        "role": role(m.role),
        "parts": m.parts.iter().map(part).collect::<Vec<_>>(),
    });
    for (key, value) in [("contextId", &m.context_id), ("taskId", &m.task_id)] {
        if let Some(x) = value {
            v[key] = json!(x);
        }
    }
    if let Some(meta) = &m.metadata {
        v["metadata"] = json!(meta);
    }
    v
}

fn status(s: &TaskStatus) -> Value {
    let mut v = json!({ "state": state(s.state) });
    if let Some(m) = &s.message {
        v["message"] = message(m);
    }
    if let Some(t) = &s.timestamp {
        v["timestamp"] = json!(t);
    }
    v
}

fn artifact(a: &Artifact) -> Value {
    let mut v = json!({ "artifactId": a.artifact_id, "parts": a.parts.iter().map(part).collect::<Vec<_>>() });
    for (key, value) in [("name", &a.name), ("description", &a.description)] {
        if let Some(x) = value {
            v[key] = json!(x);
        }
    }
    v
}

pub fn task(t: &Task) -> Value {
    let mut v = json!({
        "kind": "task",
        "id": t.id,
        "contextId": t.context_id,
        "status": status(&t.status),
        "history": t.history.iter().map(message).collect::<Vec<_>>(),
    });
    if let Some(a) = &t.artifacts {
        v["artifacts"] = json!(a.iter().map(artifact).collect::<Vec<_>>());
    }
    if let Some(m) = &t.metadata {
        v["metadata"] = json!(m);
    }
    v
}

/// A stream event; status updates say whether they are the last (`final`).
pub fn event(e: &StreamResponse) -> Value {
    match e {
        StreamResponse::Task(t) => task(t),
        StreamResponse::Message(m) => message(m),
        StreamResponse::StatusUpdate(u) => json!({
            "kind": "status-update",
            "taskId": u.task_id,
            "contextId": u.context_id,
            "status": status(&u.status),
            "final": u.status.state.is_terminal() || u.status.state.is_interrupted(),
        }),
        StreamResponse::ArtifactUpdate(u) => json!({
            "kind": "artifact-update",
            "taskId": u.task_id,
            "contextId": u.context_id,
            "artifact": artifact(&u.artifact),
            "append": u.append,
            "lastChunk": u.last_chunk,
        }),
    }
}

fn invalid(m: impl Into<String>) -> A2aError {
    A2aError::InvalidParams(m.into())
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn part_in(v: &Value) -> Result<Part, A2aError> {
    let content = match str_field(v, "kind") {
        Some("text") => Content::Text(
            str_field(v, "text")
                .ok_or_else(|| invalid("a text part needs text"))?
                .to_owned(),
        ),
        Some("data") => Content::Data(
            v.get("data")
                .cloned()
                .ok_or_else(|| invalid("a data part needs data"))?,
        ),
        Some("file") => {
            let file = v
                .get("file")
                .ok_or_else(|| invalid("a file part needs file"))?;
            match (str_field(file, "bytes"), str_field(file, "uri")) {
                (Some(b), None) => Content::Raw(
                    STANDARD
                        .decode(b)
                        .map_err(|e| invalid(format!("file.bytes is not base64: {e}")))?,
                ),
                (None, Some(u)) => Content::Url(u.to_owned()),
                _ => return Err(invalid("a file part needs exactly one of bytes and uri")),
            }
        }
        other => return Err(invalid(format!("unknown part kind {other:?}"))),
    };
    let file = v.get("file");
    Ok(Part {
        content,
        media_type: file
            .and_then(|f| str_field(f, "mimeType"))
            .map(str::to_owned),
        filename: file.and_then(|f| str_field(f, "name")).map(str::to_owned),
        metadata: v.get("metadata").and_then(Value::as_object).cloned(),
    })
}

fn message_in(v: &Value) -> Result<Message, A2aError> {
    let role = match str_field(v, "role") {
        Some("user") => Role::User,
        Some("agent") => Role::Agent,
        other => return Err(invalid(format!("role {other:?} is not user or agent"))),
    };
    let parts = v
        .get("parts")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| invalid("a message needs at least one part"))?
        .iter()
        .map(part_in)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Message {
        message_id: str_field(v, "messageId")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("messageId is required"))?
            .to_owned(),
        context_id: str_field(v, "contextId").map(str::to_owned),
        task_id: str_field(v, "taskId").map(str::to_owned),
        role,
        parts,
        metadata: v.get("metadata").and_then(Value::as_object).cloned(),
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    })
}

/// The normalized request around a 0.3 message: `configuration.blocking` (the inverse of
/// `returnImmediately`), `historyLength`, the push config, `metadata`. JSON-RPC blocks
/// unless `blocking` is false; the REST proto's `blocking` is a plain bool, so there a
/// configuration without it (`false` is not printed) does not block.
fn request(message: Message, v: &Value, proto3: bool) -> Result<SendMessageRequest, A2aError> {
    let config = v.get("configuration");
    let field = |names: &[&str]| config.and_then(|c| names.iter().find_map(|k| c.get(*k)));
    let push = field(&[
        "pushNotificationConfig",
        "pushNotification",
        "push_notification",
    ])
    .map(push_config_in)
    .transpose()?;
    let blocking = match field(&["blocking"]).and_then(Value::as_bool) {
        Some(b) => b,
        None => !(proto3 && config.is_some()),
    };
    Ok(SendMessageRequest {
        tenant: None,
        message,
        configuration: Some(SendMessageConfiguration {
            accepted_output_modes: Vec::new(),
            history_length: field(&["historyLength", "history_length"])
                .and_then(Value::as_u64)
                .map(|n| n as u32),
            return_immediately: !blocking,
            task_push_notification_config: push,
        }),
        metadata: v.get("metadata").and_then(Value::as_object).cloned(),
    })
}

/// A 0.3 PushNotificationConfig: `{id, url, token, authentication{schemes[], credentials}}`.
pub fn push_config_in(v: &Value) -> Result<TaskPushNotificationConfig, A2aError> {
    let text = |key: &str| match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
        Some(_) => Err(invalid(format!(
            "pushNotificationConfig.{key} must be a string"
        ))),
    };
    let authentication = match v.get("authentication").filter(|a| !a.is_null()) {
        Some(a) => {
            let scheme = a
                .get("schemes")
                .and_then(Value::as_array)
                .and_then(|s| s.first())
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("authentication.schemes needs a scheme"))?;
            Some(AuthenticationInfo {
                scheme: scheme.to_owned(),
                credentials: str_field(a, "credentials").map(str::to_owned),
            })
        }
        None => None,
    };
    Ok(TaskPushNotificationConfig {
        tenant: None,
        id: text("id")?.unwrap_or_default(),
        task_id: String::new(),
        url: text("url")?.ok_or_else(|| invalid("pushNotificationConfig.url is required"))?,
        token: text("token")?,
        authentication,
    })
}

/// A config as a 0.3 PushNotificationConfig.
pub fn push_config(c: &TaskPushNotificationConfig) -> Value {
    let mut v = json!({ "id": c.id, "url": c.url });
    if let Some(t) = &c.token {
        v["token"] = json!(t);
    }
    if let Some(a) = &c.authentication {
        v["authentication"] = json!({ "schemes": [a.scheme], "credentials": a.credentials });
    }
    v
}

/// A config as a 0.3 JSON-RPC TaskPushNotificationConfig: `{taskId, pushNotificationConfig}`.
pub fn task_push_config(c: &TaskPushNotificationConfig) -> Value {
    json!({ "taskId": c.task_id, "pushNotificationConfig": push_config(c) })
}

/// MessageSendParams → the normalized request (`blocking` is the inverse of
/// `returnImmediately`; 0.3 blocks by default too).
pub fn send_params(v: &Value) -> Result<SendMessageRequest, A2aError> {
    let message = message_in(
        v.get("message")
            .ok_or_else(|| invalid("params.message is required"))?,
    )?;
    request(message, v, false)
}

/// A 0.3 answer (JSON-RPC `kind` shapes or REST ProtoJSON) as 1.0 JSON: roles and states
/// as 1.0 enums, `content` as `parts`, parts flattened, `kind` and `final` dropped.
pub fn to_v1(v: &Value) -> Result<Value, A2aError> {
    Ok(match v {
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, val) in o {
                let converted = match k.as_str() {
                    "kind" | "final" => continue,
                    "role" => match val.as_str() {
                        Some("user") => json!("ROLE_USER"),
                        Some("agent") => json!("ROLE_AGENT"),
                        _ => val.clone(),
                    },
                    "state" => json!(match val.as_str().unwrap_or("") {
                        "TASK_STATE_CANCELLED" => "TASK_STATE_CANCELED".to_owned(),
                        s if s.starts_with("TASK_STATE_") => s.to_owned(),
                        s => format!("TASK_STATE_{}", s.replace('-', "_").to_ascii_uppercase()),
                    }),
                    "content" | "parts" => Value::Array(
                        val.as_array()
                            .map(|parts| parts.iter().map(part_to_v1).collect::<Result<_, _>>())
                            .transpose()?
                            .unwrap_or_default(),
                    ),
                    _ => to_v1(val)?,
                };
                let key = if k == "content" { "parts" } else { k.as_str() };
                out.insert(key.to_owned(), converted);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(to_v1).collect::<Result<_, _>>()?),
        other => other.clone(),
    })
}

/// A 0.3 part (`kind` shape or REST ProtoJSON) as a 1.0 part.
fn part_to_v1(p: &Value) -> Result<Value, A2aError> {
    if p.get("kind").is_none() {
        return rest::part_in(p);
    }
    let part = part_in(p)?;
    Ok(json!(part))
}

/// A 0.3 stream event or send result (`kind`-discriminated) in the 1.0 wrapper.
pub fn wrap_v1(v: &Value) -> Result<Value, A2aError> {
    let wrapper = match str_field(v, "kind") {
        Some("task") => "task",
        Some("message") => "message",
        Some("status-update") => "statusUpdate",
        Some("artifact-update") => "artifactUpdate",
        // REST answers come wrapped already.
        _ => return to_v1(v),
    };
    Ok(json!({ wrapper: to_v1(v)? }))
}

/// The 0.3 REST binding speaks the ProtoJSON of the 0.3 proto: like 1.0 but messages carry
/// `content`, file and data parts are nested, and canceled is spelled `TASK_STATE_CANCELLED`.
pub mod rest {
    use super::*;

    fn part_out(p: &Value) -> Value {
        let mut out = if let Some(t) = p.get("text") {
            json!({ "text": t })
        } else if let Some(d) = p.get("data") {
            json!({ "data": { "data": d } })
        } else {
            let mut file = Map::new();
            if let Some(r) = p.get("raw").and_then(Value::as_str) {
                file.insert("fileWithBytes".into(), json!(STANDARD.encode(r)));
            }
            if let Some(u) = p.get("url") {
                file.insert("fileWithUri".into(), u.clone());
            }
            if let Some(m) = p.get("mediaType") {
                file.insert("mimeType".into(), m.clone());
            }
            if let Some(n) = p.get("filename") {
                file.insert("name".into(), n.clone());
            }
            json!({ "file": file })
        };
        if let Some(m) = p.get("metadata") {
            out["metadata"] = m.clone();
        }
        out
    }

    fn parts_out(parts: &Value) -> Value {
        Value::Array(
            parts
                .as_array()
                .map(|a| a.iter().map(part_out).collect())
                .unwrap_or_default(),
        )
    }

    fn message_out(m: &Value) -> Value {
        let mut m = m.clone();
        if let Some(obj) = m.as_object_mut()
            && let Some(parts) = obj.remove("parts")
        {
            obj.insert("content".into(), parts_out(&parts));
        }
        m
    }

    fn status_out(s: &Value) -> Value {
        let mut s = s.clone();
        if s["state"] == "TASK_STATE_CANCELED" {
            s["state"] = json!("TASK_STATE_CANCELLED");
        }
        if let Some(m) = s.get("message") {
            s["message"] = message_out(m);
        }
        s
    }

    pub fn task(t: &Task) -> Value {
        let mut v = json!(t);
        v["status"] = status_out(&v["status"]);
        if let Some(history) = v.get("history").and_then(Value::as_array) {
            v["history"] = Value::Array(history.iter().map(message_out).collect());
        }
        if let Some(artifacts) = v.get_mut("artifacts").and_then(Value::as_array_mut) {
            for a in artifacts {
                a["parts"] = parts_out(&a["parts"]);
            }
        }
        v
    }

    pub fn message(m: &Message) -> Value {
        message_out(&json!(m))
    }

    pub fn event(e: &StreamResponse) -> Value {
        match e {
            StreamResponse::Task(t) => json!({ "task": task(t) }),
            StreamResponse::Message(m) => json!({ "message": message(m) }),
            StreamResponse::StatusUpdate(u) => {
                let mut v = json!(u);
                v["status"] = status_out(&v["status"]);
                v["final"] = json!(u.status.state.is_terminal() || u.status.state.is_interrupted());
                json!({ "statusUpdate": v })
            }
            StreamResponse::ArtifactUpdate(u) => {
                let mut v = json!(u);
                v["artifact"]["parts"] = parts_out(&v["artifact"]["parts"]);
                json!({ "artifactUpdate": v })
            }
        }
    }

    pub(super) fn part_in(p: &Value) -> Result<Value, A2aError> {
        let mut out = if let Some(t) = p.get("text") {
            json!({ "text": t })
        } else if let Some(d) = p.get("data") {
            json!({ "data": d.get("data").cloned().unwrap_or(Value::Null) })
        } else if let Some(f) = p.get("file") {
            let mut out = Map::new();
            let either = |camel: &str, snake: &str| f.get(camel).or_else(|| f.get(snake));
            match (
                either("fileWithBytes", "file_with_bytes"),
                either("fileWithUri", "file_with_uri"),
            ) {
                (Some(b), None) => out.insert("raw".into(), json!(file_bytes_in(b)?)),
                (None, Some(u)) => out.insert("url".into(), u.clone()),
                _ => {
                    return Err(invalid(
                        "a file part needs exactly one of fileWithBytes and fileWithUri",
                    ));
                }
            };
            if let Some(m) = either("mimeType", "mime_type") {
                out.insert("mediaType".into(), m.clone());
            }
            if let Some(n) = f.get("name") {
                out.insert("filename".into(), n.clone());
            }
            Value::Object(out)
        } else {
            return Err(invalid("a part needs text, file or data"));
        };
        if let Some(m) = p.get("metadata") {
            out["metadata"] = m.clone();
        }
        Ok(out)
    }

    /// The base64 of a file's bytes from the 0.3 proto's `fileWithBytes`. In the 0.3 JSON
    /// shapes a file's bytes are a base64 string, and the 0.3 proto carries that string in a
    /// `bytes` field, so its ProtoJSON is base64 of the base64 (as a2a-sdk's 0.3 REST client
    /// and server both do). A value that is base64 only once is taken as the bytes.
    fn file_bytes_in(b: &Value) -> Result<String, A2aError> {
        let outer = b
            .as_str()
            .ok_or_else(|| invalid("fileWithBytes must be a string"))?;
        let once = STANDARD
            .decode(outer)
            .map_err(|e| invalid(format!("fileWithBytes is not base64: {e}")))?;
        Ok(match String::from_utf8(once) {
            Ok(inner) if STANDARD.decode(&inner).is_ok() => inner,
            _ => outer.to_owned(),
        })
    }

    /// A config as the 0.3 proto's TaskPushNotificationConfig: a resource name and the config.
    pub fn push_config(c: &TaskPushNotificationConfig) -> Value {
        json!({
            "name": format!("tasks/{}/pushNotificationConfigs/{}", c.task_id, c.id),
            "pushNotificationConfig": super::push_config(c),
        })
    }

    /// CreateTaskPushNotificationConfigRequest of the 0.3 proto (`config_id` / `configId`,
    /// `config.pushNotificationConfig`), or a bare TaskPushNotificationConfig.
    pub fn create_push_request(v: &Value) -> Result<TaskPushNotificationConfig, A2aError> {
        let either = |v: &Value, a: &str, b: &str| v.get(a).or_else(|| v.get(b)).cloned();
        let config = v.get("config").unwrap_or(v);
        let inner = either(config, "pushNotificationConfig", "push_notification_config")
            .ok_or_else(|| invalid("config.pushNotificationConfig is required"))?;
        let mut parsed = super::push_config_in(&inner)?;
        if parsed.id.is_empty()
            && let Some(Value::String(id)) = either(v, "configId", "config_id")
        {
            parsed.id = id;
        }
        Ok(parsed)
    }

    /// SendMessageRequest of the 0.3 proto (`message` or `request`, `configuration.blocking`).
    pub fn send_request(v: &Value) -> Result<SendMessageRequest, A2aError> {
        let mut message = v
            .get("message")
            .or_else(|| v.get("request"))
            .cloned()
            .ok_or_else(|| invalid("message is required"))?;
        if let Some(content) = message.as_object_mut().and_then(|m| m.remove("content")) {
            let parts = content
                .as_array()
                .ok_or_else(|| invalid("content must be an array of parts"))?
                .iter()
                .map(part_in)
                .collect::<Result<Vec<_>, _>>()?;
            message["parts"] = Value::Array(parts);
        }
        let message: Message =
            serde_json::from_value(message).map_err(|e| invalid(format!("message: {e}")))?;
        request(message, v, true)
    }
}

#[cfg(test)]
mod tests;
