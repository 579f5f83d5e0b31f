use super::*;
use proptest::prelude::*;
use serde_json::json;

/// A payload of the fields the executor's verbs read, each holding any kind of value.
fn payload() -> impl Strategy<Value = Value> {
    const FIELDS: [&str; 11] = [
        "cols",
        "rows",
        "data",
        "role",
        "task_id",
        "id",
        "message",
        "limit",
        "state",
        "session_id",
        "client_label",
    ];
    let value = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,10}".prop_map(Value::from),
        Just(serde_json::json!({ "parts": [{ "text": "ls" }], "role": "user" })),
    ];
    prop_oneof![
        prop::collection::btree_map(prop::sample::select(FIELDS.as_slice()), value, 0..5)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        Just(Value::Null),
        Just(serde_json::json!([1, 2])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_frame_makes_the_executor_decoder_panic(
        op in prop::sample::select(OPERATIONS.as_slice()),
        payload in payload(),
        text in ".{0,80}",
    ) {
        let _ = decode(&text, Role::Observer);
        let frame = serde_json::json!({ "op": op, "ts": "2026-12-03T00:00:00Z", "payload": payload });
        let _ = decode(&frame.to_string(), Role::Controller);
    }
}

#[test]
fn a_first_frame_without_an_id_speaks_the_executors_shape() {
    let executor = r#"{"op":"pty.join_session","ts":"2026-01-01T00:00:00Z","payload":{}}"#;
    assert_eq!(Dialect::of_first_frame(executor), Dialect::Executor);
    let spec = r#"{"op":"pty.join_session","id":"1","ts":"t","payload":{"role":"observer"}}"#;
    assert_eq!(Dialect::of_first_frame(spec), Dialect::Spec);
    assert_eq!(Dialect::of_first_frame("not json"), Dialect::Spec);
}

#[test]
fn an_executor_join_without_a_role_asks_for_the_tokens_role() {
    let d = decode(
        r#"{"op":"pty.join_session","payload":{"cols":100,"rows":30}}"#,
        Role::Controller,
    )
    .unwrap();
    let ClientOp::Join(join) = d.op else {
        panic!("{:?}", d.op)
    };
    assert_eq!(join.role, Some(Role::Controller));
    assert_eq!(join.cols.map(|c| c.0), Some(100));
    assert!(!d.envelope.id.is_empty());
}

#[test]
fn executor_a2a_ops_take_the_03_names_and_shapes() {
    let send = r#"{"op":"message/send","payload":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"echo hi"}]}}}"#;
    let ClientOp::Task(TaskOp::SendMessage(req)) = decode(send, Role::Observer).unwrap().op else {
        panic!()
    };
    assert_eq!(req.message.text(), "echo hi");
    let get = r#"{"op":"tasks/get","payload":{"task_id":"t1"}}"#;
    assert!(matches!(decode(get, Role::Observer).unwrap().op,
        ClientOp::Task(TaskOp::GetTask(TaskRef { ref task_id, .. })) if task_id == "t1"));
    let list = r#"{"op":"tasks/list","payload":{"limit":10,"state":"input-required"}}"#;
    let ClientOp::Task(TaskOp::ListTasks(p)) = decode(list, Role::Observer).unwrap().op else {
        panic!()
    };
    assert_eq!(p.page_size, Some(10));
    assert_eq!(p.filter.unwrap().status, Some(TaskState::InputRequired));
    let bad = decode(r#"{"op":"tasks/get","payload":{}}"#, Role::Observer).unwrap_err();
    assert!(matches!(bad, (None, DecodeError::Invalid(_))));
    let unknown = decode(r#"{"op":"tasks/explode","payload":{}}"#, Role::Observer).unwrap_err();
    assert_eq!(unknown.1, DecodeError::Unsupported("tasks/explode".into()));
}

#[test]
fn session_frames_become_top_level_snake_case_ops() {
    let output = crate::sessions::encode_frame(
        7,
        &SessionFrame::Output {
            stream: wire::OutputStream::Stdout,
            data: wire::Base64Bytes(b"hi".to_vec()),
        },
    );
    let out: Value =
        serde_json::from_str(&encode(std::str::from_utf8(&output).unwrap()).unwrap()).unwrap();
    assert_eq!(out["op"], "output");
    assert_eq!(out["seq"], 7);
    assert_eq!(out["payload"], json!({ "data": "aGk=" }));
    assert!(out.get("id").is_none());

    let members = crate::sessions::encode_frame(
        8,
        &SessionFrame::MembershipChanged {
            controllers: vec![wire::ClientRef {
                client_id: "a".into(),
                label: Some("ops".into()),
            }],
            observers: vec![wire::ClientRef {
                client_id: "b".into(),
                label: None,
            }],
        },
    );
    let m: Value =
        serde_json::from_str(&encode(std::str::from_utf8(&members).unwrap()).unwrap()).unwrap();
    assert_eq!(m["op"], "membership_changed");
    assert_eq!(
        m["payload"]["members"],
        json!([{ "client_id": "a", "role": "controller", "label": "ops" }, { "client_id": "b", "role": "observer" }])
    );

    let keyframe = crate::sessions::encode_frame(
        9,
        &SessionFrame::Keyframe {
            snapshot: wire::Base64Bytes(b"\x1b[Hscreen".to_vec()),
            snapshot_format: wire::SNAPSHOT_FORMAT.into(),
            snapshot_cols: 80,
            snapshot_rows: 24,
            anchor_sequence: 8,
        },
    );
    let k: Value =
        serde_json::from_str(&encode(std::str::from_utf8(&keyframe).unwrap()).unwrap()).unwrap();
    assert_eq!(k["op"], "keyframe");
    assert_eq!(k["payload"]["cursor"], 8);
    assert_eq!(
        k["payload"]["frames"][0],
        json!({ "op": "resize", "payload": { "cols": 80, "rows": 24 } })
    );
    assert_eq!(k["payload"]["frames"][1]["op"], "output");
}

#[test]
fn binding_errors_take_dotted_codes_and_a_status() {
    let spec = Envelope::new(
        "Error",
        "x".into(),
        "t".into(),
        serde_json::to_value(wire::server::ErrorPayload::new(
            ErrorCode::PermissionDenied,
            "no",
        ))
        .unwrap(),
    );
    let e: Value = serde_json::from_str(&encode(&spec.to_text()).unwrap()).unwrap();
    assert_eq!(e["op"], "error");
    assert_eq!(e["seq"], Value::Null);
    assert_eq!(
        e["payload"],
        json!({ "code": "pty.permission_denied", "message": "no", "status": 403 })
    );
}
