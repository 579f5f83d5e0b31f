use prost::Message as _;
use serde_json::json;

use super::*;
use crate::bindings::proto;

/// A task with every kind of part, a status message and time, history, and metadata.
fn busy_task() -> Task {
    serde_json::from_value(json!({
        "id": "t", "contextId": "c",
        "status": { "state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-11-29T00:00:00.123Z",
            "message": { "messageId": "m", "role": "ROLE_AGENT", "parts": [{ "text": "more?" }] } },
        "artifacts": [{ "artifactId": "output", "name": "out", "parts": [
            { "text": "hi\r\n", "mediaType": "text/plain" },
            { "raw": "aGk=", "filename": "f.bin" },
            { "url": "https://example.com/x", "metadata": { "k": [1, "x", null, true] } },
            { "data": { "a": [1.5, "x"], "b": { "c": false } } }] }],
        "history": [{ "messageId": "h", "contextId": "c", "taskId": "t", "role": "ROLE_USER",
            "parts": [{ "text": "echo hi" }], "extensions": ["urn:x"], "referenceTaskIds": ["r"] }],
        "metadata": { "exit_code": 0, "runtime.kind": "host" },
    }))
    .unwrap()
}

/// What the ProtoJSON bridge makes of the same value: its JSON through protobuf.
fn bridged(type_name: &str, json: &Value) -> Value {
    let bytes = proto::encode(type_name, json).unwrap();
    proto::decode(type_name, &bytes).unwrap()
}

fn typed(type_name: &str, bytes: Vec<u8>) -> Value {
    proto::decode(type_name, &bytes).unwrap()
}

#[test]
fn answers_encode_as_the_protojson_bridge_encodes_them() {
    let t = busy_task();
    assert_eq!(
        typed("lf.a2a.v1.Task", task(t.clone()).encode_to_vec()),
        bridged("lf.a2a.v1.Task", &wire::to_json(&t))
    );
    let answer = Sent::Task(t.clone());
    assert_eq!(
        typed(
            "lf.a2a.v1.SendMessageResponse",
            sent(answer.clone()).encode_to_vec()
        ),
        bridged("lf.a2a.v1.SendMessageResponse", &wire::to_json(&answer))
    );
    let events = [
        StreamResponse::Task(t.clone()),
        StreamResponse::Message(t.history[0].clone()),
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: t.status.clone(),
            metadata: Some(Map::from_iter([("n".into(), json!(2))])),
        }),
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: t.artifacts.clone().unwrap()[0].clone(),
            append: true,
            last_chunk: false,
            metadata: None,
        }),
    ];
    for e in events {
        assert_eq!(
            typed("lf.a2a.v1.StreamResponse", event(e.clone()).encode_to_vec()),
            bridged("lf.a2a.v1.StreamResponse", &wire::to_json(&e)),
            "{e:?}"
        );
    }
}

#[test]
fn requests_decode_to_what_the_protojson_bridge_reads() {
    let send = json!({
        "tenant": "acme",
        "message": { "messageId": "m1", "contextId": "c", "role": "ROLE_USER",
            "parts": [{ "text": "ls" }, { "raw": "aGk=", "mediaType": "application/x-sh", "filename": "run.sh" },
                { "data": { "from_snapshot": "s1", "n": 3 } }],
            "metadata": { "trace": "x" } },
        "configuration": { "acceptedOutputModes": ["text/plain"], "historyLength": 2, "returnImmediately": true,
            "taskPushNotificationConfig": { "url": "https://example.com/hook", "token": "tok",
                "authentication": { "scheme": "Bearer", "credentials": "c" } } },
        "metadata": { "k": "v" },
    });
    let bytes = proto::encode("lf.a2a.v1.SendMessageRequest", &send).unwrap();
    let via_json: SendMessageRequest =
        serde_json::from_value(proto::decode("lf.a2a.v1.SendMessageRequest", &bytes).unwrap())
            .unwrap();
    let direct = send_request(pb::SendMessageRequest::decode(bytes.as_slice()).unwrap()).unwrap();
    assert_eq!(direct, via_json);

    let get = json!({ "tenant": "acme", "id": "t", "historyLength": 0 });
    let bytes = proto::encode("lf.a2a.v1.GetTaskRequest", &get).unwrap();
    let via_json: TaskIdRequest =
        serde_json::from_value(proto::decode("lf.a2a.v1.GetTaskRequest", &bytes).unwrap()).unwrap();
    let direct = get_request(pb::GetTaskRequest::decode(bytes.as_slice()).unwrap()).unwrap();
    assert_eq!(direct, via_json);
    assert_eq!(direct.history_length, Some(0));
}

#[test]
fn requests_the_model_cannot_hold_are_invalid_params() {
    let no_role = pb::SendMessageRequest {
        message: Some(pb::Message {
            message_id: "m".into(),
            parts: vec![pb::Part::default()],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(
        send_request(no_role),
        Err(A2aError::InvalidParams(_))
    ));
    let empty_part = pb::SendMessageRequest {
        message: Some(pb::Message {
            message_id: "m".into(),
            role: pb::Role::User as i32,
            parts: vec![pb::Part::default()],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(
        send_request(empty_part),
        Err(A2aError::InvalidParams(_))
    ));
    let negative = pb::GetTaskRequest {
        id: "t".into(),
        history_length: Some(-1),
        ..Default::default()
    };
    assert!(matches!(
        get_request(negative),
        Err(A2aError::InvalidParams(_))
    ));
    assert!(matches!(
        send_request(pb::SendMessageRequest::default()),
        Err(A2aError::InvalidParams(_))
    ));
}
