//! pty-ws/v1 §13 conformance scenarios this server supports today, plus the binding's
//! upgrade, auth and persistence rules, against the real server.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

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

/// Checks an `Error` frame: echoed id, code, populated canonical A2A error.
fn assert_error(frame: &Value, id: Option<&str>, code: &str) {
    assert_eq!(frame["op"], "Error", "{frame}");
    if let Some(id) = id {
        assert_eq!(frame["id"], id);
    }
    let p = &frame["payload"];
    assert_eq!(p["code"], code);
    assert!(!p["message"].as_str().unwrap().is_empty());
    assert!(p["retryable"].is_boolean());
    assert_eq!(p["a2a_error"]["details"][0]["reason"], code);
    assert_eq!(
        p["a2a_error"]["details"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    assert!(p["a2a_error"]["status"].is_string() && p["a2a_error"]["code"].is_u64());
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
    assert!(
        e["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON-RPC")
    );
    let id = c.send("SendMessage", json!({ "message": {} })).await;
    let e = c.next().await;
    assert_error(&e, Some(&id), "INVALID_REQUEST");
    let id = c.send("GetTask", json!({ "task_id": "nope" })).await;
    let e = c.expect_op("Error").await;
    assert_error(&e, Some(&id), "TASK_NOT_FOUND");
    assert_eq!(
        e["payload"]["a2a_error"]["details"][0]["reason"],
        "TASK_NOT_FOUND"
    );
    let id = c
        .send(
            "pty.join_session",
            json!({ "role": "controller", "session_backend": "screen" }),
        )
        .await;
    let e = c.next().await;
    assert_error(&e, Some(&id), "UNSUPPORTED_OPERATION");
    assert!(
        e["payload"]["message"]
            .as_str()
            .unwrap()
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
        e["payload"]["message"]
            .as_str()
            .unwrap()
            .starts_with("session_class.not_implemented")
    );
    assert_eq!(e["id"], id.as_str());

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
    assert_eq!(e["payload"]["retryable"], true);

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

/// A shell session, for A2A tasks on this binding.
async fn shell(s: &TestServer) -> String {
    s.create_session(json!({})).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn text_message(text: &str) -> Value {
    json!({ "message": { "messageId": format!("ws-{text}"), "role": "ROLE_USER", "parts": [{ "text": text }] } })
}

/// Starts `command` as a streamed task on `c`; returns the task's id.
async fn stream_task(c: &mut Client, command: &str) -> String {
    c.send("SendStreamingMessage", text_message(command)).await;
    let accepted = c.expect_op("SendStreamingMessage.Accepted").await;
    accepted["payload"]["task_id"].as_str().unwrap().to_owned()
}

/// Reads TaskStatusUpdate frames until the task is terminal; returns them.
async fn updates_until_terminal(c: &mut Client) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let f = c.expect_op("TaskStatusUpdate").await;
        let state = f["payload"]["task"]["status"]["state"]
            .as_str()
            .unwrap()
            .to_owned();
        frames.push(f);
        if [
            "TASK_STATE_COMPLETED",
            "TASK_STATE_FAILED",
            "TASK_STATE_CANCELED",
        ]
        .contains(&state.as_str())
        {
            return frames;
        }
    }
}

#[tokio::test]
async fn binding_scenario_2_all_six_core_operations_round_trip() {
    let s = TestServer::start(&[]).await;
    let sid = shell(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;

    let id = c.send("SendMessage", text_message("echo over-ws")).await;
    let r = c.expect_op("SendMessage.Response").await;
    assert_eq!(r["id"], id.as_str());
    let task = &r["payload"]["task"];
    assert_eq!(
        (task["status"]["state"].as_str(), task["contextId"].as_str()),
        (Some("TASK_STATE_COMPLETED"), Some(sid.as_str()))
    );
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "over-ws\r\n");
    let task_id = task["id"].as_str().unwrap().to_owned();

    c.send(
        "GetTask",
        json!({ "task_id": task_id, "history_length": 0 }),
    )
    .await;
    let got = c.expect_op("GetTask.Response").await;
    assert_eq!(got["payload"]["task"]["id"], task_id.as_str());
    assert!(got["payload"]["task"].get("history").is_none());

    c.send("ListTasks", json!({ "page_size": 10 })).await;
    let listed = c.expect_op("ListTasks.Response").await;
    assert_eq!(listed["payload"]["tasks"][0]["id"], task_id.as_str());
    assert_eq!(listed["payload"]["next_page_token"], "");

    let id = c
        .send("SendStreamingMessage", text_message("echo streamed-ws"))
        .await;
    let accepted = c.expect_op("SendStreamingMessage.Accepted").await;
    assert_eq!(accepted["id"], id.as_str());
    let updates = updates_until_terminal(&mut c).await;
    let last = &updates.last().unwrap()["payload"]["task"];
    assert_eq!(last["id"], accepted["payload"]["task_id"]);
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(last["artifacts"][0]["parts"][0]["text"], "streamed-ws\r\n");

    let mut slow = text_message("sleep 0.5; echo late");
    slow["configuration"] = json!({ "returnImmediately": true });
    c.send("SendMessage", slow).await;
    let started = c.expect_op("SendMessage.Response").await;
    let slow_id = started["payload"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    c.send("SubscribeToTask", json!({ "task_id": slow_id }))
        .await;
    assert!(c.expect_op("SubscribeToTask.Accepted").await["payload"]["current_sequence"].is_u64());
    let updates = updates_until_terminal(&mut c).await;
    assert_eq!(
        updates.last().unwrap()["payload"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let id = c.send("Unsubscribe", json!({ "task_id": slow_id })).await;
    assert_eq!(c.expect_op("Unsubscribe.Response").await["id"], id.as_str());

    let mut long = text_message("sleep 100");
    long["configuration"] = json!({ "returnImmediately": true });
    c.send("SendMessage", long).await;
    let long_id = c.expect_op("SendMessage.Response").await["payload"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send("CancelTask", json!({ "task_id": long_id })).await;
    let canceled = c.expect_op("CancelTask.Response").await;
    assert_eq!(
        canceled["payload"]["task"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
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
    assert_eq!(e["id"], id);
    assert_eq!(
        e["payload"]["a2a_error"]["details"][0]["reason"], "EXTENSION_SUPPORT_REQUIRED",
        "{e}"
    );
    c.send(
        "UpdateServiceParameters",
        json!({ "service_parameters": { "a2a-extensions": [A202] } }),
    )
    .await;
    c.expect_op("UpdateServiceParameters.Response").await;
    c.send("SendMessage", text_message("true")).await;
    let done = c.expect_op("SendMessage.Response").await;
    assert_eq!(
        done["payload"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
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
        assert_eq!(u["service_parameters"]["trace_id"], "trace-13", "{u}");
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
        assert_eq!(u["service_parameters"]["trace_id"], "trace-14");
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
        if let Some(n) = f["sequence"].as_u64() {
            assert!(
                n > last,
                "frames of one connection in sequence order: {n} after {last}"
            );
            last = n;
        }
        if f["op"] == "TaskStatusUpdate" {
            let state = f["payload"]["task"]["status"]["state"].clone();
            streamed.push(f);
            if state == "TASK_STATE_COMPLETED" {
                break;
            }
        }
    }
    // The same event has the same sequence and id for every follower.
    for f in &seen {
        if f["payload"]["delta"].get("task").is_none() {
            let same = streamed
                .iter()
                .find(|u| u["id"] == f["id"])
                .expect("the same update");
            assert_eq!(same["sequence"], f["sequence"], "{f}");
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
    let expected: Vec<(u64, Value)> = streamed
        .iter()
        .filter(|u| seq(u) > resume)
        .map(|u| (seq(u), u["id"].clone()))
        .collect();
    assert!(expected.len() >= 3, "{streamed:?}");
    let mut replayed = Vec::new();
    while replayed.len() < expected.len() {
        let f = back.expect_op("TaskStatusUpdate").await;
        replayed.push((seq(&f), f["id"].clone()));
    }
    assert_eq!(
        replayed, expected,
        "every update after replay_from, as it first went out"
    );
    assert_eq!(
        streamed.last().unwrap()["payload"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
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
        if f["op"] == "TaskStatusUpdate" {
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
            .map(|f| (seq(f), f["id"].clone()))
            .collect::<Vec<_>>(),
        early[1..]
            .iter()
            .map(|f| (seq(f), f["id"].clone()))
            .collect::<Vec<_>>(),
        "the updates after replay_from, as they first went out"
    );
    let mut order = vec![seq(&replayed[1])];
    loop {
        let f = again.expect_op("TaskStatusUpdate").await;
        order.push(seq(&f));
        if f["payload"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED" {
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
        joined.iter().all(|f| f["op"] != "TaskStatusUpdate"),
        "{joined:?}"
    );
}

#[tokio::test]
async fn binding_scenario_4_reconnect_with_replay_from_receives_the_frames_after_it() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut writer = s.attach(&sid, ADMIN).await;
    writer.join("controller").await;
    let mut reader = s.attach(&sid, ADMIN).await;
    reader.join("observer").await;
    writer.input("first\n").await;
    let n = seq(reader.output_until("first\r\nfirst").await.last().unwrap());
    drop(reader);

    writer.input("second\n").await;
    let mut after_n: Vec<Value> = Vec::new();
    after_n.extend(writer.output_until("second\r\nsecond").await);
    let m = seq(after_n.last().unwrap());

    let mut back = s.attach(&sid, ADMIN).await;
    let init = back
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": n }))
        .await;
    let replayed: Vec<&Value> = init.iter().filter(|f| seq(f) > n && seq(f) <= m).collect();
    // Every broadcast frame the writer saw in (N, M] comes back, identical and in order.
    let expected: Vec<&Value> = after_n.iter().filter(|f| seq(f) > n).collect();
    for f in &expected {
        assert!(replayed.contains(f), "missing replayed frame {f}");
    }
    assert!(replayed.windows(2).all(|w| seq(w[0]) < seq(w[1])));
}

#[tokio::test]
async fn binding_scenario_5_replay_older_than_retention_is_out_of_range_then_keyframe() {
    let s = TestServer::start(&["--replay-frames", "3", "--replay-retention", "0"]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    for i in 0..20 {
        c.input(&format!("{i}\n")).await;
        c.output_until(&format!("{i}\r\n{i}")).await;
    }
    s.wait_until(&sid, |v| v["replay_floor"].as_u64() > Some(2))
        .await;
    let mut back = s.attach(&sid, ADMIN).await;
    let init = back
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": 2 }))
        .await;
    assert_error(&init[1], None, "REPLAY_OUT_OF_RANGE");
    assert_eq!(kind(&init[2]), "Keyframe");
}

#[tokio::test]
async fn binding_scenario_6_upgrade_without_a_valid_bearer_is_refused_with_401() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let url = s.ws_url(&sid);
    let proto = ("Sec-WebSocket-Protocol", "pty-ws.v1");
    assert_eq!(
        upgrade_status(&url, &[proto]).await.err(),
        Some(401),
        "no bearer"
    );
    assert_eq!(
        bearer_refusal(&url, "pth_not-a-real-token").await,
        Some(401),
        "unknown"
    );
    assert_eq!(
        upgrade_status(&url, &[proto, ("Authorization", "Bearer nope")])
            .await
            .err(),
        Some(401)
    );

    let expiring = s
        .token_cli(&["create", "--scope", "pty:control", "--ttl", "1s"])
        .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        bearer_refusal(&url, expiring.trim()).await,
        Some(401),
        "expired"
    );

    let revoked = s.token("pty:control", None).await;
    let list = s.token_cli(&["list"]).await;
    let id = list.lines().last().unwrap().split('\t').next().unwrap();
    s.token_cli(&["revoke", id]).await;
    assert_eq!(bearer_refusal(&url, &revoked).await, Some(401), "revoked");

    // Both carriers work for a valid token; a token in the query is refused outright.
    let auth = format!("Bearer {ADMIN}");
    assert!(
        upgrade_status(&url, &[proto, ("Authorization", &auth)])
            .await
            .is_ok()
    );
    assert_eq!(bearer_refusal(&url, ADMIN).await, None);
    let sub = bearer_protocols(ADMIN);
    let with_query = format!("{url}?access_token={ADMIN}");
    assert_eq!(
        upgrade_status(&with_query, &[("Sec-WebSocket-Protocol", &sub)])
            .await
            .err(),
        Some(400)
    );
}

#[tokio::test]
async fn binding_scenario_7_observe_scope_watches_and_replays_but_cannot_control() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let observe = s.token("pty:observe", None).await;
    let control = s.token("pty:control", None).await;

    let mut ctl = s.attach(&sid, &control).await;
    ctl.join("controller").await;
    ctl.input("visible\n").await;
    let n = seq(ctl.output_until("visible\r\nvisible").await.last().unwrap());

    let mut obs = s.attach(&sid, &observe).await;
    let id = obs
        .send("pty.join_session", json!({ "role": "controller" }))
        .await;
    assert_error(&obs.next().await, Some(&id), "PERMISSION_DENIED");
    let init = obs
        .join_with(
            json!({ "role": "observer" }),
            json!({ "replay_from": n - 1 }),
        )
        .await;
    assert!(init.iter().any(|f| seq(f) == n), "replayed");
    obs.send("pty.request_keyframe", json!({})).await;
    obs.expect_kind("Keyframe").await;
    for (op, payload) in [
        ("pty.session_input", json!({ "data": "eA==" })),
        ("pty.session_resize", json!({ "cols": 20, "rows": 20 })),
        ("pty.request_role", json!({ "role": "controller" })),
    ] {
        let id = obs.send(op, payload).await;
        assert_error(
            &obs.expect_op("Error").await,
            Some(&id),
            "PERMISSION_DENIED",
        );
    }
    ctl.input("still mine\n").await;
    obs.output_until("still mine").await;
}

#[tokio::test]
async fn binding_scenario_8_conflicting_or_missing_subprotocol_is_400_and_unknown_session_404() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let auth = format!("Bearer {ADMIN}");
    let url = s.ws_url(&sid);
    for protocols in [None, Some("graphql-ws"), Some("pty-ws.v2, graphql-ws")] {
        let mut headers = vec![("Authorization", auth.as_str())];
        if let Some(p) = protocols {
            headers.push(("Sec-WebSocket-Protocol", p));
        }
        assert_eq!(
            upgrade_status(&url, &headers).await.err(),
            Some(400),
            "{protocols:?}"
        );
    }
    let proto = ("Sec-WebSocket-Protocol", "graphql-ws, pty-ws.v1");
    assert!(
        upgrade_status(&url, &[proto, ("Authorization", &auth)])
            .await
            .is_ok()
    );

    let unknown = s.ws_url("01900000-0000-7000-8000-000000000000");
    assert_eq!(
        upgrade_status(&unknown, &[proto, ("Authorization", &auth)])
            .await
            .err(),
        Some(404)
    );
    let other_instance = url.replace("/agents/local/", "/agents/elsewhere/");
    assert_eq!(
        upgrade_status(&other_instance, &[proto, ("Authorization", &auth)])
            .await
            .err(),
        Some(404)
    );
    // A token bound to another session learns nothing: 404, not 403.
    let other = cat_session(&s).await;
    let bound = format!("Bearer {}", s.token("pty:control", Some(&other)).await);
    assert_eq!(
        upgrade_status(&url, &[proto, ("Authorization", &bound)])
            .await
            .err(),
        Some(404)
    );
    // The default instance is also served at the root.
    let root = format!("ws://{}/sessions/{sid}/attach", s.addr);
    assert!(
        upgrade_status(&root, &[proto, ("Authorization", &auth)])
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn browser_upgrades_from_foreign_origins_are_refused_with_403() {
    let s = TestServer::start(&["--allowed-origin", "https://ops.example"]).await;
    let sid = cat_session(&s).await;
    let url = s.ws_url(&sid);
    let proto = bearer_protocols(ADMIN);
    let status = |origin: Option<String>| {
        let (url, proto) = (url.clone(), proto.clone());
        async move {
            let mut headers = vec![("Sec-WebSocket-Protocol", proto.as_str())];
            if let Some(o) = origin.as_deref() {
                headers.push(("Origin", o));
            }
            upgrade_status(&url, &headers).await.err()
        }
    };
    assert_eq!(
        status(Some(format!("http://{}", s.addr))).await,
        None,
        "the server's own origin"
    );
    assert_eq!(
        status(Some("https://ops.example".into())).await,
        None,
        "an allowed origin"
    );
    assert_eq!(status(Some("https://evil.example".into())).await, Some(403));
    assert_eq!(status(None).await, None, "no Origin: not a browser");
}

#[tokio::test]
async fn plain_ws_on_a_non_loopback_address_is_refused_unless_allowed() {
    let proto = bearer_protocols(ADMIN);
    let headers = [("Sec-WebSocket-Protocol", proto.as_str())];
    let s = TestServer::start(&["--listen", "0.0.0.0:0"]).await;
    let sid = cat_session(&s).await;
    assert_eq!(
        upgrade_status(&s.ws_url(&sid), &headers).await.err(),
        Some(403)
    );
    let allowed = TestServer::start(&["--listen", "0.0.0.0:0", "--allow-insecure-ws"]).await;
    let sid = cat_session(&allowed).await;
    assert!(
        upgrade_status(&allowed.ws_url(&sid), &headers)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_resubscribe_replays_task_updates_the_ring_no_longer_holds_from_the_store() {
    // A ring of four frames: the task's output pushes its updates out to the store.
    let s = TestServer::start(&["--replay-frames", "4"]).await;
    let sid = shell(&s).await;
    let mut streamer = s.attach(&sid, ADMIN).await;
    streamer.join("controller").await;
    let task_id = stream_task(
        &mut streamer,
        "for i in $(seq 1 400); do echo line-$i; sleep 0.005; done",
    )
    .await;
    let mut streamed = Vec::new();
    loop {
        let f = streamer.next().await;
        if f["op"] == "TaskStatusUpdate" {
            let done = f["payload"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED";
            streamed.push((seq(&f), f["id"].clone()));
            if done {
                break;
            }
        }
    }
    // More updates than the store is read for at a time, all long gone from the ring.
    assert!(streamed.len() > 256, "{} updates", streamed.len());
    // From just before the first update the streamer saw (one may come before `Accepted`).
    let mut back = s.attach(&sid, ADMIN).await;
    back.send_env(
        "SubscribeToTask",
        json!({ "task_id": task_id }),
        json!({ "replay_from": streamed[0].0 - 1 }),
    )
    .await;
    back.expect_op("SubscribeToTask.Accepted").await;
    let mut replayed = Vec::new();
    while replayed.len() < streamed.len() {
        let f = back.expect_op("TaskStatusUpdate").await;
        replayed.push((seq(&f), f["id"].clone()));
    }
    assert_eq!(replayed, streamed, "every update, as it first went out");
}

#[tokio::test]
async fn a_request_that_is_no_websocket_upgrade_is_refused_in_http_s_words_and_joins_nothing() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let proto = bearer_protocols(ADMIN);
    // A plain GET with a good bearer and subprotocol: 426, saying what the route takes.
    let plain = s
        .http
        .get(s.ws_url(&sid).replace("ws://", "http://"))
        .header("Sec-WebSocket-Protocol", &proto)
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 426);
    assert!(plain.text().await.unwrap().contains("WebSocket upgrade"));
    // An upgrade in a WebSocket version other than 13: 400.
    let headers = [
        ("Sec-WebSocket-Protocol", proto.as_str()),
        ("Sec-WebSocket-Version", "8"),
    ];
    assert_eq!(
        upgrade_status(&s.ws_url(&sid), &headers).await.err(),
        Some(400)
    );
    let (_, session) = s.get(&format!("/sessions/{sid}"), ADMIN).await;
    assert_eq!(session["observers"], 0, "{session}");
    assert_eq!(session["controllers"], 0, "{session}");
    // The same upgrade in version 13 goes through.
    let ws = upgrade_status(&s.ws_url(&sid), &headers[..1])
        .await
        .unwrap();
    drop(ws);
}

#[tokio::test]
async fn binding_scenario_11_json_clients_get_base64_output_and_send_session_input() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    c.send("pty.session_input", json!({ "data": "w6kg4oKsIOS4rQo=" }))
        .await; // "é € 中\n"
    let frames = c.output_until("中").await;
    let out = frames.iter().find(|f| kind(f) == "Output").unwrap();
    assert_eq!(out["payload"]["stream"], "stdout");
    assert!(
        out["payload"]["data"]
            .as_str()
            .unwrap()
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "+/=".contains(ch))
    );
}

#[tokio::test]
async fn binding_scenario_12_sequences_are_strictly_monotonic_across_three_clients() {
    let s = TestServer::start(&[]).await;
    // Without the tty's echo only cat writes, so each row appears exactly once, in order.
    let sid = s.command_session("stty -echo; exec cat").await;
    let mut clients = Vec::new();
    for role in ["controller", "observer", "observer"] {
        let mut c = s.attach(&sid, ADMIN).await;
        c.join(role).await;
        clients.push(c);
    }
    for i in 0..30 {
        clients[0].input(&format!("row {i}\n")).await;
    }
    let mut seen: Vec<BTreeMap<u64, Value>> = Vec::new();
    for c in &mut clients {
        let frames = c.output_until("row 28\r\nrow 29\r\n").await;
        let seqs: Vec<u64> = frames.iter().map(seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "strictly increasing: {seqs:?}"
        );
        seen.push(
            frames
                .into_iter()
                .filter(|f| kind(f) == "Output")
                .map(|f| (seq(&f), f))
                .collect(),
        );
    }
    // The same sequence names the same frame for every client.
    for (sq, f) in &seen[2] {
        for other in &seen[..2] {
            if let Some(g) = other.get(sq) {
                assert_eq!(f, g);
            }
        }
    }
}

#[tokio::test]
async fn binding_scenario_14_a_controller_that_stops_answering_pings_is_reaped() {
    let s = TestServer::start(&["--heartbeat-interval", "0.3", "--heartbeat-timeout", "1"]).await;
    let sid = cat_session(&s).await;
    let mut stale = s.attach(&sid, ADMIN).await;
    assert_eq!(
        stale.join("controller").await[0]["payload"]["role"],
        "controller"
    );
    // From here on `stale` is never polled, so it never answers a Ping.

    let mut watcher = s.attach(&sid, ADMIN).await;
    watcher.join("observer").await;
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let m = watcher.expect_kind("MembershipChanged").await;
            if m["payload"]["controllers"] == json!([]) {
                break;
            }
        }
    })
    .await
    .expect("the stale controller is reaped and its role released");

    let mut next = s.attach(&sid, ADMIN).await;
    assert_eq!(
        next.join("controller").await[0]["payload"]["role"],
        "controller"
    );
    next.input("taken over\n").await;
    next.output_until("taken over").await;
    // The observer, which answers pings, outlived several timeouts.
    watcher
        .send("ping", json!({ "client_ts": "2026-11-29T00:00:00Z" }))
        .await;
    assert_eq!(
        watcher.expect_op("pong").await["payload"]["client_ts"],
        "2026-11-29T00:00:00Z"
    );
    drop(stale);
}

#[tokio::test]
async fn app_level_ping_and_service_parameter_update_are_answered_with_the_request_id() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let id = c
        .send_env(
            "ping",
            json!({ "client_ts": "2026-11-29T01:02:03Z" }),
            json!({ "service_parameters": { "trace_id": "t-1" } }),
        )
        .await;
    let pong = c.next().await;
    assert_eq!(
        (pong["op"].as_str(), pong["id"].as_str()),
        (Some("pong"), Some(id.as_str()))
    );
    assert!(
        pong["payload"]["server_ts"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let id = c
        .send(
            "UpdateServiceParameters",
            json!({ "service_parameters": { "trace_id": "t-2" } }),
        )
        .await;
    let r = c.next().await;
    assert_eq!(
        (r["op"].as_str(), r["id"].as_str()),
        (Some("UpdateServiceParameters.Response"), Some(id.as_str()))
    );
}

#[tokio::test]
async fn replay_survives_a_server_restart_and_a_crash() {
    for crash in [false, true] {
        let mut s = TestServer::start(&[]).await;
        let sid = cat_session(&s).await;
        let mut c = s.attach(&sid, ADMIN).await;
        c.join("controller").await;
        c.input("persisted line\n").await;
        let live = c.output_until("persisted line\r\npersisted line").await;
        if crash {
            tokio::time::sleep(Duration::from_millis(300)).await; // the write-behind interval
            s.kill().await;
        } else {
            s.stop().await;
        }
        drop(c);
        let s2 = TestServer::start_in(&s.dir, &[]).await;
        let view = s2.session(&sid).await;
        assert_eq!(
            (view["state"].as_str(), view["close_reason"].as_str()),
            (Some("closed"), Some("instance_terminated"))
        );

        let mut late = s2.attach(&sid, ADMIN).await;
        late.send_env(
            "pty.join_session",
            json!({ "role": "observer" }),
            json!({ "replay_from": 0 }),
        )
        .await;
        let (code, frames) = late.until_close().await;
        assert_eq!(code, Some(1000));
        let text = output_text(&frames);
        assert!(
            text.contains("persisted line\r\npersisted line"),
            "crash={crash}: {text:?}"
        );
        // Output is stored as its bytes: the replay renders each envelope as it went out.
        for f in live.iter().filter(|f| kind(f) == "Output") {
            assert!(
                frames.contains(f),
                "crash={crash}: {f} not replayed as sent"
            );
        }
        assert_eq!(frames.iter().filter(|f| kind(f) == "Closed").count(), 1);
        let keyframe = frames.iter().rev().find(|f| kind(f) == "Keyframe").unwrap();
        assert!(String::from_utf8_lossy(&snapshot(keyframe)).contains("persisted line"));
        let seqs: Vec<u64> = frames
            .iter()
            .filter_map(|f| f["sequence"].as_u64())
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    }
}

#[tokio::test]
async fn a_late_joiners_keyframe_repaints_a_full_screen_program_cell_for_cell() {
    let s = TestServer::start(&[]).await;
    let script = r#"printf '\033[?1049h\033[H\033[2J\033[1;37;44m top - 10:00 \033[K\033[0m\r\n\033[7m PID USER \033[27m\r\n\033[3;6r\033[3;1H\033[32m 101 root\033[0m\r\n 102 app \033[38;5;202m\342\226\210\033[38;2;1;2;3m\344\270\255\033[0m\033[6;3H\033[4mU\033[24m\033[?25l\033[5;9H'; sleep 60"#;
    let sid = s
        .create_session(json!({ "command": script, "cols": 40, "rows": 8 }))
        .await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut first = s.attach(&sid, ADMIN).await;
    first.join("observer").await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut late = s.attach(&sid, ADMIN).await;
    let init = late
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": 0 }))
        .await;
    let mut from_output = server::sessions::screen::Screen::new(40, 8);
    for f in init.iter().filter(|f| kind(f) == "Output") {
        from_output.feed(&output_bytes(f));
    }
    let keyframe = init.iter().rev().find(|f| kind(f) == "Keyframe").unwrap();
    let mut from_keyframe = server::sessions::screen::Screen::new(40, 8);
    from_keyframe.feed(b"stale content\x1b[1m");
    from_keyframe.feed(&snapshot(keyframe));
    assert!(from_output.text()[0].contains("top - 10:00"));
    assert_eq!(from_keyframe.cells(), from_output.cells());
    assert_eq!(from_keyframe.cursor(), from_output.cursor());
    assert!(from_keyframe.alternate_screen());
}

/// Reads a binary client's frames until its PW1O output holds `needle`; returns the output
/// frames as (sequence, stream, bytes) and any JSON frames seen meanwhile.
async fn binary_output_until(
    c: &mut Client,
    needle: &str,
) -> (Vec<(u64, u8, Vec<u8>)>, Vec<Value>) {
    let (mut outputs, mut json) = (Vec::new(), Vec::new());
    let mut text = Vec::new();
    while !String::from_utf8_lossy(&text).contains(needle) {
        match c.next_frame(WAIT).await.expect("a frame") {
            Frame::Binary(b) => {
                let (seq, stream, data) = wire::parse_binary_output(&b).expect("a PW1O frame");
                text.extend_from_slice(data);
                outputs.push((seq, stream, data.to_vec()));
            }
            Frame::Json(v) => json.push(v),
        }
    }
    (outputs, json)
}

#[tokio::test]
async fn binding_scenario_9_binary_output_is_pw1o_frames_of_raw_pty_bytes() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut bin = Client::connect_binary(&s.ws_url(&sid), ADMIN).await;
    assert_eq!(
        bin.protocol, "pty-ws.v1.binary",
        "only the selected token is echoed"
    );
    assert_eq!(bin.hello["payload"]["payload_mode"]["binary"], true);
    bin.join("controller").await;
    let mut json = s.attach(&sid, ADMIN).await;
    assert_eq!(json.hello["payload"]["payload_mode"]["binary"], false);
    json.join("observer").await;

    // The tty echoes ESC as "^["; cat's own output has the raw byte.
    bin.input("é € 中 \u{1b}[1mbold\n").await;
    let (outputs, others) = binary_output_until(&mut bin, "\u{1b}[1mbold").await;
    assert!(
        others.iter().all(|f| kind(f) != "Output"),
        "no JSON/base64 output frames for a binary client: {others:?}"
    );
    assert!(outputs.iter().all(|(_, stream, _)| *stream == 1));
    let raw: Vec<u8> = outputs.iter().flat_map(|(_, _, d)| d.clone()).collect();
    assert!(
        String::from_utf8(raw)
            .unwrap()
            .contains("é € 中 \u{1b}[1mbold"),
        "raw bytes, not base64"
    );

    // The JSON viewer gets the same frames, same sequences, as base64.
    let frames = json.output_until("\u{1b}[1mbold").await;
    let as_json: Vec<(u64, Vec<u8>)> = frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| (seq(f), output_bytes(f)))
        .collect();
    let as_binary: Vec<(u64, Vec<u8>)> = outputs.into_iter().map(|(s, _, d)| (s, d)).collect();
    assert_eq!(
        as_binary, as_json,
        "one counter, one content, two encodings"
    );
}

#[tokio::test]
async fn binding_scenario_10_binary_input_is_raw_pty_input_and_needs_control() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut ctl = Client::connect_binary(&s.ws_url(&sid), ADMIN).await;
    ctl.join("controller").await;
    ctl.send_binary(wire::binary_input("typed-in-binary \u{e9}\n".as_bytes()))
        .await;
    binary_output_until(&mut ctl, "typed-in-binary é").await;

    // An observer's PW1I is refused and never reaches the PTY.
    let observe = s.token("pty:observe", None).await;
    let mut obs = Client::connect_binary(&s.ws_url(&sid), &observe).await;
    obs.join("observer").await;
    obs.send_binary(wire::binary_input(b"observer-wrote\n"))
        .await;
    let refused = loop {
        match obs.next_frame(WAIT).await.expect("a frame") {
            Frame::Json(f) if f["op"] == "Error" => break f,
            _ => continue,
        }
    };
    assert_eq!(refused["payload"]["code"], "PERMISSION_DENIED", "{refused}");
    ctl.send_binary(wire::binary_input(b"after\n")).await;
    let (outputs, _) = binary_output_until(&mut ctl, "after").await;
    let text: Vec<u8> = outputs.into_iter().flat_map(|(_, _, d)| d).collect();
    assert!(!String::from_utf8_lossy(&text).contains("observer-wrote"));

    // Binary frames that are not PW1I, or on a JSON connection, are invalid requests.
    ctl.send_binary(b"PW1Oxxxxxxxxx".to_vec()).await;
    let e = loop {
        match ctl.next_frame(WAIT).await.expect("a frame") {
            Frame::Json(f) if f["op"] == "Error" => break f,
            _ => continue,
        }
    };
    assert_eq!(e["payload"]["code"], "INVALID_REQUEST");
    let mut json = s.attach(&sid, ADMIN).await;
    json.send_binary(wire::binary_input(b"x")).await;
    assert_error(&json.next().await, None, "INVALID_REQUEST");
}

#[tokio::test]
async fn a_token_opening_connections_too_fast_gets_429_and_other_tokens_still_attach() {
    let s = TestServer::start(&["--rate-limit-connections", "2"]).await;
    let sid = cat_session(&s).await;
    let url = s.ws_url(&sid);
    let protocols = bearer_protocols(ADMIN);
    let mut refused = 0;
    let mut open = Vec::new();
    for _ in 0..10 {
        match upgrade_status(&url, &[("Sec-WebSocket-Protocol", &protocols)]).await {
            Ok(ws) => open.push(ws),
            Err(status) => {
                assert_eq!(status, 429);
                refused += 1;
            }
        }
    }
    // A burst of two seconds' worth (and one more if the attempts took half a second).
    assert!((4..=5).contains(&open.len()), "{} admitted", open.len());
    assert_eq!(refused, 10 - open.len());
    let r = s
        .http
        .get(url.replace("ws://", "http://"))
        .bearer_auth(ADMIN)
        .header("Sec-WebSocket-Protocol", "pty-ws.v1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    let other = s.token("pty:control", None).await;
    Client::connect(&url, &other).await;
}

#[tokio::test]
async fn a_frame_flood_is_rate_limited_then_closed_with_4429() {
    use futures_util::SinkExt;
    let s = TestServer::start(&["--rate-limit-frames", "20"]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let ping = json!({ "op": "ping", "id": "p", "ts": "2026-11-29T00:00:00Z", "payload": { "client_ts": "t" } }).to_string();
    for _ in 0..700 {
        if c.ws
            .send(tokio_tungstenite::tungstenite::Message::Text(
                ping.clone().into(),
            ))
            .await
            .is_err()
        {
            break;
        }
    }
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(4429));
    let pongs = frames.iter().filter(|f| f["op"] == "pong").count();
    assert!(
        (40..=45).contains(&pongs),
        "the burst is served, the rest is not: {pongs}"
    );
    let limited = frames
        .iter()
        .find(|f| f["payload"]["code"] == "RATE_LIMITED")
        .expect("a RATE_LIMITED error before the close");
    assert_eq!(limited["payload"]["retryable"], true);
    assert!(limited["payload"]["retry_after_ms"].as_u64().is_some());
}

#[tokio::test]
async fn an_oversized_frame_is_an_invalid_request_and_closes_1009() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.send_raw(&"x".repeat(1024 * 1024 + 1)).await;
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1009));
    assert_eq!(frames.last().unwrap()["payload"]["code"], "INVALID_REQUEST");
}

#[tokio::test]
async fn a_4_mib_frame_is_refused_with_1009_not_dropped() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.send_raw(&"x".repeat(4 * 1024 * 1024)).await;
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1009));
    assert_eq!(frames.last().unwrap()["payload"]["code"], "INVALID_REQUEST");
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_closes_1007() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let frame = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    c.ws.send(tokio_tungstenite::tungstenite::Message::Frame(frame))
        .await
        .unwrap();
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1007));
    assert_eq!(frames.last().unwrap()["payload"]["code"], "INVALID_REQUEST");
}

#[tokio::test]
async fn a_client_close_is_answered_with_a_close() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("observer").await;
    let bye = CloseFrame {
        code: 1000.into(),
        reason: "done".into(),
    };
    c.ws.send(Message::Close(Some(bye))).await.unwrap();
    let reply = tokio::time::timeout(WAIT, async {
        loop {
            match c.ws.next().await {
                Some(Ok(Message::Close(frame))) => return Ok(frame.map(|f| u16::from(f.code))),
                Some(Ok(_)) => continue,
                other => return Err(format!("{other:?}")),
            }
        }
    })
    .await
    .expect("the server answers");
    assert_eq!(reply, Ok(Some(1000)));
    assert!(c.ws.next().await.is_none(), "then the socket ends cleanly");
}

#[tokio::test]
async fn a_flood_that_never_stops_still_reads_its_4429() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let s = TestServer::start(&["--rate-limit-frames", "20"]).await;
    let sid = cat_session(&s).await;
    let c = s.attach(&sid, ADMIN).await;
    let (mut tx, mut rx) = c.ws.split();
    let ping = json!({ "op": "ping", "id": "p", "ts": "2026-11-29T00:00:00Z", "payload": { "client_ts": "t" } }).to_string();
    let flood =
        tokio::spawn(
            async move { while tx.send(Message::Text(ping.clone().into())).await.is_ok() {} },
        );
    let code = tokio::time::timeout(WAIT, async {
        loop {
            match rx.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .expect("the server closes");
    flood.abort();
    assert_eq!(code, Some(4429));
}

#[tokio::test]
async fn a_slow_viewer_without_acks_skips_stale_output_for_a_keyframe_and_is_not_reaped() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let s = TestServer::start(&["--heartbeat-interval", "0.5", "--heartbeat-timeout", "1.5"]).await;
    let sid = s.command_session("yes slow-viewer-line").await;
    // A small receive buffer: what the viewer has not read waits on the server.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let tcp = socket.connect(s.addr.parse().unwrap()).await.unwrap();
    let mut req = s.ws_url(&sid).into_client_request().unwrap();
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        bearer_protocols(ADMIN).parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
    let join = json!({ "op": "pty.join_session", "id": "j", "ts": "2026-12-01T00:00:00Z",
        "payload": { "role": "observer" } });
    ws.send(Message::Text(join.to_string().into()))
        .await
        .unwrap();

    let (mut lagged, mut keyframe_after) = (false, false);
    let mut latest_lateness = Duration::ZERO;
    let mut outputs = 0;
    // How soon the viewer lags depends on the machine's load: read until it has, then a
    // second more, to see output arrive fresh after the keyframe.
    let mut end = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let f: Value = match ws.next().await {
            Some(Ok(Message::Text(t))) => serde_json::from_str(&t).unwrap(),
            Some(Ok(Message::Close(c))) => panic!("closed while reading: {c:?}"),
            Some(Ok(_)) => continue,
            other => panic!("the connection failed: {other:?}"),
        };
        match kind(&f) {
            "Error" if f["payload"]["code"] == "PTY_OUTPUT_LAGGED" => lagged = true,
            "Keyframe" if lagged && !keyframe_after => {
                keyframe_after = true;
                end = std::time::Instant::now() + Duration::from_secs(1);
            }
            "Output" => {
                outputs += 1;
                let ts = time::OffsetDateTime::parse(
                    f["ts"].as_str().unwrap(),
                    &time::format_description::well_known::Rfc3339,
                )
                .unwrap();
                let late = time::OffsetDateTime::now_utc() - ts;
                latest_lateness = Duration::from_secs_f64(late.as_seconds_f64().max(0.0));
            }
            _ => {}
        }
    }
    assert!(
        lagged && keyframe_after,
        "PTY_OUTPUT_LAGGED, then a keyframe ({latest_lateness:?} late, {outputs} outputs)"
    );
    assert!(
        latest_lateness < Duration::from_secs(4),
        "output arrives {latest_lateness:?} late"
    );
}

#[tokio::test]
async fn a_session_takes_a_bounded_number_of_connections() {
    let s = TestServer::start(&["--max-connections-per-session", "2"]).await;
    let sid = cat_session(&s).await;
    let a = s.attach(&sid, ADMIN).await;
    let _b = s.attach(&sid, ADMIN).await;
    let third = upgrade_status(
        &s.ws_url(&sid),
        &[("Sec-WebSocket-Protocol", &bearer_protocols(ADMIN))],
    )
    .await;
    assert_eq!(third.err(), Some(429));
    let other = cat_session(&s).await;
    s.attach(&other, ADMIN).await;
    drop(a);
    tokio::time::timeout(WAIT, async {
        while upgrade_status(
            &s.ws_url(&sid),
            &[("Sec-WebSocket-Protocol", &bearer_protocols(ADMIN))],
        )
        .await
        .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a slot frees when a connection ends");
}
