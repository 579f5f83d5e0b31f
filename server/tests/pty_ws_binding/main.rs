//! pty-ws/v1 §13 conformance scenarios this server supports today, plus the binding's
//! upgrade, auth and persistence rules, against the real server.

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use wire::a2a::StreamResponse;
use wire::server::ServerOp;

mod frames_and_limits;
mod hello_errors_and_operations;
mod replay_and_upgrades;

/// Checks an `Error` frame: echoed id, code, populated canonical A2A error.
fn assert_error(frame: &Value, id: Option<&str>, code: &str) {
    let p = error_of(frame);
    if let Some(id) = id {
        assert_eq!(id_of(frame), id);
    }
    assert_eq!(p.code.as_str(), code);
    assert!(!p.message.is_empty());
    let info = &p.a2a_error.details[0];
    assert_eq!(info.reason, code);
    assert_eq!(info.type_url, "type.googleapis.com/google.rpc.ErrorInfo");
    assert!(!p.a2a_error.status.is_empty() && p.a2a_error.code > 0);
}

/// A shell session, for A2A tasks on this binding.
async fn shell(s: &TestServer) -> String {
    s.create_session(json!({})).await.session_id
}

fn text_message(text: &str) -> Value {
    json!({ "message": { "messageId": format!("ws-{text}"), "role": "ROLE_USER", "parts": [{ "text": text }] } })
}

/// Starts `command` as a streamed task on `c`; returns the task's id.
async fn stream_task(c: &mut Client, command: &str) -> String {
    c.send("SendStreamingMessage", text_message(command)).await;
    match typed(&c.expect_op("SendStreamingMessage.Accepted").await).op {
        ServerOp::StreamAccepted(a) => a.task_id,
        op => panic!("{op:?}"),
    }
}

/// Reads TaskStatusUpdate frames until the task is terminal; returns them.
async fn updates_until_terminal(c: &mut Client) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let f = c.expect_op("TaskStatusUpdate").await;
        let state = task_of(&f).status.state;
        frames.push(f);
        if state.is_terminal() {
            return frames;
        }
    }
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
