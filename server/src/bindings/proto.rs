//! The A2A 1.0 messages as protobuf, for the gRPC binding and the STDIO binding's
//! `stdio-proto` variant: the descriptor set compiled from A2A's normative `proto/a2a.proto`
//! at build time, and the proto3 JSON
//! mapping (prost-reflect) between those messages and ptyhost's 1.0 ProtoJSON — so the
//! variant runs the very same operations as `stdio-json`.

use std::sync::OnceLock;

use prost::Message as _;
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage};
use serde_json::Value;

const EMPTY: &str = "google.protobuf.Empty";

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(include_bytes!(concat!(env!("OUT_DIR"), "/a2a.bin")).as_ref())
            .expect("the descriptor set built from proto/ decodes")
    })
}

/// A JSON value as the protobuf encoding of message `type_name` (a full name).
pub fn encode(type_name: &str, json: &Value) -> Result<Vec<u8>, String> {
    let desc = pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| format!("no message {type_name}"))?;
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let msg = DynamicMessage::deserialize_with_options(desc, json.clone(), &options)
        .map_err(|e| format!("{type_name}: {e}"))?;
    Ok(msg.encode_to_vec())
}

/// The protobuf encoding of message `type_name` as JSON (proto3 mapping, camelCase).
pub fn decode(type_name: &str, bytes: &[u8]) -> Result<Value, String> {
    let desc = pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| format!("no message {type_name}"))?;
    let msg = DynamicMessage::decode(desc, bytes).map_err(|e| format!("{type_name}: {e}"))?;
    serde_json::to_value(&msg).map_err(|e| format!("{type_name}: {e}"))
}

/// A method's request and answer message types, and whether it streams.
pub fn method_types(method: &str) -> Option<(&'static str, &'static str, bool)> {
    Some(match method {
        "SendMessage" => (
            "lf.a2a.v1.SendMessageRequest",
            "lf.a2a.v1.SendMessageResponse",
            false,
        ),
        "SendStreamingMessage" => (
            "lf.a2a.v1.SendMessageRequest",
            "lf.a2a.v1.StreamResponse",
            true,
        ),
        "GetTask" => ("lf.a2a.v1.GetTaskRequest", "lf.a2a.v1.Task", false),
        "ListTasks" => (
            "lf.a2a.v1.ListTasksRequest",
            "lf.a2a.v1.ListTasksResponse",
            false,
        ),
        "CancelTask" => ("lf.a2a.v1.CancelTaskRequest", "lf.a2a.v1.Task", false),
        "SubscribeToTask" => (
            "lf.a2a.v1.SubscribeToTaskRequest",
            "lf.a2a.v1.StreamResponse",
            true,
        ),
        "CreateTaskPushNotificationConfig" => (
            "lf.a2a.v1.TaskPushNotificationConfig",
            "lf.a2a.v1.TaskPushNotificationConfig",
            false,
        ),
        "GetTaskPushNotificationConfig" => (
            "lf.a2a.v1.GetTaskPushNotificationConfigRequest",
            "lf.a2a.v1.TaskPushNotificationConfig",
            false,
        ),
        "ListTaskPushNotificationConfigs" => (
            "lf.a2a.v1.ListTaskPushNotificationConfigsRequest",
            "lf.a2a.v1.ListTaskPushNotificationConfigsResponse",
            false,
        ),
        "DeleteTaskPushNotificationConfig" => (
            "lf.a2a.v1.DeleteTaskPushNotificationConfigRequest",
            EMPTY,
            false,
        ),
        "GetExtendedAgentCard" => (
            "lf.a2a.v1.GetExtendedAgentCardRequest",
            "lf.a2a.v1.AgentCard",
            false,
        ),
        "system/shutdown" => (EMPTY, EMPTY, false),
        _ => return None,
    })
}

/// The error message of a failed request: code, message and reason as in stdio-json.
pub fn error(code: i64, message: &str, reason: &str) -> Vec<u8> {
    let error = StdioError {
        code,
        message,
        reason,
    };
    let json = wire::to_json(error);
    encode("ptyhost.stdio.Error", &json).unwrap_or_default()
}

/// `ptyhost.stdio.Error` in JSON.
#[derive(serde::Serialize)]
struct StdioError<'a> {
    code: i64,
    message: &'a str,
    reason: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tasks_round_trip_through_protobuf_in_their_1_0_json_shape() {
        let task = json!({
            "id": "t", "contextId": "c",
            "status": { "state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-29T00:00:00.123Z",
                "message": { "messageId": "m", "role": "ROLE_AGENT", "parts": [{ "text": "done" }] } },
            "artifacts": [{ "artifactId": "output", "parts": [{ "text": "hi\r\n", "mediaType": "text/plain" }, { "raw": "aGk=" }, { "data": { "a": [1.5, "x"] } }] }],
            "metadata": { "exit_code": 0.0 },
        });
        let bytes = encode("lf.a2a.v1.Task", &task).unwrap();
        assert_eq!(decode("lf.a2a.v1.Task", &bytes).unwrap(), task);
        let wrapped = json!({ "statusUpdate": { "taskId": "t", "contextId": "c", "status": { "state": "TASK_STATE_WORKING" } } });
        let bytes = encode("lf.a2a.v1.StreamResponse", &wrapped).unwrap();
        assert_eq!(decode("lf.a2a.v1.StreamResponse", &bytes).unwrap(), wrapped);
        assert!(
            encode(
                "lf.a2a.v1.Task",
                &json!({ "status": { "state": "NOT_A_STATE" } })
            )
            .is_err()
        );
        assert!(decode("lf.a2a.v1.Task", b"\xff\xff").is_err());
    }
}
