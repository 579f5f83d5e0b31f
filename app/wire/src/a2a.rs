//! The A2A data model, normalized, with its A2A 1.0 ProtoJSON form: lowerCamelCase names
//! (snake_case accepted on input), `ROLE_*` / `TASK_STATE_*` enums, flat parts
//! (`text` | `raw` | `url` | `data` plus `mediaType` / `filename`). Decoding validates what
//! 1.0 requires and reports the first violation by field.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// Whether a task's stream ends here: the task finished, or waits for its caller.
    pub fn ends_stream(self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }

    /// The 1.0 enum name (`TASK_STATE_WORKING`).
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    pub fn from_name(name: &str) -> Option<TaskState> {
        serde_json::from_value(Value::String(name.to_owned())).ok()
    }
}

/// A part's content: exactly one of the 1.0 oneof members.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    Raw(Vec<u8>),
    Url(String),
    Data(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub content: Content,
    pub media_type: Option<String>,
    pub filename: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part {
            content: Content::Text(text.into()),
            media_type: None,
            filename: None,
            metadata: None,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
    #[serde(default, alias = "media_type", skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metadata: Option<Map<String, Value>>,
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut j = PartJson {
            text: None,
            raw: None,
            url: None,
            data: None,
            media_type: self.media_type.clone(),
            filename: self.filename.clone(),
            metadata: self.metadata.clone(),
        };
        match &self.content {
            Content::Text(t) => j.text = Some(t.clone()),
            Content::Raw(b) => j.raw = Some(STANDARD.encode(b)),
            Content::Url(u) => j.url = Some(u.clone()),
            Content::Data(d) => j.data = Some(d.clone()),
        }
        j.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let j = PartJson::deserialize(d)?;
        let set = [
            j.text.is_some(),
            j.raw.is_some(),
            j.url.is_some(),
            j.data.is_some(),
        ];
        if set.iter().filter(|b| **b).count() != 1 {
            return Err(D::Error::custom(
                "a part must have exactly one of text, raw, url, data",
            ));
        }
        let content = if let Some(t) = j.text {
            Content::Text(t)
        } else if let Some(r) = j.raw {
            Content::Raw(
                STANDARD
                    .decode(r.as_bytes())
                    .map_err(|e| D::Error::custom(format!("raw is not base64: {e}")))?,
            )
        } else if let Some(u) = j.url {
            if !is_absolute_url(&u) {
                return Err(D::Error::custom(format!(
                    "url {u:?} is not an absolute URL"
                )));
            }
            Content::Url(u)
        } else {
            Content::Data(j.data.unwrap_or(Value::Null))
        };
        Ok(Part {
            content,
            media_type: j.media_type,
            filename: j.filename,
            metadata: j.metadata,
        })
    }
}

/// `scheme:rest` with an RFC 3986 scheme and something after it.
fn is_absolute_url(u: &str) -> bool {
    match u.split_once(':') {
        Some((scheme, rest)) => {
            !rest.is_empty()
                && !u.chars().any(char::is_whitespace)
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

fn non_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Err(D::Error::custom("must not be empty"));
    }
    Ok(s)
}

fn parts<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Part>, D::Error> {
    let v = Vec::<Part>::deserialize(d)?;
    if v.is_empty() {
        return Err(D::Error::custom("parts must have at least one part"));
    }
    Ok(v)
}

fn extension_uris<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    if let Some(bad) = v.iter().find(|u| !is_absolute_url(u)) {
        return Err(D::Error::custom(format!("extension {bad:?} is not a URI")));
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(alias = "message_id", deserialize_with = "non_empty")]
    pub message_id: String,
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, alias = "task_id", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    #[serde(deserialize_with = "parts")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(
        default,
        deserialize_with = "extension_uris",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<String>,
    #[serde(
        default,
        alias = "reference_task_ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// The text of all text parts, joined by newlines.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match &p.content {
                Content::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
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
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
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
    pub metadata: Option<Map<String, Value>>,
}

impl Task {
    /// The task as a reader asked for it: at most `history_length` recent messages (none
    /// for 0, all when unset), and artifacts only when wanted.
    pub fn view(mut self, history_length: Option<u32>, artifacts: bool) -> Task {
        if let Some(n) = history_length {
            let keep = self.history.len().saturating_sub(n as usize);
            self.history.drain(..keep);
        }
        if !artifacts {
            self.artifacts = None;
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// One event of a task's stream, in the 1.0 wrapper form (`{"statusUpdate": …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// Serialized as 1.0 ProtoJSON too: a node forwards the request to the node that runs its
/// session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(
        default,
        alias = "accepted_output_modes",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub accepted_output_modes: Vec<String>,
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<u32>,
    #[serde(default, alias = "return_immediately")]
    pub return_immediately: bool,
    #[serde(
        default,
        alias = "task_push_notification_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
}

/// Where and how a task's updates are pushed (A2A 1.0 merged PushNotificationConfig into
/// this message). `id` and `taskId` are empty until the server assigns them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, alias = "task_id", skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// The `Authorization` a push delivery carries: `{scheme} {credentials}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// ListTasksResponse: a page of tasks, the next page's token (empty on the last), the page
/// size used and how many tasks match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub page_size: u32,
    pub total_size: i64,
}

/// ListTaskPushNotificationConfigsResponse, with each config in the binding's version
/// (`C`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse<C = TaskPushNotificationConfig> {
    pub configs: Vec<C>,
    pub next_page_token: String,
}

/// GetTaskPushNotificationConfigRequest / DeleteTaskPushNotificationConfigRequest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(alias = "task_id")]
    pub task_id: String,
    pub id: String,
}

/// ListTaskPushNotificationConfigsRequest.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsRequest {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    #[serde(default, alias = "page_size")]
    pub page_size: Option<u32>,
    #[serde(default, alias = "page_token")]
    pub page_token: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// ListTasksRequest (REST query parameters carry the same names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// TASK_STATE_UNSPECIFIED (the enum's ProtoJSON default) filters nothing.
    #[serde(
        default,
        deserialize_with = "state_filter",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<TaskState>,
    #[serde(default, alias = "page_size", skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
    #[serde(default, alias = "page_token", skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<u32>,
    #[serde(
        default,
        alias = "status_timestamp_after",
        skip_serializing_if = "Option::is_none"
    )]
    pub status_timestamp_after: Option<String>,
    #[serde(default, alias = "include_artifacts")]
    pub include_artifacts: bool,
}

fn state_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TaskState>, D::Error> {
    match Option::<String>::deserialize(d)?.as_deref() {
        None | Some("TASK_STATE_UNSPECIFIED") => Ok(None),
        Some(name) => TaskState::from_name(name)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("unknown task state {name:?}"))),
    }
}

/// GetTaskRequest / CancelTaskRequest / SubscribeToTaskRequest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<u32>,
}

impl TaskIdRequest {
    pub fn of(id: &str) -> TaskIdRequest {
        TaskIdRequest {
            tenant: None,
            id: id.to_owned(),
            history_length: None,
        }
    }
}

#[cfg(test)]
mod tests;
