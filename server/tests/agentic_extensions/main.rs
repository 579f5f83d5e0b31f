//! The agentic-sandbox executor's four A2A extensions on HTTP+JSON and JSON-RPC, named
//! after their specs' conformance scenarios (RUNTIME-CONF-*, idempotency AC-*, hitl-prompt
//! CF-*, multi-tenant MT-D-*), and `--profile agentic-sandbox`.
//!
//! Raw JSON on purpose: these tests pin the extensions' member and metadata names as the
//! specs write them, apart from the `wire` types the server encodes with.

#[path = "../common/mod.rs"]
mod common;

use common::*;
use serde_json::{Value, json};

mod idempotency_hitl_and_tenant;
mod runtime_and_idempotency;

const RUNTIME: &str = "https://agentic-sandbox.aiwg.io/extensions/runtime/v1";
const IDEMPOTENCY: &str = "https://agentic-sandbox.aiwg.io/extensions/idempotency/v1";
const HITL: &str = "https://agentic-sandbox.aiwg.io/extensions/hitl-prompt/v1";
const TENANT: &str = "https://agentic-sandbox.aiwg.io/extensions/multi-tenant/v1";
const PTY: &str = "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1";

/// An answer: status, headers, body text.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// POSTs `body` to `path` with `A2A-Extensions: extensions` (none when empty); A2A 1.0
/// unless the path is a 0.3 one.
async fn post(s: &TestServer, path: &str, extensions: &[&str], body: &Value) -> Answer {
    let mut req = s
        .http
        .post(s.url(path))
        .bearer_auth(ADMIN)
        .header("Content-Type", "application/json")
        .body(body.to_string());
    if !body["method"].as_str().is_some_and(|m| m.contains('/')) {
        req = req.header("A2A-Version", "1.0");
    }
    if !extensions.is_empty() {
        req = req.header("A2A-Extensions", extensions.join(", "));
    }
    let resp = req.send().await.unwrap();
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        text: resp.text().await.unwrap(),
    }
}

fn message(id: &str, text: &str) -> Value {
    json!({ "messageId": id, "role": "ROLE_USER", "parts": [{ "text": text }] })
}

fn rpc(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": "r1", "method": method, "params": params })
}

fn uuid() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The root card (the pure 1.0 one).
async fn card(s: &TestServer) -> Value {
    s.public(format!("http://{}/.well-known/agent-card.json", s.addr))
        .await
}

async fn health(s: &TestServer) -> (u16, String) {
    let resp = s
        .http
        .get(format!("http://{}/health", s.addr))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

fn extension<'a>(card: &'a Value, uri: &str) -> &'a Value {
    let all = card["capabilities"]["extensions"].as_array().unwrap();
    let found: Vec<&Value> = all.iter().filter(|e| e["uri"] == uri).collect();
    assert_eq!(found.len(), 1, "exactly one entry for {uri}");
    found[0]
}

/// How many tasks the session `sid` has.
async fn tasks_in(s: &TestServer, sid: &str) -> usize {
    let (_, page) = s
        .a2a("GET", &format!("/tasks?contextId={sid}"), ADMIN, None)
        .await;
    page["tasks"].as_array().map_or(0, Vec::len)
}

/// A send under idempotency/v1 in a session of its own: `echo $n >> count`, whose
/// effect shows how often it ran.
fn counted(sid: &str, id: &str) -> Value {
    let mut m = message(id, "echo ran >> runs; wc -l < runs");
    m["contextId"] = json!(sid);
    json!({ "message": m })
}

/// Drives a task to INPUT_REQUIRED with hitl-prompt/v1 activated; returns it.
async fn prompted(s: &TestServer) -> Value {
    let body = json!({ "message": message("ask", "read -p 'Name? ' n; echo hello-$n") });
    let asked = post(s, "/message:send", &[HITL], &body).await;
    assert_eq!(asked.header("a2a-extensions"), Some(HITL));
    asked.json()["task"].clone()
}

fn response(task: &Value, prompt_id: &Value, payload: Value) -> Value {
    let mut m = message(&uuid(), "answering the prompt");
    m["taskId"] = task["id"].clone();
    m["metadata"] = json!({ "hitl_response_for": { "prompt_id": prompt_id, "payload": payload } });
    json!({ "message": m })
}
