//! A2A 1.0 over HTTP+JSON against the real server: tasks are commands typed into a
//! session's shell, observed through the binding's own shapes and errors.
//!
//! Raw JSON on purpose: these tests pin the HTTP+JSON binding's member names as the specs
//! write them, apart from the `wire` types the server encodes with.

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

mod surfaces;
mod tasks;

fn send(text: &str) -> Value {
    json!({ "message": { "messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{ "text": text }] } })
}

fn output(task: &Value) -> String {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// Posts or gets an SSE route; returns each event's name (if any) and JSON data.
async fn events(
    s: &TestServer,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Vec<(Option<String>, Value)> {
    let url = format!("http://{}{path}", s.addr);
    let req = match method {
        "GET" => s.http.get(url),
        _ => s
            .http
            .post(url)
            .header("Content-Type", "application/json")
            .body(body.unwrap_or(json!({})).to_string()),
    };
    let resp = req
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    parse_sse(&resp.text().await.unwrap())
}

fn parse_sse(text: &str) -> Vec<(Option<String>, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = Some(n.trim().to_owned());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data = Some(serde_json::from_str(d.trim()).unwrap());
                }
            }
            data.map(|d| (name, d))
        })
        .collect()
}

/// The states announced and the artifact text streamed, in order.
fn summarize(events: &[(Option<String>, Value)]) -> (Vec<String>, String) {
    let mut states = Vec::new();
    let mut text = String::new();
    for (name, e) in events {
        assert!(name.is_none(), "no error events: {e}");
        if let Some(t) = e.get("task") {
            states.push(t["status"]["state"].as_str().unwrap().to_owned());
        } else if let Some(u) = e.get("statusUpdate") {
            states.push(u["status"]["state"].as_str().unwrap().to_owned());
        } else if let Some(a) = e.get("artifactUpdate") {
            assert_eq!(a["append"].as_bool().unwrap_or(false), !text.is_empty());
            text.push_str(a["artifact"]["parts"][0]["text"].as_str().unwrap());
        }
    }
    (states, text)
}

fn assert_status(body: &Value, code: u16, status: &str, reason: &str) {
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["status"], status, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], reason, "{body}");
    assert_eq!(
        body["error"]["details"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
}

/// Calls the 0.3 REST surface under `/v1`, without A2A-Version.
async fn legacy(s: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let url = format!("http://{}/v1{path}", s.addr);
    let req = match method {
        "GET" => s.http.get(url),
        _ => s
            .http
            .post(url)
            .header("Content-Type", "application/json")
            .body(body.unwrap_or(json!({})).to_string()),
    };
    s.call(req, ADMIN).await
}
