//! The agentic-sandbox profile: the executor's pty-ws shape beside the spec's on one
//! session (the dashboard's own client shape is driven in end2end/agentic-sandbox).
//!
//! Raw JSON on purpose: these tests pin the executor's own frame shape as the specs write
//! them, apart from the `wire` types the server encodes with.

mod common;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::*;
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// Sends a frame in the executor's shape: `{op, ts, payload}`, no id.
async fn send_executor(c: &mut Client, op: &str, payload: Value) {
    let frame = json!({ "op": op, "ts": "2026-12-02T00:00:00Z", "payload": payload });
    c.ws.send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

async fn until_op(c: &mut Client, op: &str) -> Value {
    c.expect_op(op).await
}

#[tokio::test]
async fn an_executor_client_and_a_spec_client_share_a_session_each_in_its_own_shape() {
    let server = TestServer::start(&[]).await;
    let sid = server.command_session("cat").await;
    let mut spec = server.attach(&sid, ADMIN).await;
    spec.join("observer").await;
    let mut exec = server.attach(&sid, ADMIN).await;
    send_executor(
        &mut exec,
        "pty.join_session",
        json!({ "client_label": "dash" }),
    )
    .await;
    let assigned = until_op(&mut exec, "role_assigned").await;
    assert_eq!(assigned["payload"]["role"], "controller");
    assert!(assigned.get("id").is_none() && assigned["seq"].is_u64());
    let members = until_op(&mut exec, "membership_changed").await;
    let roles: Vec<&str> = (members["payload"]["members"].as_array().unwrap().iter())
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["controller", "observer"]);

    // The spec's client sees the same change in the spec's shape.
    let changed = spec.expect_kind("MembershipChanged").await;
    assert_eq!(changed["payload"]["controllers"][0]["label"], "dash");

    let data = STANDARD.encode("shared-line\n");
    send_executor(&mut exec, "pty.session_input", json!({ "data": data })).await;
    spec.output_until("shared-line").await;
    let mut text = String::new();
    while !text.contains("shared-line") {
        let f = until_op(&mut exec, "output").await;
        let bytes = STANDARD
            .decode(f["payload"]["data"].as_str().unwrap())
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
}

#[tokio::test]
async fn an_executor_client_under_the_binary_subprotocol_gets_pw1o_output() {
    let server = TestServer::start(&[]).await;
    let sid = server.command_session("cat").await;
    let mut exec = Client::connect_binary(&server.ws_url(&sid), ADMIN).await;
    assert_eq!(exec.protocol, "pty-ws.v1.binary");
    send_executor(&mut exec, "pty.join_session", json!({})).await;
    until_op(&mut exec, "role_assigned").await;
    exec.send_binary([b"PW1I".as_slice(), b"binary-in\n"].concat())
        .await;
    let mut text = Vec::new();
    while !String::from_utf8_lossy(&text).contains("binary-in") {
        match exec.next_frame(WAIT).await.expect("a frame") {
            Frame::Binary(b) => {
                assert_eq!(&b[..4], b"PW1O");
                assert_eq!(b[12], 1, "stream 1: the PTY");
                text.extend_from_slice(&b[13..]);
            }
            Frame::Json(f) => assert!(f.get("id").is_none(), "{f}"),
        }
    }
    send_executor(&mut exec, "pty.session_input", json!({ "data": 5 })).await;
    let refused = until_op(&mut exec, "error").await;
    assert_eq!(refused["payload"]["code"], "request.invalid_params");
    assert_eq!(refused["payload"]["status"], 400);
}

#[tokio::test]
async fn an_executor_join_of_an_ended_session_is_session_closed_then_its_last_screen() {
    let server = TestServer::start(&[]).await;
    let sid = server.command_session("echo last-words").await;
    server.wait_closed(&sid).await;
    let mut exec = server.attach(&sid, ADMIN).await;
    send_executor(&mut exec, "pty.join_session", json!({})).await;
    let error = until_op(&mut exec, "error").await;
    assert_eq!(error["payload"]["code"], "session.closed");
    assert_eq!(error["payload"]["status"], 409);
    let (code, frames) = exec.until_close().await;
    assert_eq!(code, Some(1000));
    let ops: Vec<&str> = frames.iter().map(|f| f["op"].as_str().unwrap()).collect();
    assert!(
        ops.contains(&"keyframe") && ops.last() == Some(&"closed"),
        "{ops:?}"
    );
}

#[tokio::test]
async fn under_the_profile_an_executor_client_runs_a2a_ops_on_pty_ws_without_naming_extensions() {
    let server = TestServer::start(&["--profile", "agentic-sandbox"]).await;
    let sid = server.create_session(json!({})).await.session_id;
    let mut exec = server.attach(&sid, ADMIN).await;
    send_executor(&mut exec, "pty.join_session", json!({})).await;
    until_op(&mut exec, "role_assigned").await;
    let message = json!({ "kind": "message", "messageId": "m1", "role": "user",
        "parts": [{ "kind": "text", "text": "echo via-pty-ws" }] });
    send_executor(&mut exec, "message/send", json!({ "message": message })).await;
    let task = until_op(&mut exec, "task").await;
    assert_eq!(task["payload"]["status"]["state"], "completed", "{task}");
    assert_eq!(task["payload"]["metadata"]["runtime.kind"], "container");
}
