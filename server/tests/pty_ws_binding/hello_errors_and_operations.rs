use super::*;

#[tokio::test]
async fn binding_scenario_1_binding_hello_is_the_first_frame() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let c = s.attach(&sid, ADMIN).await;
    assert_eq!(
        c.protocol, "pty-ws.v1",
        "only pty-ws.v1 is echoed, never the bearer entry"
    );
    let h = &c.hello;
    assert_eq!(h["op"], "binding_hello");
    assert_eq!(h["sequence"], 0);
    let p = &h["payload"];
    assert_eq!(
        p["binding_uri"],
        "https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1"
    );
    assert_eq!(p["binding_version"], "1.0.0");
    assert_eq!(
        p["supported_operations"],
        json!([
            "SendMessage",
            "SendStreamingMessage",
            "GetTask",
            "ListTasks",
            "CancelTask",
            "SubscribeToTask"
        ])
    );
    assert_eq!(p["activated_extensions"], json!([]));
    assert_eq!(p["session"]["session_id"], sid.as_str());
    assert!(p["session"]["current_sequence"].is_u64());
    // Managed hosts are offered only when their program is installed.
    let tmux = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let (backends, classes) = if tmux {
        (json!(["native", "tmux"]), json!(["direct", "managed"]))
    } else {
        (json!(["native"]), json!(["direct"]))
    };
    assert_eq!(
        p["session_host"],
        json!({
            "supported_backends": backends, "default_backend": "native",
            "supported_classes": classes, "default_class": "direct",
            "observe_supported": true, "drive_supported": true, "reattach_supported": true,
        })
    );
    assert_eq!(
        p["payload_mode"],
        json!({ "binary": false, "binary_subprotocol": "pty-ws.v1.binary", "json_subprotocol": "pty-ws.v1" })
    );
}

#[tokio::test]
async fn binding_scenario_3_every_error_this_binding_produces_is_reachable_and_mapped() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;

    c.send_raw("{not json").await;
    assert_error(&c.next().await, None, "INVALID_REQUEST");
    c.send_raw(r#"{"op":"ping","id":"x1","ts":"t","sequence":4,"payload":{"client_ts":"t"}}"#)
        .await;
    assert_error(&c.next().await, Some("x1"), "INVALID_REQUEST");
    c.send_raw(r#"{"op":"pty.session_resize","id":"x2","ts":"t","payload":{"cols":0,"rows":9}}"#)
        .await;
    assert_error(&c.next().await, Some("x2"), "INVALID_REQUEST");
    // The envelope table: payload is required.
    c.send_raw(r#"{"op":"pty.request_keyframe","id":"x3","ts":"t"}"#)
        .await;
    assert_error(&c.next().await, Some("x3"), "INVALID_REQUEST");
    let id = c.input("too early").await;
    assert_error(&c.next().await, Some(&id), "INVALID_REQUEST");

    let id = c.send("pty.make_coffee", json!({})).await;
    assert_error(&c.next().await, Some(&id), "UNSUPPORTED_OPERATION");
    let id = c
        .send("SetTaskPushNotificationConfig", json!({ "task_id": "t" }))
        .await;
    let e = c.next().await;
    assert_error(&e, Some(&id), "UNSUPPORTED_OPERATION");
    assert!(error_of(&e).message.contains("JSON-RPC"));
    let id = c.send("SendMessage", json!({ "message": {} })).await;
    let e = c.next().await;
    assert_error(&e, Some(&id), "INVALID_REQUEST");
    let id = c.send("GetTask", json!({ "task_id": "nope" })).await;
    let e = c.expect_op("Error").await;
    assert_error(&e, Some(&id), "TASK_NOT_FOUND");
    let id = c
        .send(
            "pty.join_session",
            json!({ "role": "controller", "session_backend": "screen" }),
        )
        .await;
    let e = c.next().await;
    assert_error(&e, Some(&id), "UNSUPPORTED_OPERATION");
    assert!(
        error_of(&e)
            .message
            .starts_with("session_backend.not_implemented")
    );
    let id = c
        .send(
            "pty.join_session",
            json!({ "role": "controller", "session_backend": "native", "session_class": "managed" }),
        )
        .await;
    let e = c.next().await;
    assert!(
        error_of(&e)
            .message
            .starts_with("session_class.not_implemented")
    );
    assert_eq!(id_of(&e), id);

    let id = c
        .send(
            "pty.session_input",
            json!({ "data": "eA==", "session_id": "someone-else" }),
        )
        .await;
    assert_error(&c.next().await, Some(&id), "PERMISSION_DENIED");

    c.join("observer").await;
    let id = c.input("x").await;
    assert_error(&c.expect_op("Error").await, Some(&id), "PERMISSION_DENIED");
    c.send("pty.request_keyframe", json!({})).await;
    c.expect_kind("Keyframe").await;
    let id = c.send("pty.request_keyframe", json!({})).await;
    let e = c.expect_op("Error").await;
    assert_error(&e, Some(&id), "RATE_LIMITED");
    assert!(error_of(&e).retryable);

    let mut r = s.attach(&sid, ADMIN).await;
    let init = r
        .join_with(
            json!({ "role": "observer" }),
            json!({ "replay_from": 999_999 }),
        )
        .await;
    assert_error(&init[1], None, "REPLAY_OUT_OF_RANGE");

    // UNAUTHENTICATED is refused before the upgrade.
    assert_eq!(
        upgrade_status(&s.ws_url(&sid), &[("Sec-WebSocket-Protocol", "pty-ws.v1")])
            .await
            .err(),
        Some(401)
    );
}

#[tokio::test]
async fn binding_scenario_2_all_six_core_operations_round_trip() {
    let s = TestServer::start(&[]).await;
    let sid = shell(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;

    let id = c.send("SendMessage", text_message("echo over-ws")).await;
    let r = c.expect_op("SendMessage.Response").await;
    assert_eq!(id_of(&r), id);
    let task = task_of(&r);
    assert_eq!(
        (task.status.state, task.context_id.as_str()),
        (TaskState::Completed, sid.as_str())
    );
    assert_eq!(artifact_text(&task), "over-ws\r\n");
    let task_id = task.id;

    c.send(
        "GetTask",
        json!({ "task_id": task_id, "history_length": 0 }),
    )
    .await;
    let got = task_of(&c.expect_op("GetTask.Response").await);
    assert_eq!(got.id, task_id);
    assert!(got.history.is_empty());

    c.send("ListTasks", json!({ "page_size": 10 })).await;
    let ServerOp::ListTasks(listed) = typed(&c.expect_op("ListTasks.Response").await).op else {
        panic!("not a task page");
    };
    assert_eq!(listed.tasks[0].id, task_id);
    assert_eq!(listed.next_page_token, "");

    let id = c
        .send("SendStreamingMessage", text_message("echo streamed-ws"))
        .await;
    let accepted = typed(&c.expect_op("SendStreamingMessage.Accepted").await);
    assert_eq!(accepted.id, id);
    let ServerOp::StreamAccepted(accepted) = accepted.op else {
        panic!("not accepted");
    };
    let updates = updates_until_terminal(&mut c).await;
    let last = task_of(updates.last().unwrap());
    assert_eq!(last.id, accepted.task_id);
    assert_eq!(last.status.state, TaskState::Completed);
    assert_eq!(artifact_text(&last), "streamed-ws\r\n");

    let mut slow = text_message("sleep 0.5; echo late");
    slow["configuration"] = json!({ "returnImmediately": true });
    c.send("SendMessage", slow).await;
    let slow_id = task_of(&c.expect_op("SendMessage.Response").await).id;
    c.send("SubscribeToTask", json!({ "task_id": slow_id }))
        .await;
    assert!(matches!(
        typed(&c.expect_op("SubscribeToTask.Accepted").await).op,
        ServerOp::SubscribeAccepted(_)
    ));
    let updates = updates_until_terminal(&mut c).await;
    assert_eq!(
        task_of(updates.last().unwrap()).status.state,
        TaskState::Completed
    );
    let id = c.send("Unsubscribe", json!({ "task_id": slow_id })).await;
    assert_eq!(id_of(&c.expect_op("Unsubscribe.Response").await), id);

    let mut long = text_message("sleep 100");
    long["configuration"] = json!({ "returnImmediately": true });
    c.send("SendMessage", long).await;
    let long_id = task_of(&c.expect_op("SendMessage.Response").await).id;
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send("CancelTask", json!({ "task_id": long_id })).await;
    let canceled = task_of(&c.expect_op("CancelTask.Response").await);
    assert_eq!(canceled.status.state, TaskState::Canceled);
    let id = c.send("CancelTask", json!({ "task_id": task_id })).await;
    let e = c.expect_op("Error").await;
    assert_error(&e, Some(&id), "TASK_NOT_CANCELABLE");

    // Tasks of other sessions do not exist here, and messages cannot name them.
    let other = shell(&s).await;
    let mut elsewhere = text_message("true");
    elsewhere["message"]["contextId"] = json!(other);
    let id = c.send("SendMessage", elsewhere).await;
    assert_error(&c.expect_op("Error").await, Some(&id), "PERMISSION_DENIED");
}

#[tokio::test]
async fn a_required_extension_is_activated_through_service_parameters() {
    const A202: &str = "https://schemas.a202.org/a2a-ext/commercial/0.1";
    let s = TestServer::start(&["--a202-required"]).await;
    let sid = shell(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let id = c.send("SendMessage", text_message("true")).await;
    let e = c.expect_op("Error").await;
    assert_eq!(id_of(&e), id);
    assert_eq!(
        error_of(&e).a2a_error.details[0].reason,
        "EXTENSION_SUPPORT_REQUIRED",
        "{e}"
    );
    c.send(
        "UpdateServiceParameters",
        json!({ "service_parameters": { "a2a-extensions": [A202] } }),
    )
    .await;
    c.expect_op("UpdateServiceParameters.Response").await;
    c.send("SendMessage", text_message("true")).await;
    let done = task_of(&c.expect_op("SendMessage.Response").await);
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
}

#[tokio::test]
async fn binding_scenario_13_trace_ids_from_the_first_frame_appear_on_every_task_event() {
    let s = TestServer::start(&[]).await;
    let sid = shell(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.send_env(
        "ping",
        json!({ "client_ts": "2026-11-29T00:00:00Z" }),
        json!({ "service_parameters": { "trace_id": "trace-13" } }),
    )
    .await;
    c.expect_op("pong").await;
    c.send("SendStreamingMessage", text_message("echo traced"))
        .await;
    c.expect_op("SendStreamingMessage.Accepted").await;
    let updates = updates_until_terminal(&mut c).await;
    assert!(updates.len() >= 3);
    for u in &updates {
        assert_eq!(trace_id(u), Some("trace-13".into()), "{u}");
    }
    // An update replaces the parameters for what follows.
    c.send(
        "UpdateServiceParameters",
        json!({ "service_parameters": { "trace_id": "trace-14" } }),
    )
    .await;
    c.expect_op("UpdateServiceParameters.Response").await;
    c.send("SendStreamingMessage", text_message("true")).await;
    c.expect_op("SendStreamingMessage.Accepted").await;
    for u in updates_until_terminal(&mut c).await {
        assert_eq!(trace_id(&u), Some("trace-14".into()));
    }
}

#[tokio::test]
async fn binding_8_3_task_updates_are_sequenced_and_a_resubscribe_with_replay_from_gets_the_missed_ones()
 {
    let s = TestServer::start(&[]).await;
    let sid = shell(&s).await;
    // A joined client that streams the task: its updates and its output in one order.
    let mut streamer = s.attach(&sid, ADMIN).await;
    streamer.join("controller").await;
    let task_id = stream_task(
        &mut streamer,
        "for i in 1 2 3 4; do echo step-$i; sleep 0.3; done",
    )
    .await;
    // A second client follows the same task without joining, and drops after two updates.
    let mut follower = s.attach(&sid, ADMIN).await;
    follower
        .send("SubscribeToTask", json!({ "task_id": task_id }))
        .await;
    follower.expect_op("SubscribeToTask.Accepted").await;
    let seen: Vec<Value> = vec![
        follower.expect_op("TaskStatusUpdate").await,
        follower.expect_op("TaskStatusUpdate").await,
    ];
    drop(follower);

    let mut last = 0;
    let mut streamed = Vec::new();
    loop {
        let f = streamer.next().await;
        if let Some(n) = typed(&f).sequence {
            assert!(
                n > last,
                "frames of one connection in sequence order: {n} after {last}"
            );
            last = n;
        }
        if let ServerOp::TaskUpdate(u) = typed(&f).op {
            streamed.push(f);
            if u.task.status.state == TaskState::Completed {
                break;
            }
        }
    }
    // The same event has the same sequence and id for every follower.
    for f in &seen {
        let ServerOp::TaskUpdate(u) = typed(f).op else {
            panic!("not an update: {f}");
        };
        if !matches!(u.delta, StreamResponse::Task(_)) {
            let same = streamed
                .iter()
                .find(|u| id_of(u) == id_of(f))
                .expect("the same update");
            assert_eq!(seq(same), seq(f), "{f}");
        }
    }

    // The follower comes back: every update after the last one it saw, in order, then the
    // end of the task.
    let resume = seq(&seen[1]);
    let mut back = s.attach(&sid, ADMIN).await;
    back.send_env(
        "SubscribeToTask",
        json!({ "task_id": task_id }),
        json!({ "replay_from": resume }),
    )
    .await;
    back.expect_op("SubscribeToTask.Accepted").await;
    let expected: Vec<(u64, String)> = streamed
        .iter()
        .filter(|u| seq(u) > resume)
        .map(|u| (seq(u), id_of(u)))
        .collect();
    assert!(expected.len() >= 3, "{streamed:?}");
    let mut replayed = Vec::new();
    while replayed.len() < expected.len() {
        let f = back.expect_op("TaskStatusUpdate").await;
        replayed.push((seq(&f), id_of(&f)));
    }
    assert_eq!(
        replayed, expected,
        "every update after replay_from, as it first went out"
    );
    assert_eq!(
        task_of(streamed.last().unwrap()).status.state,
        TaskState::Completed
    );

    // Resubscribing while the task runs: the missed updates first, then live ones.
    let task_id = stream_task(
        &mut streamer,
        "for i in 1 2 3 4 5 6; do echo again-$i; sleep 0.3; done",
    )
    .await;
    let mut early = Vec::new();
    while early.len() < 3 {
        let f = streamer.next().await;
        if op_of(&f) == "TaskStatusUpdate" {
            early.push(f);
        }
    }
    let resume = seq(&early[0]);
    let mut again = s.attach(&sid, ADMIN).await;
    again
        .send_env(
            "SubscribeToTask",
            json!({ "task_id": task_id }),
            json!({ "replay_from": resume }),
        )
        .await;
    again.expect_op("SubscribeToTask.Accepted").await;
    let replayed = [
        again.expect_op("TaskStatusUpdate").await,
        again.expect_op("TaskStatusUpdate").await,
    ];
    assert_eq!(
        replayed
            .iter()
            .map(|f| (seq(f), id_of(f)))
            .collect::<Vec<_>>(),
        early[1..]
            .iter()
            .map(|f| (seq(f), id_of(f)))
            .collect::<Vec<_>>(),
        "the updates after replay_from, as they first went out"
    );
    let mut order = vec![seq(&replayed[1])];
    loop {
        let f = again.expect_op("TaskStatusUpdate").await;
        order.push(seq(&f));
        if task_of(&f).status.state == TaskState::Completed {
            break;
        }
    }
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    // A plain join replay carries no task updates: they are the subscribers'.
    let mut joiner = s.attach(&sid, ADMIN).await;
    let joined = joiner
        .join_with(
            json!({ "role": "observer" }),
            json!({ "replay_from": resume }),
        )
        .await;
    assert!(
        joined.iter().all(|f| op_of(f) != "TaskStatusUpdate"),
        "{joined:?}"
    );
}
