use super::*;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use wire::a2a::{Content, TaskState, TaskStatus};

#[test]
fn messages_and_parts_translate_both_ways() {
    let req = send_params(&json!({
        "message": { "kind": "message", "messageId": "m", "role": "user", "parts": [
            { "kind": "text", "text": "ls" },
            { "kind": "file", "file": { "bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt" } },
            { "kind": "data", "data": { "argv": ["ls"] } }
        ] },
        "configuration": { "blocking": false, "historyLength": 2 }
    }))
    .unwrap();
    let config = req.configuration.clone().unwrap();
    assert!(config.return_immediately);
    assert_eq!(config.history_length, Some(2));
    assert_eq!(req.message.parts[1].content, Content::Raw(b"hi".to_vec()));
    let back = message(&req.message);
    assert_eq!(back["role"], "user");
    assert_eq!(back["parts"][1]["file"]["name"], "a.txt");
    for bad in [
        json!({ "message": { "messageId": "m", "role": "ROLE_USER", "parts": [{ "kind": "text", "text": "x" }] } }),
        json!({ "message": { "messageId": "m", "role": "user", "parts": [{ "text": "x" }] } }),
        json!({ "message": { "messageId": "m", "role": "user", "parts": [] } }),
    ] {
        assert!(send_params(&bad).is_err(), "{bad}");
    }
}

#[test]
fn rest_0_3_uses_content_nested_parts_and_cancelled() {
    let req = rest::send_request(&json!({ "request": { "messageId": "m", "role": "ROLE_USER", "content": [
        { "text": "ls" }, { "file": { "fileWithUri": "https://x/y", "mimeType": "text/plain" } }, { "data": { "data": { "a": 1 } } }
    ] }, "configuration": { "blocking": false } }))
    .unwrap();
    assert_eq!(
        req.message.parts[1].content,
        Content::Url("https://x/y".into())
    );
    assert_eq!(
        req.message.parts[2].content,
        Content::Data(json!({ "a": 1 }))
    );
    assert!(req.configuration.unwrap().return_immediately);
    // The proto's bool: a configuration without `blocking` (false is not printed)
    // returns at once; no configuration, or `blocking: true`, blocks.
    let m = json!({ "message_id": "m", "role": "ROLE_USER", "content": [{ "text": "ls" }] });
    for (config, immediate) in [
        (Some(json!({ "history_length": 3 })), true),
        (Some(json!({ "blocking": true })), false),
        (None, false),
    ] {
        let mut v = json!({ "request": m });
        if let Some(c) = config {
            v["configuration"] = c;
        }
        let c = rest::send_request(&v).unwrap().configuration.unwrap();
        assert_eq!(c.return_immediately, immediate, "{v}");
    }
    let back = rest::message(&req.message);
    assert!(back.get("parts").is_none());
    assert_eq!(back["content"][1]["file"]["fileWithUri"], "https://x/y");
    assert_eq!(back["content"][2]["data"]["data"]["a"], 1);
    let task = Task {
        id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state: TaskState::Canceled,
            message: None,
            timestamp: None,
        },
        artifacts: None,
        history: vec![req.message],
        metadata: None,
    };
    let v = rest::task(&task);
    assert_eq!(v["status"]["state"], "TASK_STATE_CANCELLED");
    assert!(v["history"][0]["content"].is_array());
}

#[test]
fn states_are_kebab_case_and_status_updates_say_final() {
    let state = |s: TaskState| serde_json::to_value(shapes::TaskState::from(s)).unwrap();
    assert_eq!(state(TaskState::InputRequired), "input-required");
    assert_eq!(state(TaskState::Canceled), "canceled");
    let e = event(&StreamResponse::StatusUpdate(
        wire::a2a::TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            metadata: None,
        },
    ));
    assert_eq!(
        (e["kind"].as_str(), e["final"].as_bool()),
        (Some("status-update"), Some(true))
    );
}

#[test]
fn rest_0_3_file_bytes_are_base64_of_base64_as_a2a_sdk_sends_them_and_once_is_taken_too() {
    let content = STANDARD.encode(b"echo hi\n");
    let part_in = |v: Value| -> Value {
        let part: shapes::rest::Part = serde_json::from_value(v).unwrap();
        serde_json::to_value(wire::a2a::Part::try_from(part).unwrap()).unwrap()
    };
    let twice = json!({ "file": { "fileWithBytes": STANDARD.encode(&content), "name": "s.sh" } });
    assert_eq!(part_in(twice)["raw"], content.as_str());
    let binary = STANDARD.encode([0xff, 0x00, 0x9f]);
    let once = json!({ "file": { "fileWithBytes": binary } });
    assert_eq!(part_in(once)["raw"], binary.as_str());
    let back = rest::task(&Task {
        id: "t".into(),
        context_id: "c".into(),
        status: wire::a2a::TaskStatus {
            state: wire::a2a::TaskState::Completed,
            message: None,
            timestamp: None,
        },
        artifacts: Some(vec![wire::a2a::Artifact {
            artifact_id: "a".into(),
            name: None,
            description: None,
            parts: vec![serde_json::from_value(json!({ "raw": content })).unwrap()],
            metadata: None,
        }]),
        history: Vec::new(),
        metadata: None,
    });
    let sent = back["artifacts"][0]["parts"][0]["file"]["fileWithBytes"]
        .as_str()
        .unwrap();
    assert_eq!(STANDARD.decode(sent).unwrap(), content.as_bytes());
}
