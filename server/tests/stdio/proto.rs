use super::*;

#[tokio::test]
async fn stdio_proto_carries_the_same_operations_in_protobuf_bodies() {
    use server::bindings::proto::decode;
    let mut p = Parent::spawn(Some("sess-p"), &["--executor", "conformance"]);
    let hello = p.next().await;
    assert_eq!(
        hello["supportedVariants"],
        json!(["stdio-json", "stdio-proto"])
    );
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-p", "selectVariant": "stdio-proto", "accept": true }))
        .await;
    p.send(&json!({ "type": "heartbeat", "sessionId": "sess-p", "ts": 1 }))
        .await;

    p.proto_request(
        "1",
        "SendMessage",
        "lf.a2a.v1.SendMessageRequest",
        message("tck-complete-task-p", "hi"),
    )
    .await;
    let (kind, id, body) = p.proto_next().await;
    assert_eq!((kind.as_str(), id.as_str()), ("response", "1"));
    let sent = decode("lf.a2a.v1.SendMessageResponse", &body).unwrap();
    assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        sent["task"]["metadata"][METADATA_KEY]["sessionId"],
        "sess-p"
    );
    let task_id = sent["task"]["id"].as_str().unwrap().to_owned();

    p.proto_request(
        "2",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": task_id }),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "response");
    assert_eq!(
        decode("lf.a2a.v1.Task", &body).unwrap()["id"],
        task_id.as_str()
    );

    // The same error mapping as stdio-json.
    p.proto_request(
        "3",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": "nope" }),
    )
    .await;
    let (kind, id, body) = p.proto_next().await;
    assert_eq!((kind.as_str(), id.as_str()), ("error", "3"));
    let e = decode("ptyhost.stdio.Error", &body).unwrap();
    assert_eq!(
        (e["code"].as_i64(), e["reason"].as_str()),
        (Some(-32001), Some("TASK_NOT_FOUND"))
    );

    // A stream: stream frames of StreamResponse, then streamEnd.
    p.proto_request(
        "4",
        "SendStreamingMessage",
        "lf.a2a.v1.SendMessageRequest",
        message("tck-stream-001", "go"),
    )
    .await;
    let mut states = Vec::new();
    loop {
        let (kind, id, body) = p.proto_next().await;
        assert_eq!(id, "4");
        if kind == "streamEnd" {
            break;
        }
        assert_eq!(kind, "stream");
        let event = decode("lf.a2a.v1.StreamResponse", &body).unwrap();
        if let Some(s) = event["statusUpdate"]["status"]["state"].as_str() {
            states.push(s.to_owned());
        }
    }
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );

    // cancel ends a stream, not its task.
    p.proto_request(
        "5",
        "SendStreamingMessage",
        "lf.a2a.v1.SendMessageRequest",
        message("test-resubscribe-message-id-p", "long"),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "stream");
    let long = decode("lf.a2a.v1.StreamResponse", &body).unwrap()["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    p.send_raw(&frame_with(
        "application/x-protobuf",
        &[("A2A-Kind", "cancel"), ("A2A-Id", "5")],
        &[],
    ))
    .await;
    loop {
        let (kind, id, _) = p.proto_next().await;
        if (kind.as_str(), id.as_str()) == ("streamEnd", "5") {
            break;
        }
    }
    p.proto_request(
        "6",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": long }),
    )
    .await;
    let (_, _, body) = p.proto_next().await;
    assert_ne!(
        decode("lf.a2a.v1.Task", &body).unwrap()["status"]["state"],
        "TASK_STATE_CANCELED"
    );

    p.proto_request("7", "system/shutdown", "google.protobuf.Empty", json!({}))
        .await;
    let (kind, id, _) = p.proto_next().await;
    assert_eq!((kind.as_str(), id.as_str()), ("response", "7"));
    assert_eq!(p.exit().await.code(), Some(0));
}

#[tokio::test]
async fn stdio_proto_runs_requests_concurrently_cancels_tasks_and_refuses_oversize_frames() {
    use server::bindings::proto::decode;
    let mut p = Parent::spawn(
        Some("sess-q"),
        &["--executor", "conformance", "--max-frame-bytes", "4096"],
    );
    p.next().await;
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-q", "selectVariant": "stdio-proto", "accept": true }))
        .await;
    let mut long = message("test-resubscribe-message-id-q", "long");
    long["configuration"] = json!({ "returnImmediately": true });
    // Two requests in flight; answers carry their ids.
    p.proto_request("a", "SendMessage", "lf.a2a.v1.SendMessageRequest", long)
        .await;
    p.proto_request("b", "ListTasks", "lf.a2a.v1.ListTasksRequest", json!({}))
        .await;
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let (kind, id, body) = p.proto_next().await;
        assert_eq!(kind, "response");
        answers.insert(id, body);
    }
    let sent = decode("lf.a2a.v1.SendMessageResponse", &answers["a"]).unwrap();
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    assert!(decode("lf.a2a.v1.ListTasksResponse", &answers["b"]).is_ok());

    p.proto_request(
        "c",
        "CancelTask",
        "lf.a2a.v1.CancelTaskRequest",
        json!({ "id": id }),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "response");
    assert_eq!(
        decode("lf.a2a.v1.Task", &body).unwrap()["status"]["state"],
        "TASK_STATE_CANCELED"
    );

    // An oversized frame is answered with an Error and ends the session with exit 2.
    p.proto_request(
        "d",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": "x".repeat(5000) }),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "error");
    let e = decode("ptyhost.stdio.Error", &body).unwrap();
    assert_eq!(
        (e["code"].as_i64(), e["message"].as_str()),
        (Some(-32000), Some("Message too large"))
    );
    assert_eq!(p.exit().await.code(), Some(2));
}

#[tokio::test]
async fn stdio_proto_ends_on_eof() {
    let mut p = Parent::spawn(Some("sess-r"), &[]);
    p.next().await;
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-r", "selectVariant": "stdio-proto", "accept": true }))
        .await;
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
    assert!(p.rest().await.is_empty());
}

#[tokio::test]
async fn stdio_a_file_part_is_written_before_its_command_and_referenced_by_a_file_url() {
    let mut p = Parent::ready(&[]).await;
    let script = "echo stdio-$((6*7))\n";
    let params = json!({ "message": { "messageId": "f1", "role": "ROLE_USER", "parts": [
        { "raw": base64::engine::general_purpose::STANDARD.encode(script), "filename": "s.sh" },
        { "text": "sh s.sh" },
    ] } });
    p.request(json!(1), "SendMessage", params).await;
    let answer = p.until(&json!(1), |_| true).await.remove(0);
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    let output = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(output.contains("stdio-42"), "{output}");
    let url = task["history"][0]["parts"][0]["url"].as_str().unwrap();
    let path = url.strip_prefix("file://").expect("a file: URL");
    assert_eq!(std::fs::read_to_string(path).unwrap(), script);
}
