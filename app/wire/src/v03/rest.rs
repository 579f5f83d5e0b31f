//! The 0.3 REST binding's ProtoJSON (the 0.3 proto): like 1.0, but a message carries
//! `content`, file and data parts are nested, and canceled is spelled
//! `TASK_STATE_CANCELLED`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{Invalid, PushConfig, all, invalid, message_parts};
use crate::a2a;

type Metadata = Option<Map<String, Value>>;

/// A task state as the 0.3 proto names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State(pub a2a::TaskState);

impl Serialize for State {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self.0 {
            a2a::TaskState::Canceled => "TASK_STATE_CANCELLED",
            other => other.name(),
        })
    }
}

impl<'de> Deserialize<'de> for State {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<State, D::Error> {
        let name = String::deserialize(d)?;
        let name = if name == "TASK_STATE_CANCELLED" {
            "TASK_STATE_CANCELED"
        } else {
            &name
        };
        a2a::TaskState::from_name(name)
            .map(State)
            .ok_or_else(|| D::Error::custom(format!("unknown task state {name:?}")))
    }
}

/// A part: one of `text`, `file` and `data`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FilePart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataPart {
    #[serde(default)]
    pub data: Value,
}

/// The 0.3 proto's FilePart. `fileWithBytes` is base64 of the base64 of the bytes: the 0.3
/// JSON shapes carry a file's bytes as a base64 string, and the 0.3 proto carries that
/// string in a `bytes` field (as a2a-sdk's 0.3 REST client and server both do).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePart {
    #[serde(
        default,
        alias = "file_with_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_with_bytes: Option<String>,
    #[serde(
        default,
        alias = "file_with_uri",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_with_uri: Option<String>,
    #[serde(default, alias = "mime_type", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(alias = "message_id")]
    pub message_id: String,
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, alias = "task_id", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: a2a::Role,
    #[serde(default)]
    pub content: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(
        default,
        alias = "reference_task_ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reference_task_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(rename = "final", default)]
    pub last: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactUpdate {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

/// A send's result or a stream's event, wrapped by what it is (`{"task": …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Event {
    Task(Task),
    Message(Message),
    StatusUpdate(StatusUpdate),
    ArtifactUpdate(ArtifactUpdate),
}

/// The 0.3 proto's TaskPushNotificationConfig: a resource name and the config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushConfig {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub push_notification_config: PushConfig,
}

/// SendMessageRequest of the 0.3 proto, as a client sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRequest {
    pub request: Message,
    pub configuration: super::SendConfiguration,
}

/// CreateTaskPushNotificationConfigRequest of the 0.3 proto, as a client sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatePushRequest {
    pub config: TaskPushConfig,
}

impl From<&a2a::Part> for Part {
    fn from(p: &a2a::Part) -> Part {
        let file = |bytes, uri| FilePart {
            file_with_bytes: bytes,
            file_with_uri: uri,
            mime_type: p.media_type.clone(),
            name: p.filename.clone(),
        };
        let mut part = Part {
            metadata: p.metadata.clone(),
            ..Part::default()
        };
        match &p.content {
            a2a::Content::Text(t) => part.text = Some(t.clone()),
            a2a::Content::Data(d) => part.data = Some(DataPart { data: d.clone() }),
            a2a::Content::Raw(b) => {
                let twice = STANDARD.encode(STANDARD.encode(b));
                part.file = Some(file(Some(twice), None));
            }
            a2a::Content::Url(u) => part.file = Some(file(None, Some(u.clone()))),
        }
        part
    }
}

impl TryFrom<Part> for a2a::Part {
    type Error = Invalid;
    fn try_from(p: Part) -> Result<a2a::Part, Invalid> {
        let (content, file) = match (p.text, p.data, p.file) {
            (Some(t), _, _) => (a2a::Content::Text(t), None),
            (None, Some(d), _) => (a2a::Content::Data(d.data), None),
            (None, None, Some(f)) => {
                let content = match (&f.file_with_bytes, &f.file_with_uri) {
                    (Some(b), None) => a2a::Content::Raw(file_bytes(b)?),
                    (None, Some(u)) => a2a::Content::Url(u.clone()),
                    _ => {
                        return invalid(
                            "a file part needs exactly one of fileWithBytes and fileWithUri",
                        );
                    }
                };
                (content, Some(f))
            }
            (None, None, None) => return invalid("a part needs text, file or data"),
        };
        let file = file.unwrap_or_default();
        Ok(a2a::Part {
            content,
            media_type: file.mime_type,
            filename: file.name,
            metadata: p.metadata,
        })
    }
}

/// A file's bytes from `fileWithBytes`: base64 of the base64, or (from a peer that encodes
/// once) the base64 of the bytes themselves.
fn file_bytes(outer: &str) -> Result<Vec<u8>, Invalid> {
    let once = STANDARD
        .decode(outer)
        .map_err(|e| Invalid(format!("fileWithBytes is not base64: {e}")))?;
    Ok(
        match std::str::from_utf8(&once).map(|inner| STANDARD.decode(inner)) {
            Ok(Ok(bytes)) => bytes,
            _ => once,
        },
    )
}

impl From<&a2a::Message> for Message {
    fn from(m: &a2a::Message) -> Message {
        Message {
            message_id: m.message_id.clone(),
            context_id: m.context_id.clone(),
            task_id: m.task_id.clone(),
            role: m.role,
            content: m.parts.iter().map(Part::from).collect(),
            metadata: m.metadata.clone(),
            extensions: m.extensions.clone(),
            reference_task_ids: m.reference_task_ids.clone(),
        }
    }
}

impl TryFrom<Message> for a2a::Message {
    type Error = Invalid;
    fn try_from(m: Message) -> Result<a2a::Message, Invalid> {
        let parts = message_parts(&m.message_id, m.content)?;
        Ok(a2a::Message {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role,
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
            state: State(s.state),
            message: s.message.as_ref().map(Message::from),
            timestamp: s.timestamp.clone(),
        }
    }
}

impl TryFrom<TaskStatus> for a2a::TaskStatus {
    type Error = Invalid;
    fn try_from(s: TaskStatus) -> Result<a2a::TaskStatus, Invalid> {
        Ok(a2a::TaskStatus {
            state: s.state.0,
            message: s.message.map(a2a::Message::try_from).transpose()?,
            timestamp: s.timestamp,
        })
    }
}

impl From<&a2a::Artifact> for Artifact {
    fn from(a: &a2a::Artifact) -> Artifact {
        Artifact {
            artifact_id: a.artifact_id.clone(),
            name: a.name.clone(),
            description: a.description.clone(),
            parts: a.parts.iter().map(Part::from).collect(),
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
            artifacts: t
                .artifacts
                .as_ref()
                .map(|a| a.iter().map(Artifact::from).collect()),
            history: t.history.iter().map(Message::from).collect(),
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
                metadata: u.metadata.clone(),
                last: u.status.state.ends_stream(),
            }),
            a2a::StreamResponse::ArtifactUpdate(u) => Event::ArtifactUpdate(ArtifactUpdate {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                artifact: (&u.artifact).into(),
                append: u.append,
                last_chunk: u.last_chunk,
                metadata: u.metadata.clone(),
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
                    metadata: u.metadata,
                })
            }
            Event::ArtifactUpdate(u) => {
                a2a::StreamResponse::ArtifactUpdate(a2a::TaskArtifactUpdateEvent {
                    task_id: u.task_id,
                    context_id: u.context_id,
                    artifact: u.artifact.try_into()?,
                    append: u.append,
                    last_chunk: u.last_chunk,
                    metadata: u.metadata,
                })
            }
        })
    }
}

impl From<&a2a::TaskPushNotificationConfig> for TaskPushConfig {
    fn from(c: &a2a::TaskPushNotificationConfig) -> TaskPushConfig {
        TaskPushConfig {
            name: format!("tasks/{}/pushNotificationConfigs/{}", c.task_id, c.id),
            push_notification_config: c.into(),
        }
    }
}
