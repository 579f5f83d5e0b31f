use super::*;

#[test]
fn a_list_filtered_by_the_unspecified_state_is_not_filtered() {
    let req: ListTasksRequest =
        serde_json::from_value(json!({ "status": "TASK_STATE_UNSPECIFIED" })).unwrap();
    assert_eq!(req.status, None);
    let req: ListTasksRequest =
        serde_json::from_value(json!({ "status": "TASK_STATE_WORKING" })).unwrap();
    assert_eq!(req.status, Some(TaskState::Working));
    assert!(serde_json::from_value::<ListTasksRequest>(json!({ "status": "BUSY" })).is_err());
}
use serde_json::json;

#[test]
fn a_message_round_trips_in_protojson_and_accepts_snake_case() {
    let m: Message = serde_json::from_value(json!({
        "message_id": "m1", "role": "ROLE_USER", "context_id": "c",
        "parts": [{"text": "ls"}, {"data": {"argv": ["ls"]}, "media_type": "application/json"}]
    }))
    .unwrap();
    assert_eq!(m.text(), "ls");
    let out = serde_json::to_value(&m).unwrap();
    assert_eq!(out["messageId"], "m1");
    assert_eq!(out["contextId"], "c");
    assert_eq!(out["parts"][1]["mediaType"], "application/json");
    assert!(out.get("extensions").is_none());
}

#[test]
fn invalid_messages_are_rejected_by_field() {
    for (bad, why) in [
        (
            json!({"messageId": "m", "role": "user", "parts": [{"text": "x"}]}),
            "ROLE",
        ),
        (
            json!({"messageId": "m", "role": "ROLE_USER", "parts": []}),
            "at least one",
        ),
        (
            json!({"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}),
            "empty",
        ),
        (
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "url": "http://a"}]}),
            "exactly one",
        ),
        (
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "***"}]}),
            "base64",
        ),
        (
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "not a url"}]}),
            "URL",
        ),
        (
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], "extensions": ["x y"]}),
            "URI",
        ),
    ] {
        let e = serde_json::from_value::<Message>(bad.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn stream_responses_use_the_1_0_wrappers_and_state_names() {
    let ev = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state: TaskState::Canceled,
            message: None,
            timestamp: None,
        },
        metadata: None,
    });
    let v = serde_json::to_value(&ev).unwrap();
    assert_eq!(v["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(
        TaskState::from_name("TASK_STATE_INPUT_REQUIRED"),
        Some(TaskState::InputRequired)
    );
    assert!(TaskState::InputRequired.is_interrupted() && !TaskState::InputRequired.is_terminal());
}

#[test]
fn task_views_trim_history_and_omit_artifacts_unless_asked() {
    let msg = |id: &str| Message {
        message_id: id.into(),
        context_id: None,
        task_id: None,
        role: Role::User,
        parts: vec![Part::text("x")],
        metadata: None,
        extensions: vec![],
        reference_task_ids: vec![],
    };
    let task = Task {
        id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state: TaskState::Working,
            message: None,
            timestamp: None,
        },
        artifacts: Some(vec![]),
        history: vec![msg("1"), msg("2"), msg("3")],
        metadata: None,
    };
    let v = task.clone().view(Some(2), false);
    assert_eq!(
        v.history
            .iter()
            .map(|m| m.message_id.as_str())
            .collect::<Vec<_>>(),
        ["2", "3"]
    );
    assert!(v.artifacts.is_none());
    assert!(task.view(Some(0), true).history.is_empty());
}
