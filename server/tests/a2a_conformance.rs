//! `--executor conformance`: the A2A TCK agent scenarios (specs/a2a/tck-sut/*.feature),
//! each chosen by messageId prefix, through the real server's HTTP+JSON 1.0 binding.
//!
//! Raw JSON on purpose: these tests pin the TCK scenarios' member names as the specs write
//! them, apart from the `wire` types the server encodes with.

mod common;

use common::*;
use serde_json::{Value, json};

async fn server() -> TestServer {
    TestServer::start(&["--executor", "conformance"]).await
}

async fn post(s: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let req = s
        .http
        .post(format!("http://{}{path}", s.addr))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(body.to_string());
    s.call(req, ADMIN).await
}

fn message(id: &str) -> Value {
    json!({ "message": { "messageId": id, "role": "ROLE_USER", "parts": [{ "text": "go" }] } })
}

async fn send(s: &TestServer, id: &str) -> Value {
    let (status, body) = post(s, "/message:send", message(id)).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn stream(s: &TestServer, id: &str) -> Vec<Value> {
    let text = s.sse("/message:stream", &message(id), Some("1.0")).await;
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

/// The states and artifact parts of a stream, in order.
fn steps(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            if let Some(t) = e.get("task") {
                format!("task {}", t["status"]["state"].as_str().unwrap())
            } else if let Some(u) = e.get("statusUpdate") {
                u["status"]["state"].as_str().unwrap().to_owned()
            } else {
                let a = &e["artifactUpdate"];
                format!(
                    "artifact {} append={} last={}",
                    a["artifact"]["parts"][0],
                    a["append"].as_bool().unwrap_or(false),
                    a["lastChunk"].as_bool().unwrap_or(false)
                )
            }
        })
        .collect()
}

#[tokio::test]
async fn core_scenarios_complete_reject_ask_and_answer_with_a_message() {
    let s = server().await;
    let done = send(&s, "tck-complete-task-1").await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        done["task"]["status"]["message"]["parts"][0]["text"],
        "Hello from TCK"
    );

    let text = send(&s, "tck-artifact-text-1").await;
    assert_eq!(
        text["task"]["artifacts"][0]["parts"][0]["text"],
        "Generated text content"
    );
    let file = send(&s, "tck-artifact-file-1").await;
    let part = &file["task"]["artifacts"][0]["parts"][0];
    assert_eq!(
        (part["filename"].as_str(), part["mediaType"].as_str()),
        (Some("output.txt"), Some("text/plain"))
    );
    assert!(part["raw"].is_string());
    let url = send(&s, "tck-artifact-file-url-1").await;
    assert_eq!(
        url["task"]["artifacts"][0]["parts"][0]["url"],
        "https://example.com/output.txt"
    );
    let data = send(&s, "tck-artifact-data-1").await;
    assert_eq!(
        data["task"]["artifacts"][0]["parts"][0]["data"],
        json!({ "key": "value", "count": 42 })
    );

    let reply = send(&s, "tck-message-response-1").await;
    assert!(reply.get("task").is_none());
    assert_eq!(reply["message"]["role"], "ROLE_AGENT");
    assert_eq!(
        reply["message"]["parts"][0]["text"],
        "Direct message response"
    );

    let rejected = send(&s, "tck-reject-task-1").await;
    assert_eq!(rejected["task"]["status"]["state"], "TASK_STATE_REJECTED");

    let asked = send(&s, "tck-input-required-1").await;
    assert_eq!(
        asked["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let mut answer = message("follow-up-1");
    answer["message"]["taskId"] = asked["task"]["id"].clone();
    let (_, answered) = post(&s, "/message:send", answer).await;
    assert_eq!(answered["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(answered["task"]["history"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn streaming_scenarios_stream_their_steps_in_order() {
    let s = server().await;
    let lifecycle = steps(&stream(&s, "tck-stream-001").await);
    assert_eq!(
        lifecycle,
        [
            "task TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            r#"artifact {"text":"Stream hello from TCK"} append=false last=true"#,
            "TASK_STATE_COMPLETED"
        ]
    );
    assert_eq!(
        steps(&stream(&s, "tck-stream-002").await),
        ["task TASK_STATE_SUBMITTED", "TASK_STATE_COMPLETED"]
    );
    let chunked = steps(&stream(&s, "tck-stream-artifact-chunked").await);
    assert_eq!(
        chunked[2..4],
        [
            r#"artifact {"text":"chunk-1 "} append=false last=false"#.to_owned(),
            r#"artifact {"text":"chunk-2"} append=true last=true"#.to_owned()
        ]
    );
}

#[tokio::test]
async fn the_long_running_scenario_can_be_resubscribed_and_canceled() {
    let s = server().await;
    let mut req = message("test-resubscribe-message-id-1");
    req["configuration"] = json!({ "returnImmediately": true });
    let (_, started) = post(&s, "/message:send", req.clone()).await;
    let id = started["task"]["id"].as_str().unwrap().to_owned();
    let events = s
        .http
        .get(format!("http://{}/tasks/{id}:subscribe", s.addr))
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(events.contains("TASK_STATE_COMPLETED"));

    req["message"]["messageId"] = json!("test-resubscribe-message-id-2");
    let (_, second) = post(&s, "/message:send", req).await;
    let id = second["task"]["id"].as_str().unwrap();
    let (status, canceled) = post(&s, &format!("/tasks/{id}:cancel"), json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
}

/// a2a-tck CORE-CANCEL-001 and STREAM-ORDER-002..004: INPUT_REQUIRED is not terminal, so the
/// task stays live: it can be subscribed to, and canceled.
#[tokio::test]
async fn a_task_at_input_required_stays_live_to_subscribe_to_and_to_cancel() {
    let s = server().await;
    let asked = send(&s, "tck-input-required-sub").await;
    assert_eq!(
        asked["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let id = asked["task"]["id"].as_str().unwrap().to_owned();

    let subscribe = {
        let url = format!("http://{}/tasks/{id}:subscribe", s.addr);
        s.http
            .get(url)
            .bearer_auth(ADMIN)
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap()
    };
    assert_eq!(
        subscribe.status(),
        200,
        "SubscribeToTask on an INPUT_REQUIRED task"
    );
    let mut events = subscribe.bytes_stream();
    let first = tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut events))
        .await
        .expect("the subscription's first event")
        .unwrap()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("TASK_STATE_INPUT_REQUIRED"),
        "{}",
        String::from_utf8_lossy(&first)
    );

    let (status, canceled) = post(&s, &format!("/tasks/{id}:cancel"), json!({})).await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
}

/// a2a-tck STREAM-SUB-002 over HTTP+JSON: a subscription to a task at INPUT_REQUIRED ends
/// with the terminal status that a follow-up's scenario (`tck-complete-task-…`) gives it.
#[tokio::test]
async fn stream_sub_002_a_subscription_ends_at_the_terminal_state_a_follow_up_reaches() {
    let s = server().await;
    let asked = send(&s, "tck-input-required-sub2").await;
    let id = asked["task"]["id"].as_str().unwrap().to_owned();
    let url = format!("http://{}/tasks/{id}:subscribe", s.addr);
    let sub = s
        .http
        .get(url)
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0");
    let events = tokio::spawn(async move { sub.send().await.unwrap().text().await.unwrap() });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut follow_up = message("tck-complete-task-sub2");
    follow_up["message"]["taskId"] = json!(id);
    let (status, body) = post(&s, "/message:send", follow_up).await;
    assert_eq!(status, 200, "{body}");
    let text = tokio::time::timeout(WAIT, events).await.unwrap().unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert_eq!(
        steps(&events).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{text}"
    );
}
