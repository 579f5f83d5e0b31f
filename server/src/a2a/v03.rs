//! The A2A 0.3 surface at the edge: requests in its JSON shapes read into the one normalized
//! model, and answers written in them. The shapes themselves are `wire::v03` (JSON-RPC)
//! and `wire::v03::rest` (REST ProtoJSON).

use serde::de::DeserializeOwned;
use serde_json::Value;
use wire::a2a::{
    AuthenticationInfo, Message, SendMessageConfiguration, SendMessageRequest, StreamResponse,
    Task, TaskPushNotificationConfig,
};
use wire::v03 as shapes;

use super::A2aError;

/// A 0.3 object read as `S`, then checked into the 1.0 model.
fn read<S: DeserializeOwned, T: TryFrom<S, Error = shapes::Invalid>>(
    v: Value,
    what: &str,
) -> Result<T, A2aError> {
    let shaped: S = serde_json::from_value(v).map_err(|e| invalid(format!("{what}: {e}")))?;
    T::try_from(shaped).map_err(|e| invalid(format!("{what}: {e}")))
}

pub fn message(m: &Message) -> Value {
    wire::to_json(shapes::Message::from(m))
}

pub fn task(t: &Task) -> Value {
    wire::to_json(shapes::Task::from(t))
}

/// A stream event; status updates say whether they are the last (`final`).
pub fn event(e: &StreamResponse) -> Value {
    wire::to_json(shapes::Event::from(e))
}

/// A 0.3 send result or stream event (`kind`-tagged, or wrapped on REST) in the 1.0 model.
pub fn event_in(v: Value, rest: bool) -> Result<StreamResponse, A2aError> {
    if rest {
        read::<shapes::rest::Event, _>(v, "event")
    } else {
        read::<shapes::Event, _>(v, "event")
    }
}

/// A 0.3 task (JSON-RPC or REST shape) in the 1.0 model.
pub fn task_in(v: Value, rest: bool) -> Result<Task, A2aError> {
    if rest {
        read::<shapes::rest::Task, _>(v, "task")
    } else {
        read::<shapes::Task, _>(v, "task")
    }
}

fn invalid(m: impl Into<String>) -> A2aError {
    A2aError::InvalidParams(m.into())
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
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
    wire::to_json(shapes::PushConfig::from(c))
}

/// A config as a 0.3 JSON-RPC TaskPushNotificationConfig: `{taskId, pushNotificationConfig}`.
pub fn task_push_config(c: &TaskPushNotificationConfig) -> Value {
    wire::to_json(shapes::TaskPushConfig::from(c))
}

/// MessageSendParams → the normalized request (`blocking` is the inverse of
/// `returnImmediately`; 0.3 blocks by default too).
pub fn send_params(v: &Value) -> Result<SendMessageRequest, A2aError> {
    let message = v
        .get("message")
        .cloned()
        .ok_or_else(|| invalid("params.message is required"))?;
    request(read::<shapes::Message, _>(message, "message")?, v, false)
}

/// The 0.3 REST binding speaks the ProtoJSON of the 0.3 proto (`wire::v03::rest`).
pub mod rest {
    use serde_json::Value;
    use wire::a2a::{
        Message, SendMessageRequest, StreamResponse, Task, TaskPushNotificationConfig,
    };
    use wire::v03::rest as shapes;

    use super::{A2aError, invalid, read};

    pub fn task(t: &Task) -> Value {
        wire::to_json(shapes::Task::from(t))
    }

    pub fn message(m: &Message) -> Value {
        wire::to_json(shapes::Message::from(m))
    }

    pub fn event(e: &StreamResponse) -> Value {
        wire::to_json(shapes::Event::from(e))
    }

    /// A config as the 0.3 proto's TaskPushNotificationConfig: a resource name and the config.
    pub fn push_config(c: &TaskPushNotificationConfig) -> Value {
        wire::to_json(shapes::TaskPushConfig::from(c))
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
        let message = v
            .get("message")
            .or_else(|| v.get("request"))
            .cloned()
            .ok_or_else(|| invalid("message is required"))?;
        super::request(read::<shapes::Message, _>(message, "message")?, v, true)
    }
}

#[cfg(test)]
mod tests;
