use super::*;

#[tokio::test]
async fn stdio_without_a_session_id_is_denied_with_exit_4() {
    let mut p = Parent::spawn(None, &[]);
    assert_eq!(p.exit().await.code(), Some(4));
    assert!(p.rest().await.is_empty(), "nothing on stdout");
}

#[tokio::test]
async fn stdio_handshake_unary_concurrent_and_streaming_requests_carry_the_session_stamp() {
    let mut p = Parent::spawn(Some("sess-1"), &["--executor", "conformance"]);
    let hello = p.next().await;
    assert_eq!(hello["protocol"], "a2a-stdio");
    assert_eq!(hello["protocolVersion"], "1.0");
    assert_eq!(hello["sessionId"], "sess-1");
    assert_eq!(hello["supportedVariants"][0], "stdio-json");
    assert!(hello["pid"].as_u64().is_some());
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-1", "selectVariant": "stdio-json", "accept": true }))
        .await;
    p.send(&json!({ "type": "heartbeat", "sessionId": "sess-1", "ts": 1 }))
        .await;

    // Two requests in flight at once; answers carry their ids.
    p.request(
        json!("a"),
        "SendMessage",
        message("tck-complete-task-1", "hi"),
    )
    .await;
    p.request(json!(2), "ListTasks", json!({})).await;
    let (mut sent, mut listed) = (None, None);
    while sent.is_none() || listed.is_none() {
        let f = p.next().await;
        match &f["id"] {
            id if *id == json!("a") => sent = Some(f),
            id if *id == json!(2) => listed = Some(f),
            _ => {}
        }
    }
    let task = &sent.unwrap()["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let stamp = &task["metadata"][METADATA_KEY];
    assert_eq!(
        (stamp["sessionId"].as_str(), stamp["variant"].as_str()),
        (Some("sess-1"), Some("stdio-json"))
    );
    assert_eq!(
        task["history"][0]["metadata"][METADATA_KEY]["sessionId"],
        "sess-1"
    );
    assert!(listed.unwrap()["result"]["tasks"].is_array());
    let id = task["id"].as_str().unwrap().to_owned();
    p.request(json!(3), "GetTask", json!({ "id": id })).await;
    assert_eq!(
        p.until(&json!(3), |_| true).await[0]["result"]["id"],
        id.as_str()
    );

    // A stream: results shaped like unary ones, then streamEnd.
    p.request(
        json!(7),
        "SendStreamingMessage",
        message("tck-stream-001", "go"),
    )
    .await;
    let frames = p.until(&json!(7), |f| f.get("streamEnd").is_some()).await;
    assert!(frames[0]["result"]["task"].is_object());
    assert_eq!(
        frames[frames.len() - 2]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Events carry the task's metadata (runtime/v1's), not the session stamp.
    assert!(
        frames[frames.len() - 2]["result"]["statusUpdate"]["metadata"]
            .get(METADATA_KEY)
            .is_none()
    );

    // system/shutdown answers, then the process exits 0 with nothing more on stdout.
    p.request(json!(9), "system/shutdown", json!({})).await;
    assert_eq!(p.until(&json!(9), |_| true).await[0]["result"], json!({}));
    assert_eq!(p.exit().await.code(), Some(0));
    p.rest().await;
}

#[tokio::test]
async fn stdio_cancel_stream_ends_the_stream_but_not_the_task() {
    let mut p = Parent::ready(&["--executor", "conformance"]).await;
    p.request(
        json!(1),
        "SendStreamingMessage",
        message("test-resubscribe-message-id-1", "long"),
    )
    .await;
    let first = p.until(&json!(1), |_| true).await.remove(0);
    let task_id = first["result"]["task"]["id"].as_str().unwrap().to_owned();
    p.send(&json!({ "jsonrpc": "2.0", "id": 1, "cancelStream": true }))
        .await;
    p.until(&json!(1), |f| f.get("streamEnd") == Some(&json!(true)))
        .await;
    p.request(json!(2), "GetTask", json!({ "id": task_id }))
        .await;
    let task = p.until(&json!(2), |_| true).await.remove(0);
    assert_ne!(
        task["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{task}"
    );
    // EOF is the shutdown signal.
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
}

#[tokio::test]
async fn a_required_extension_is_activated_by_the_a2a_sp_variable() {
    const A202: &str = "https://schemas.a202.org/a2a-ext/commercial/0.1";
    let args = ["--executor", "conformance", "--a202-required"];
    let mut bare = Parent::ready(&args).await;
    bare.request(json!(1), "ListTasks", json!({})).await;
    let e = bare.until(&json!(1), |_| true).await.remove(0);
    assert_eq!(e["error"]["code"], -32008, "{e}");
    let mut activated = Parent::ready_env(&args, &[("A2A_SP_A2A_EXTENSIONS", A202)]).await;
    activated.request(json!(1), "ListTasks", json!({})).await;
    let ok = activated.until(&json!(1), |_| true).await.remove(0);
    assert!(ok["result"]["tasks"].is_array(), "{ok}");
}

#[tokio::test]
async fn stdio_errors_keep_ids_unknown_methods_go_on_and_a_parse_error_ends_with_exit_2() {
    let mut p = Parent::ready(&[]).await;
    p.request(json!(1), "Teleport", json!({})).await;
    let e = p.until(&json!(1), |_| true).await.remove(0);
    assert_eq!(e["error"]["code"], -32601);
    p.request(json!(2), "GetTask", json!({ "id": "nope" }))
        .await;
    let e = p.until(&json!(2), |_| true).await.remove(0);
    assert_eq!(
        (
            e["error"]["code"].as_i64(),
            e["error"]["data"][0]["reason"].as_str()
        ),
        (Some(-32001), Some("TASK_NOT_FOUND"))
    );
    p.send(&json!({ "jsonrpc": "2.0", "method": "GetTask" }))
        .await;
    assert_eq!(p.next().await["error"]["code"], -32600);
    p.send_raw(&frame(b"{not json")).await;
    let e = p.next().await;
    assert_eq!(
        (e["error"]["code"].as_i64(), &e["id"]),
        (Some(-32700), &Value::Null)
    );
    assert_eq!(p.exit().await.code(), Some(2));
}

#[tokio::test]
async fn stdio_an_oversized_frame_is_refused_and_ends_with_exit_2() {
    let mut p = Parent::ready(&["--max-frame-bytes", "100"]).await;
    p.request(json!(1), "GetTask", json!({ "id": "x".repeat(200) }))
        .await;
    let e = p.next().await;
    assert_eq!(
        (e["error"]["code"].as_i64(), e["error"]["message"].as_str()),
        (Some(-32000), Some("Message too large"))
    );
    assert_eq!(p.exit().await.code(), Some(2));
}

#[tokio::test]
async fn stdio_handshake_refusals_have_their_exit_codes() {
    let mut declined = Parent::spawn(Some("s"), &[]);
    declined.next().await;
    declined
        .send(&json!({ "type": "handshakeAck", "sessionId": "s", "selectVariant": "stdio-json", "accept": false }))
        .await;
    assert_eq!(declined.exit().await.code(), Some(0));

    let mut unoffered = Parent::spawn(Some("s"), &[]);
    unoffered.next().await;
    unoffered
        .send(&json!({ "type": "handshakeAck", "sessionId": "s", "selectVariant": "stdio-xml", "accept": true }))
        .await;
    assert_eq!(unoffered.exit().await.code(), Some(2));

    let mut stranger = Parent::spawn(Some("s"), &[]);
    stranger.next().await;
    stranger
        .send(&json!({ "type": "handshakeAck", "sessionId": "another", "selectVariant": "stdio-json", "accept": true }))
        .await;
    assert_eq!(
        stranger.exit().await.code(),
        Some(2),
        "a handshakeAck for another session"
    );

    let mut twice = Parent::ready(&[]).await;
    twice
        .send(&json!({ "type": "handshake", "protocol": "a2a-stdio" }))
        .await;
    assert_eq!(twice.exit().await.code(), Some(2));

    let mut left = Parent::spawn(Some("s"), &[]);
    left.next().await;
    drop(left.stdin.take());
    assert_eq!(
        left.exit().await.code(),
        Some(0),
        "the parent left before the ack"
    );
}

#[tokio::test]
async fn stdio_runs_shell_commands_as_tasks() {
    let mut p = Parent::ready(&[]).await;
    p.request(
        json!(1),
        "SendMessage",
        message("m1", "echo from-stdio-$((40+2))"),
    )
    .await;
    let reply = p.until(&json!(1), |_| true).await.remove(0);
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "from-stdio-42\r\n"
    );
    assert_eq!(
        task["artifacts"][0]["metadata"][METADATA_KEY]["sessionId"],
        "sess-1"
    );
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn stdio_cancel_task_cancels_a_running_task() {
    let mut p = Parent::ready(&["--executor", "conformance"]).await;
    let mut params = message("test-resubscribe-message-id-2", "long");
    params["configuration"] = json!({ "returnImmediately": true });
    p.request(json!(1), "SendMessage", params).await;
    let sent = p.until(&json!(1), |_| true).await.remove(0);
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    p.request(json!(2), "CancelTask", json!({ "id": id })).await;
    let canceled = p.until(&json!(2), |_| true).await.remove(0);
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
}
