//! The A2A 0.3 JSON shapes of the JSON-RPC binding (and pty-ws's agentic-sandbox dialect):
//! `kind`-tagged objects, lowercase roles, kebab-case states, `file` / `data` parts, and
//! `final` on status updates. They convert from the one normalized model (`crate::a2a`)
//! and, checked, back into it. `rest` holds the 0.3 REST binding's ProtoJSON.

pub mod rest;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::a2a;

type Metadata = Option<Map<String, Value>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    Rejected,
    InputRequired,
    AuthRequired,
}

/// A part, by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Metadata,
    },
    Data {
        data: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Metadata,
    },
    File {
        file: File,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Metadata,
    },
}

/// A file part's file: its bytes (base64) or a URI, and what it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct File {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "message", rename_all = "camelCase")]
pub struct Message {
    pub message_id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "task", rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default)]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "status-update", rename_all = "camelCase")]
pub struct StatusUpdate {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    /// Whether this is the stream's last event.
    #[serde(rename = "final", default)]
    pub last: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "artifact-update", rename_all = "camelCase")]
pub struct ArtifactUpdate {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default)]
    pub append: bool,
    #[serde(default)]
    pub last_chunk: bool,
}

/// A send's result or a stream's event: each object carries its `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Event {
    Task(Task),
    Message(Message),
    StatusUpdate(StatusUpdate),
    ArtifactUpdate(ArtifactUpdate),
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Event, D::Error> {
        let v = Value::deserialize(d)?;
        let kind = v.get("kind").and_then(Value::as_str).map(str::to_owned);
        let event = match kind.as_deref() {
            Some("task") => serde_json::from_value(v).map(Event::Task),
            Some("message") => serde_json::from_value(v).map(Event::Message),
            Some("status-update") => serde_json::from_value(v).map(Event::StatusUpdate),
            Some("artifact-update") => serde_json::from_value(v).map(Event::ArtifactUpdate),
            other => return Err(D::Error::custom(format!("unknown kind {other:?}"))),
        };
        event.map_err(D::Error::custom)
    }
}

/// A 0.3 PushNotificationConfig: `{id, url, token, authentication{schemes[], credentials}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushAuthentication>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PushAuthentication {
    pub schemes: Vec<String>,
    #[serde(default)]
    pub credentials: Option<String>,
}

/// The JSON-RPC TaskPushNotificationConfig: `{taskId, pushNotificationConfig}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushConfig {
    pub task_id: String,
    pub push_notification_config: PushConfig,
}

/// MessageSendParams, as a client sends them: the message and whether to wait for the
/// task to finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendParams {
    pub message: Message,
    pub configuration: SendConfiguration,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SendConfiguration {
    pub blocking: bool,
}

/// The params of `tasks/pushNotificationConfig/get` and `…/delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigIdParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config_id: Option<String>,
}

/// A 0.3 object that does not fit the 1.0 model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn invalid<T>(m: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid(m.into()))
}

/// Each of `items`, checked into the 1.0 model.
fn all<T, U: TryFrom<T, Error = Invalid>>(items: Vec<T>) -> Result<Vec<U>, Invalid> {
    items.into_iter().map(U::try_from).collect()
}

/// A message's parts in the 1.0 model, which needs an id and at least one part.
fn message_parts<P>(message_id: &str, parts: Vec<P>) -> Result<Vec<a2a::Part>, Invalid>
where
    a2a::Part: TryFrom<P, Error = Invalid>,
{
    if message_id.is_empty() {
        return invalid("messageId is required");
    }
    if parts.is_empty() {
        return invalid("a message needs at least one part");
    }
    all(parts)
}

impl From<a2a::Role> for Role {
    fn from(r: a2a::Role) -> Role {
        match r {
            a2a::Role::User => Role::User,
            a2a::Role::Agent => Role::Agent,
        }
    }
}

impl From<Role> for a2a::Role {
    fn from(r: Role) -> a2a::Role {
        match r {
            Role::User => a2a::Role::User,
            Role::Agent => a2a::Role::Agent,
        }
    }
}

impl From<a2a::TaskState> for TaskState {
    fn from(s: a2a::TaskState) -> TaskState {
        use a2a::TaskState as S;
        match s {
            S::Submitted => TaskState::Submitted,
            S::Working => TaskState::Working,
            S::Completed => TaskState::Completed,
            S::Failed => TaskState::Failed,
            S::Canceled => TaskState::Canceled,
            S::Rejected => TaskState::Rejected,
            S::InputRequired => TaskState::InputRequired,
            S::AuthRequired => TaskState::AuthRequired,
        }
    }
}

impl From<TaskState> for a2a::TaskState {
    fn from(s: TaskState) -> a2a::TaskState {
        use a2a::TaskState as S;
        match s {
            TaskState::Submitted => S::Submitted,
            TaskState::Working => S::Working,
            TaskState::Completed => S::Completed,
            TaskState::Failed => S::Failed,
            TaskState::Canceled => S::Canceled,
            TaskState::Rejected => S::Rejected,
            TaskState::InputRequired => S::InputRequired,
            TaskState::AuthRequired => S::AuthRequired,
        }
    }
}

impl From<&a2a::Part> for Part {
    fn from(p: &a2a::Part) -> Part {
        let metadata = p.metadata.clone();
        let file = |bytes, uri| File {
            bytes,
            uri,
            mime_type: p.media_type.clone(),
            name: p.filename.clone(),
        };
        match &p.content {
            a2a::Content::Text(text) => Part::Text {
                text: text.clone(),
                metadata,
            },
            a2a::Content::Data(data) => Part::Data {
                data: data.clone(),
                metadata,
            },
            a2a::Content::Raw(b) => Part::File {
                file: file(Some(STANDARD.encode(b)), None),
                metadata,
            },
            a2a::Content::Url(u) => Part::File {
                file: file(None, Some(u.clone())),
                metadata,
            },
        }
    }
}

impl TryFrom<Part> for a2a::Part {
    type Error = Invalid;
    fn try_from(p: Part) -> Result<a2a::Part, Invalid> {
        let (content, metadata, file) = match p {
            Part::Text { text, metadata } => (a2a::Content::Text(text), metadata, None),
            Part::Data { data, metadata } => (a2a::Content::Data(data), metadata, None),
            Part::File { file, metadata } => {
                let content = match (&file.bytes, &file.uri) {
                    (Some(b), None) => match STANDARD.decode(b) {
                        Ok(bytes) => a2a::Content::Raw(bytes),
                        Err(e) => return invalid(format!("file.bytes is not base64: {e}")),
                    },
                    (None, Some(u)) => a2a::Content::Url(u.clone()),
                    _ => return invalid("a file part needs exactly one of bytes and uri"),
                };
                (content, metadata, Some(file))
            }
        };
        let file = file.unwrap_or_default();
        Ok(a2a::Part {
            content,
            media_type: file.mime_type,
            filename: file.name,
            metadata,
        })
    }
}

impl From<&a2a::Message> for Message {
    fn from(m: &a2a::Message) -> Message {
        Message {
            message_id: m.message_id.clone(),
            role: m.role.into(),
            parts: m.parts.iter().map(Part::from).collect(),
            context_id: m.context_id.clone(),
            task_id: m.task_id.clone(),
            metadata: m.metadata.clone(),
            reference_task_ids: m.reference_task_ids.clone(),
            extensions: m.extensions.clone(),
        }
    }
}

impl TryFrom<Message> for a2a::Message {
    type Error = Invalid;
    fn try_from(m: Message) -> Result<a2a::Message, Invalid> {
        let parts = message_parts(&m.message_id, m.parts)?;
        Ok(a2a::Message {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role.into(),
            parts,
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        })
    }
}

impl From<&a2a::TaskStatus> for TaskStatus {
    fn from(s: &a2a::TaskStatus) -> TaskStatus {
        TaskStatus {
            state: s.state.into(),
            message: s.message.as_ref().map(Message::from),
            timestamp: s.timestamp.clone(),
        }
    }
}

impl TryFrom<TaskStatus> for a2a::TaskStatus {
    type Error = Invalid;
    fn try_from(s: TaskStatus) -> Result<a2a::TaskStatus, Invalid> {
        Ok(a2a::TaskStatus {
            state: s.state.into(),
            message: s.message.map(a2a::Message::try_from).transpose()?,
            timestamp: s.timestamp,
        })
    }
}

impl From<&a2a::Artifact> for Artifact {
    fn from(a: &a2a::Artifact) -> Artifact {
        Artifact {
            artifact_id: a.artifact_id.clone(),
            parts: a.parts.iter().map(Part::from).collect(),
            name: a.name.clone(),
            description: a.description.clone(),
            metadata: a.metadata.clone(),
        }
    }
}

impl TryFrom<Artifact> for a2a::Artifact {
    type Error = Invalid;
    fn try_from(a: Artifact) -> Result<a2a::Artifact, Invalid> {
        Ok(a2a::Artifact {
            artifact_id: a.artifact_id,
            name: a.name,
            description: a.description,
            parts: all(a.parts)?,
            metadata: a.metadata,
        })
    }
}

impl From<&a2a::Task> for Task {
    fn from(t: &a2a::Task) -> Task {
        Task {
            id: t.id.clone(),
            context_id: t.context_id.clone(),
            status: (&t.status).into(),
            history: t.history.iter().map(Message::from).collect(),
            artifacts: t
                .artifacts
                .as_ref()
                .map(|a| a.iter().map(Artifact::from).collect()),
            metadata: t.metadata.clone(),
        }
    }
}

impl TryFrom<Task> for a2a::Task {
    type Error = Invalid;
    fn try_from(t: Task) -> Result<a2a::Task, Invalid> {
        Ok(a2a::Task {
            id: t.id,
            context_id: t.context_id,
            status: t.status.try_into()?,
            artifacts: t.artifacts.map(all).transpose()?,
            history: all(t.history)?,
            metadata: t.metadata,
        })
    }
}

impl From<&a2a::StreamResponse> for Event {
    fn from(e: &a2a::StreamResponse) -> Event {
        match e {
            a2a::StreamResponse::Task(t) => Event::Task(t.into()),
            a2a::StreamResponse::Message(m) => Event::Message(m.into()),
            a2a::StreamResponse::StatusUpdate(u) => Event::StatusUpdate(StatusUpdate {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                status: (&u.status).into(),
                last: u.status.state.ends_stream(),
            }),
            a2a::StreamResponse::ArtifactUpdate(u) => Event::ArtifactUpdate(ArtifactUpdate {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                artifact: (&u.artifact).into(),
                append: u.append,
                last_chunk: u.last_chunk,
            }),
        }
    }
}

impl TryFrom<Event> for a2a::StreamResponse {
    type Error = Invalid;
    fn try_from(e: Event) -> Result<a2a::StreamResponse, Invalid> {
        Ok(match e {
            Event::Task(t) => a2a::StreamResponse::Task(t.try_into()?),
            Event::Message(m) => a2a::StreamResponse::Message(m.try_into()?),
            Event::StatusUpdate(u) => {
                a2a::StreamResponse::StatusUpdate(a2a::TaskStatusUpdateEvent {
                    task_id: u.task_id,
                    context_id: u.context_id,
                    status: u.status.try_into()?,
                    metadata: None,
                })
            }
            Event::ArtifactUpdate(u) => {
                a2a::StreamResponse::ArtifactUpdate(a2a::TaskArtifactUpdateEvent {
                    task_id: u.task_id,
                    context_id: u.context_id,
                    artifact: u.artifact.try_into()?,
                    append: u.append,
                    last_chunk: u.last_chunk,
                    metadata: None,
                })
            }
        })
    }
}

impl From<&a2a::TaskPushNotificationConfig> for PushConfig {
    fn from(c: &a2a::TaskPushNotificationConfig) -> PushConfig {
        PushConfig {
            id: Some(c.id.clone()),
            url: c.url.clone(),
            token: c.token.clone(),
            authentication: c.authentication.as_ref().map(|a| PushAuthentication {
                schemes: vec![a.scheme.clone()],
                credentials: a.credentials.clone(),
            }),
        }
    }
}

impl From<&a2a::TaskPushNotificationConfig> for TaskPushConfig {
    fn from(c: &a2a::TaskPushNotificationConfig) -> TaskPushConfig {
        TaskPushConfig {
            task_id: c.task_id.clone(),
            push_notification_config: c.into(),
        }
    }
}
