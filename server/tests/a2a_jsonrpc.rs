//! A2A 1.0 over JSON-RPC against the real server: the same task service, JSON-RPC shapes
//! and error codes.
//!
//! Raw JSON on purpose: these tests pin JSON-RPC's and A2A's member names as the specs
//! write them, apart from the `wire` types the server encodes with.

mod common;

use common::*;
use serde_json::{Value, json};

async fn rpc_at(
    s: &TestServer,
    path: &str,
    token: &str,
    version: Option<&str>,
    body: String,
) -> (u16, Value) {
    let mut req = s
        .http
        .post(format!("http://{}{path}", s.addr))
        .header("Content-Type", "application/json")
        .body(body);
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    s.call(req, token).await
}

async fn rpc(s: &TestServer, method: &str, params: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params }).to_string();
    let (status, v) = rpc_at(s, "/jsonrpc", ADMIN, Some("1.0"), body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["jsonrpc"].as_str(), v["id"].as_i64()),
        (Some("2.0"), Some(7)),
        "{method}: {v}"
    );
    v
}

fn message(text: &str) -> Value {
    json!({ "message": { "messageId": format!("rpc-{text}"), "role": "ROLE_USER", "parts": [{ "text": text }] } })
}

fn assert_rpc_error(v: &Value, code: i64, reason: Option<&str>) {
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(v.get("result").is_none());
    if let Some(reason) = reason {
        assert_eq!(v["error"]["data"][0]["reason"], reason, "{v}");
        assert_eq!(
            v["error"]["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
    }
}

#[tokio::test]
async fn send_get_list_and_cancel_over_jsonrpc() {
    let s = TestServer::start(&[]).await;
    let sent = rpc(&s, "SendMessage", message("echo via-rpc")).await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "via-rpc\r\n");
    let id = task["id"].as_str().unwrap();

    let got = rpc(&s, "GetTask", json!({ "id": id, "historyLength": 0 })).await;
    assert_eq!(got["result"]["id"], id);
    assert!(got["result"].get("history").is_none());

    let listed = rpc(&s, "ListTasks", json!({ "pageSize": 10 })).await;
    assert_eq!(listed["result"]["totalSize"], 1);
    assert_eq!(listed["result"]["nextPageToken"], "");

    let mut slow = message("sleep 100");
    slow["configuration"] = json!({ "returnImmediately": true });
    let started = rpc(&s, "SendMessage", slow).await;
    let slow_id = started["result"]["task"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let canceled = rpc(&s, "CancelTask", json!({ "id": slow_id })).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert_rpc_error(
        &rpc(&s, "CancelTask", json!({ "id": id })).await,
        -32002,
        Some("TASK_NOT_CANCELABLE"),
    );
}

#[tokio::test]
async fn send_streaming_message_answers_with_server_sent_jsonrpc_responses() {
    let s = TestServer::start(&[]).await;
    let body = json!({ "jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage", "params": message("echo streamed") });
    let text = s.sse("/jsonrpc", &body, Some("1.0")).await;
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert!(
        events
            .iter()
            .all(|e| e["jsonrpc"] == "2.0" && e["id"] == "s1")
    );
    assert_eq!(
        events[0]["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    let last = &events.last().unwrap()["result"]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    // Output arrives in chunks as the PTY gives it: together it is the command's output.
    let streamed: String = events
        .iter()
        .filter_map(|e| e["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, "streamed\r\n");
}

#[tokio::test]
async fn jsonrpc_errors_carry_their_codes_and_error_info() {
    let s = TestServer::start(&[]).await;
    let (status, v) = rpc_at(&s, "/jsonrpc", ADMIN, Some("1.0"), "{oops".into()).await;
    assert_eq!(status, 200);
    assert_rpc_error(&v, -32700, None);
    let (_, v) = rpc_at(&s, "/jsonrpc", ADMIN, Some("1.0"), "[]".into()).await;
    assert_rpc_error(&v, -32600, Some("INVALID_REQUEST"));
    let (_, v) = rpc_at(
        &s,
        "/jsonrpc",
        ADMIN,
        Some("1.0"),
        json!({ "id": 1, "method": "GetTask" }).to_string(),
    )
    .await;
    assert_rpc_error(&v, -32600, Some("INVALID_REQUEST"));
    assert_rpc_error(
        &rpc(&s, "Teleport", json!({})).await,
        -32601,
        Some("METHOD_NOT_FOUND"),
    );
    assert_rpc_error(
        &rpc(&s, "GetTask", json!({ "identifier": 1 })).await,
        -32602,
        Some("INVALID_PARAMS"),
    );
    assert_rpc_error(
        &rpc(
            &s,
            "SendMessage",
            json!({ "message": { "messageId": "x", "role": "user", "parts": [{ "text": "a" }] } }),
        )
        .await,
        -32602,
        None,
    );
    assert_rpc_error(
        &rpc(&s, "GetTask", json!({ "id": "nope" })).await,
        -32001,
        Some("TASK_NOT_FOUND"),
    );
    assert_rpc_error(
        &rpc(&s, "SubscribeToTask", json!({ "id": "nope" })).await,
        -32001,
        Some("TASK_NOT_FOUND"),
    );
    assert_rpc_error(
        &rpc(
            &s,
            "GetTaskPushNotificationConfig",
            json!({ "taskId": "t", "id": "c" }),
        )
        .await,
        -32001,
        Some("TASK_NOT_FOUND"),
    );
    assert_rpc_error(
        &rpc(&s, "ListTasks", json!({ "pageSize": 0 })).await,
        -32602,
        Some("INVALID_PARAMS"),
    );

    let body = json!({ "jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": { "id": "x" } })
        .to_string();
    let (status, v) = rpc_at(&s, "/jsonrpc", ADMIN, None, body.clone()).await;
    assert_eq!(status, 200);
    assert_rpc_error(&v, -32009, Some("VERSION_NOT_SUPPORTED"));
    let (status, v) = rpc_at(&s, "/jsonrpc", "wrong", Some("1.0"), body.clone()).await;
    assert_eq!(status, 401);
    assert_rpc_error(&v, -32000, Some("UNAUTHENTICATED"));
    // The trailing-slash form and the instance base answer the same.
    for path in ["/jsonrpc/", "/agents/local/jsonrpc"] {
        let (status, v) = rpc_at(&s, path, ADMIN, Some("1.0"), body.clone()).await;
        assert_eq!(status, 200, "{path}");
        assert_rpc_error(&v, -32001, Some("TASK_NOT_FOUND"));
    }
}

#[tokio::test]
async fn jsonrpc_refuses_notifications_object_ids_and_duplicate_keys_and_runs_nothing() {
    let s = TestServer::start(&[]).await;
    let marker = s.dir.join("ran");
    let command = format!("touch {}", marker.display());
    let send = |id: Option<Value>| {
        let mut request = json!({ "jsonrpc": "2.0", "method": "SendMessage",
            "params": message(&command) });
        if let Some(id) = id {
            request["id"] = id;
        }
        request.to_string()
    };

    // A request without an id is a notification: no answer, and nothing runs.
    let resp = s
        .http
        .post(s.url("/jsonrpc"))
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(send(None))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    assert_eq!(resp.text().await.unwrap(), "");

    for id in [json!({ "n": 1 }), json!([1]), json!(true)] {
        let (status, v) = rpc_at(&s, "/jsonrpc", ADMIN, Some("1.0"), send(Some(id))).await;
        assert_eq!(status, 200);
        assert_rpc_error(&v, -32600, Some("INVALID_REQUEST"));
        assert_eq!(v["id"], Value::Null);
    }

    // The method that a filter keeping the first key would have seen is not the one run.
    let duplicated = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"GetTask","method":"SendMessage","params":{}}}"#,
        message(&command)
    );
    let (_, v) = rpc_at(&s, "/jsonrpc", ADMIN, Some("1.0"), duplicated).await;
    assert_rpc_error(&v, -32600, Some("INVALID_REQUEST"));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key"),
        "{v}"
    );

    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!marker.exists(), "a refused request ran its command");
    let listed = rpc(&s, "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
}

/// A headerless (0.3) JSON-RPC call.
async fn rpc03(s: &TestServer, method: &str, params: Value) -> Value {
    let body =
        json!({ "jsonrpc": "2.0", "id": "old", "method": method, "params": params }).to_string();
    let (status, v) = rpc_at(s, "/jsonrpc", ADMIN, None, body).await;
    assert_eq!(status, 200, "{v}");
    v
}

fn message03(text: &str) -> Value {
    json!({ "message": { "kind": "message", "messageId": format!("o-{text}"), "role": "user", "parts": [{ "kind": "text", "text": text }] } })
}

#[tokio::test]
async fn headerless_0_3_calls_get_0_3_shapes_from_the_same_tasks() {
    let s = TestServer::start(&[]).await;
    let sent = rpc03(&s, "message/send", message03("echo legacy")).await;
    let task = &sent["result"];
    assert_eq!(
        (task["kind"].as_str(), task["status"]["state"].as_str()),
        (Some("task"), Some("completed"))
    );
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({ "kind": "text", "text": "legacy\r\n" })
    );
    assert_eq!(task["history"][0]["role"], "user");
    let id = task["id"].as_str().unwrap();
    let got = rpc03(&s, "tasks/get", json!({ "id": id })).await;
    assert_eq!(got["result"]["id"], id);
    // The same task through 1.0 has the 1.0 shapes.
    let v1 = rpc(&s, "GetTask", json!({ "id": id })).await;
    assert_eq!(v1["result"]["status"]["state"], "TASK_STATE_COMPLETED");

    let mut slow = message03("sleep 100");
    slow["configuration"] = json!({ "blocking": false });
    let started = rpc03(&s, "message/send", slow).await;
    let slow_id = started["result"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let canceled = rpc03(&s, "tasks/cancel", json!({ "id": slow_id })).await;
    assert_eq!(canceled["result"]["status"]["state"], "canceled");

    let (_, streamed) = rpc_at(
        &s,
        "/jsonrpc",
        ADMIN,
        None,
        json!({ "jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": message03("echo old-stream") }).to_string(),
    )
    .await;
    assert!(streamed.is_null(), "a stream, not one JSON body");
    let text = s.sse("/jsonrpc", &json!({ "jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": message03("echo old-stream") }), None).await;
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str::<Value>(d.trim()).unwrap()["result"].clone())
        .collect();
    assert_eq!(events[0]["kind"], "task");
    let last = events.last().unwrap();
    assert_eq!(
        (
            last["kind"].as_str(),
            last["final"].as_bool(),
            last["status"]["state"].as_str()
        ),
        (Some("status-update"), Some(true), Some("completed"))
    );
    // Output arrives in chunks as the PTY gives it: together it is the command's output.
    let streamed: String = events
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .filter_map(|e| e["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed, "old-stream\r\n");
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|e| e["final"] != true)
    );
}

#[tokio::test]
async fn versions_and_0_3_errors_are_kept_apart() {
    let s = TestServer::start(&[]).await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": { "id": "x" } })
        .to_string();
    let (_, v) = rpc_at(&s, "/jsonrpc", ADMIN, Some("1.0"), body).await;
    assert_rpc_error(&v, -32009, Some("VERSION_NOT_SUPPORTED"));
    assert_rpc_error(
        &rpc03(&s, "tasks/get", json!({ "id": "x" })).await,
        -32001,
        Some("TASK_NOT_FOUND"),
    );
    assert_rpc_error(
        &rpc03(&s, "agent/getAuthenticatedExtendedCard", json!({})).await,
        -32007,
        None,
    );
    assert_rpc_error(
        &rpc03(&s, "tasks/pushNotificationConfig/set", json!({})).await,
        -32602,
        None,
    );
    assert_rpc_error(&rpc03(&s, "message/send", json!({ "message": { "messageId": "m", "role": "ROLE_USER", "parts": [{ "text": "x" }] } })).await, -32602, None);
    assert_rpc_error(&rpc03(&s, "tasks/list", json!({})).await, -32601, None);

    // One card for both: 1.0 interfaces first, then 0.3, and the 0.3 top-level fields.
    let card: Value = s.public(s.url("/.well-known/agent-card.json")).await;
    let versions: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["protocolVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["1.0", "1.0", "1.0", "1.0", "0.3", "0.3"]);
    assert_eq!(
        (
            card["protocolVersion"].as_str(),
            card["preferredTransport"].as_str()
        ),
        (Some("0.3.0"), Some("JSONRPC"))
    );
    assert_eq!(
        card["url"],
        format!("http://{}/agents/local/jsonrpc", s.addr)
    );
    assert_eq!(card["securitySchemes"]["bearer"]["type"], "http");
}

#[tokio::test]
async fn jsonrpc_refuses_a_body_that_is_not_json_by_its_content_type_with_minus_32005() {
    let s = TestServer::start(&[]).await;
    let body =
        json!({ "jsonrpc": "2.0", "id": 9, "method": "ListTasks", "params": {} }).to_string();
    let req = s
        .http
        .post(format!("http://{}/jsonrpc", s.addr))
        .header("Content-Type", "text/plain")
        .header("A2A-Version", "1.0")
        .body(body);
    let (status, v) = s.call(req, ADMIN).await;
    assert_eq!(status, 200);
    assert_eq!(v["id"], 9);
    assert_rpc_error(&v, -32005, Some("CONTENT_TYPE_NOT_SUPPORTED"));
    let with_charset = s
        .http
        .post(format!("http://{}/jsonrpc", s.addr))
        .header("Content-Type", "application/json; charset=utf-8")
        .header("A2A-Version", "1.0")
        .body(
            json!({ "jsonrpc": "2.0", "id": 10, "method": "ListTasks", "params": {} }).to_string(),
        );
    let (_, ok) = s.call(with_charset, ADMIN).await;
    assert!(ok.get("result").is_some(), "{ok}");
}
