//! Push notifications against the real server and a real local webhook receiver: config
//! operations in every binding and version, signed and authorized deliveries in order,
//! retries after a 500 with a stable event id, the SSRF guard, and delivery after a restart.

#[path = "../common/mod.rs"]
mod common;
mod receiver;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use receiver::{Delivery, Receiver};
use serde_json::{Value, json};
use wire::a2a::{ListPushConfigsResponse, ListTasksResponse, TaskPushNotificationConfig as Config};
use wire::rpc::{JsonRpcResponse, Outcome, StatusBody};

type Configs = ListPushConfigsResponse;

async fn rest(
    s: &TestServer,
    method: &str,
    path: &str,
    version: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = if version == "1.0" {
        s.url(path)
    } else {
        s.url(&format!("/v1{path}"))
    };
    let req = match method {
        "GET" => s.http.get(url),
        "DELETE" => s.http.delete(url),
        _ => s
            .http
            .post(url)
            .header("Content-Type", "application/json")
            .body(body.unwrap_or(json!({})).to_string()),
    };
    let req = if version == "1.0" {
        req.header("A2A-Version", "1.0")
    } else {
        req
    };
    s.call(req, ADMIN).await
}

async fn rpc(s: &TestServer, method: &str, params: Value) -> Value {
    let req = s
        .http
        .post(s.url("/jsonrpc"))
        .header("Content-Type", "application/json")
        .body(json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string());
    let req = if method.contains('/') {
        req
    } else {
        req.header("A2A-Version", "1.0")
    };
    s.call(req, ADMIN).await.1
}

/// Whether some delivery announced `state`.
fn reached(state: TaskState) -> impl Fn(&[Delivery]) -> bool {
    move |seen| seen.iter().any(|d| announced(d) == Some(state))
}

/// The state a 1.0 status-update delivery announces.
fn announced(d: &Delivery) -> Option<TaskState> {
    match d.event() {
        StreamResponse::StatusUpdate(u) => Some(u.status.state),
        _ => None,
    }
}

/// The task a 1.0 status-update delivery is about.
fn updated_task(d: &Delivery) -> Option<String> {
    match d.event() {
        StreamResponse::StatusUpdate(u) => Some(u.task_id),
        _ => None,
    }
}

/// Starts a shell task over REST 1.0 without waiting; returns its id.
async fn start_task(s: &TestServer, command: &str, push: Option<Value>) -> String {
    let configuration = json!({ "returnImmediately": true, "taskPushNotificationConfig": push });
    let (status, sent) = rest(
        s,
        "POST",
        "/message:send",
        "1.0",
        Some(json!({
            "message": { "messageId": uuid(), "role": "ROLE_USER", "parts": [{ "text": command }] },
            "configuration": configuration,
        })),
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    task_in(&sent).id
}

/// A JSON-RPC 1.0 answer's result, which must be one.
fn result<T: serde::de::DeserializeOwned>(answer: Value) -> T {
    let answer: JsonRpcResponse<T> =
        serde_json::from_value(answer.clone()).unwrap_or_else(|e| panic!("{e}: {answer}"));
    match answer.outcome {
        Outcome::Result(r) => r,
        Outcome::Error(e) => panic!("an error: {e:?}"),
    }
}

/// A 1.0 refusal's ErrorInfo reason.
fn reason(body: &Value) -> String {
    let status: StatusBody = serde_json::from_value(body.clone()).unwrap();
    status.error.details[0].reason.clone()
}

fn uuid() -> String {
    format!("m-{}", rand_suffix())
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[tokio::test]
async fn deliveries_are_signed_authorized_and_in_task_order() {
    let s = TestServer::start(&["--push-allow-loopback"]).await;
    let (receiver, url) = Receiver::start(0).await;
    let task = start_task(
        &s,
        "printf 'pushed %s\\n' out; sleep 0.2; printf done",
        Some(json!({
            "url": url,
            "token": "tok-3f9a",
            "authentication": { "scheme": "Bearer", "credentials": "receiver-secret" },
        })),
    )
    .await;
    let seen = receiver.until(reached(TaskState::Completed)).await;

    let mut ids = HashSet::new();
    for d in &seen {
        assert!(d.signed_by("tok-3f9a"), "signature over the raw body");
        assert!(!d.signed_by("another-token"));
        assert_eq!(d.header("content-type"), "application/a2a+json");
        assert_eq!(d.header("authorization"), "Bearer receiver-secret");
        assert_eq!(d.header("x-a2a-notification-token"), "tok-3f9a");
        let ts: i64 = d.header("webhook-timestamp").parse().unwrap();
        assert!((ts - rand_suffix() as i64 / 1_000_000_000).abs() < 60);
        assert!(
            ids.insert(d.header("webhook-id").to_owned()),
            "a new id per event"
        );
    }
    let states: Vec<TaskState> = seen.iter().filter_map(announced).collect();
    assert_eq!(
        states,
        [TaskState::Working, TaskState::Completed],
        "every status change, in order"
    );
    let text: String = seen.iter().map(|d| update_text(&d.event())).collect();
    assert!(
        text.contains("pushed out") && text.contains("done"),
        "{text:?}"
    );
    assert_eq!(updated_task(seen.last().unwrap()), Some(task));

    // The task ended: nothing more is delivered.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.seen().len(), seen.len());
}

#[tokio::test]
async fn a_delivery_answered_500_is_retried_with_the_same_event_id() {
    let s = TestServer::start(&["--push-allow-loopback", "--executor", "conformance"]).await;
    let (receiver, url) = Receiver::start(2).await;
    let (status, sent) = rest(
        &s,
        "POST",
        "/message:send",
        "1.0",
        Some(json!({
            "message": { "messageId": "tck-complete-task", "role": "ROLE_USER", "parts": [{ "text": "hi" }] },
            "configuration": { "taskPushNotificationConfig": { "url": url, "token": "t0k" } },
        })),
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    let seen = receiver.until(|seen| seen.len() >= 3).await;
    let first_id = seen[0].header("webhook-id").to_owned();
    assert!(
        seen[..3]
            .iter()
            .all(|d| d.header("webhook-id") == first_id && d.body == seen[0].body),
        "the two 500s and the success carry one event id and one body"
    );
    // A receiver that deduplicates by id sees each event once, in order.
    let mut unique = Vec::new();
    for d in &seen {
        if !unique
            .iter()
            .any(|u: &Delivery| u.header("webhook-id") == d.header("webhook-id"))
        {
            unique.push(d.clone());
        }
    }
    assert_eq!(
        unique.iter().filter_map(announced).last(),
        Some(TaskState::Completed)
    );
    assert!(unique.iter().all(|d| d.signed_by("t0k")));
}

#[tokio::test]
async fn push_config_operations_in_rest_and_jsonrpc_1_0() {
    let s = TestServer::start(&["--push-allow-loopback"]).await;
    let (_receiver, url) = Receiver::start(0).await;
    let task = start_task(&s, "sleep 30", None).await;
    let base = format!("/tasks/{task}/pushNotificationConfigs");

    // REST: the server assigns the id and a token when the client gives none.
    let (status, created) = rest(&s, "POST", &base, "1.0", Some(json!({ "url": url }))).await;
    assert_eq!(status, 200, "{created}");
    let created: Config = serde_json::from_value(created).unwrap();
    let id = created.id.clone();
    assert_eq!(created.task_id, task);
    assert!(created.token.as_ref().is_some_and(|t| t.len() >= 32));
    let (_, got) = rest(&s, "GET", &format!("{base}/{id}"), "1.0", None).await;
    assert_eq!(serde_json::from_value::<Config>(got).unwrap(), created);

    // JSON-RPC: create with a chosen id, then get, list, delete.
    let made = rpc(
        &s,
        "CreateTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "mine", "url": url, "token": "abc" }),
    )
    .await;
    assert_eq!(result::<Config>(made).id, "mine");
    let got = rpc(
        &s,
        "GetTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "mine" }),
    )
    .await;
    assert_eq!(result::<Config>(got).token.as_deref(), Some("abc"));
    let listed = rpc(
        &s,
        "ListTaskPushNotificationConfigs",
        json!({ "taskId": task }),
    )
    .await;
    let listed: Configs = result(listed);
    let ids: Vec<&str> = listed.configs.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, [id.as_str(), "mine"], "creation order");
    assert_eq!(listed.next_page_token, "");
    let page = rpc(
        &s,
        "ListTaskPushNotificationConfigs",
        json!({ "taskId": task, "pageSize": 1 }),
    )
    .await;
    let page: Configs = result(page);
    assert_eq!(page.configs.len(), 1);
    let next = page.next_page_token;
    let rest_page = rpc(
        &s,
        "ListTaskPushNotificationConfigs",
        json!({ "taskId": task, "pageSize": 1, "pageToken": next }),
    )
    .await;
    assert_eq!(result::<Configs>(rest_page).configs[0].id, "mine");

    let deleted = rpc(
        &s,
        "DeleteTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "mine" }),
    )
    .await;
    assert_eq!(result::<Value>(deleted), Value::Null);
    let again = rpc(
        &s,
        "DeleteTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "mine" }),
    )
    .await;
    result::<Value>(again);
    let gone = rpc(
        &s,
        "GetTaskPushNotificationConfig",
        json!({ "taskId": task, "id": "mine" }),
    )
    .await;
    let gone: JsonRpcResponse<Value> = serde_json::from_value(gone).unwrap();
    assert!(matches!(gone.outcome, Outcome::Error(e) if e.code == -32001));
    let (status, _) = rest(&s, "DELETE", &format!("{base}/{id}"), "1.0", None).await;
    assert_eq!(status, 200);
    let (status, err) = rest(&s, "GET", &format!("{base}/{id}"), "1.0", None).await;
    assert_eq!((status, reason(&err).as_str()), (404, "TASK_NOT_FOUND"));

    // Bad configs change nothing.
    for bad in [
        json!({ "url": "ftp://example.com/x" }),
        json!({ "url": "not a url" }),
        json!({ "url": url, "token": "two words" }),
        json!({ "url": url, "authentication": { "scheme": "Bearer\r\nX-Evil: 1" } }),
        json!({ "url": url, "taskId": "another-task" }),
        json!({ "token": "no url" }),
    ] {
        let (status, err) = rest(&s, "POST", &base, "1.0", Some(bad.clone())).await;
        assert_eq!(status, 400, "{bad}: {err}");
    }
    let (_, listed) = rest(&s, "GET", &base, "1.0", None).await;
    let listed: Configs = serde_json::from_value(listed).unwrap();
    assert_eq!(
        (listed.configs, listed.next_page_token),
        (vec![], String::new())
    );
    let (status, _) = rest(
        &s,
        "POST",
        "/tasks/nope/pushNotificationConfigs",
        "1.0",
        Some(json!({ "url": url })),
    )
    .await;
    assert_eq!(status, 404);

    // Observers may not read configs: they hold credentials.
    let observer = s.token("pty:observe", None).await;
    let (status, _) = s
        .call(
            s.http.get(s.url(&base)).header("A2A-Version", "1.0"),
            &observer,
        )
        .await;
    assert_eq!(status, 403);
}

/// Raw JSON on purpose: this pins the 0.3 config and delivery shapes.
#[tokio::test]
async fn push_config_operations_in_0_3_shapes_and_0_3_deliveries() {
    let s = TestServer::start(&["--push-allow-loopback", "--executor", "conformance"]).await;
    let (receiver, url) = Receiver::start(0).await;
    // An inline 0.3 config: deliveries are 0.3 Tasks, on status changes.
    let sent = rpc(
        &s,
        "message/send",
        json!({
            "message": { "kind": "message", "messageId": "tck-complete-task", "role": "user", "parts": [{ "kind": "text", "text": "hi" }] },
            "configuration": { "blocking": true, "pushNotificationConfig": { "url": url, "token": "legacy", "authentication": { "schemes": ["Basic"], "credentials": "dTpw" } } },
        }),
    )
    .await;
    let task = sent["result"]["id"].as_str().unwrap().to_owned();
    let seen = receiver
        .until(|seen| {
            seen.iter()
                .any(|d| d.json()["status"]["state"] == "completed")
        })
        .await;
    for d in &seen {
        assert_eq!(d.header("content-type"), "application/json");
        assert_eq!(d.header("authorization"), "Basic dTpw");
        assert!(d.signed_by("legacy"));
        assert_eq!(d.json()["kind"], "task");
        assert_eq!(d.json()["id"], task.as_str());
    }

    // JSON-RPC 0.3: set (the id defaults to the task's), get, list, delete.
    let set = rpc(
        &s,
        "tasks/pushNotificationConfig/set",
        json!({ "taskId": task, "pushNotificationConfig": { "url": url } }),
    )
    .await;
    assert_eq!(set["result"]["taskId"], task.as_str(), "{set}");
    let got = rpc(
        &s,
        "tasks/pushNotificationConfig/get",
        json!({ "id": task, "pushNotificationConfigId": task }),
    )
    .await;
    assert_eq!(got["result"]["pushNotificationConfig"]["url"], url.as_str());
    // 0.3 named a task's one config after the task: the set replaced the inline one.
    let listed = rpc(
        &s,
        "tasks/pushNotificationConfig/list",
        json!({ "id": task }),
    )
    .await;
    assert_eq!(listed["result"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        listed["result"][0]["pushNotificationConfig"]["id"],
        task.as_str()
    );
    assert!(
        listed["result"][0]["pushNotificationConfig"]
            .get("authentication")
            .is_none()
    );
    let deleted = rpc(
        &s,
        "tasks/pushNotificationConfig/delete",
        json!({ "id": task, "pushNotificationConfigId": task }),
    )
    .await;
    assert_eq!(deleted["result"], Value::Null);

    // REST 0.3: the proto's CreateTaskPushNotificationConfigRequest, as a2a-sdk sends it.
    let (status, made) = rest(
        &s,
        "POST",
        &format!("/tasks/{task}/pushNotificationConfigs"),
        "0.3",
        Some(json!({ "parent": format!("tasks/{task}"), "config_id": "c1", "config": { "push_notification_config": { "url": url, "token": "x" } } })),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    assert_eq!(
        made["name"],
        format!("tasks/{task}/pushNotificationConfigs/c1")
    );
    assert_eq!(made["pushNotificationConfig"]["token"], "x");
    let (_, got) = rest(
        &s,
        "GET",
        &format!("/tasks/{task}/pushNotificationConfigs/c1"),
        "0.3",
        None,
    )
    .await;
    assert_eq!(got, made);
}

#[tokio::test]
async fn loopback_and_link_local_targets_are_refused_unless_allowed() {
    let strict = TestServer::start(&[]).await;
    let task = start_task(&strict, "sleep 30", None).await;
    let path = format!("/tasks/{task}/pushNotificationConfigs");
    for target in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest",
    ] {
        let (status, err) = rest(
            &strict,
            "POST",
            &path,
            "1.0",
            Some(json!({ "url": target })),
        )
        .await;
        assert_eq!(status, 400, "{target}");
        assert_eq!(reason(&err), "INVALID_PARAMS");
    }
    let (status, _) = rest(&strict, "POST", "/message:send", "1.0", Some(json!({
        "message": { "messageId": "m-inline", "role": "ROLE_USER", "parts": [{ "text": "true" }] },
        "configuration": { "taskPushNotificationConfig": { "url": "http://127.0.0.1:9/" } },
    }))).await;
    assert_eq!(
        status, 400,
        "an inline config is checked before the task starts"
    );
    let (_, listed) = rest(&strict, "GET", "/tasks", "1.0", None).await;
    let listed: ListTasksResponse = serde_json::from_value(listed).unwrap();
    assert_eq!(listed.total_size, 1, "the refused send started nothing");

    let lax = TestServer::start(&["--push-allow-loopback"]).await;
    let task = start_task(&lax, "sleep 30", None).await;
    let path = format!("/tasks/{task}/pushNotificationConfigs");
    let (status, _) = rest(
        &lax,
        "POST",
        &path,
        "1.0",
        Some(json!({ "url": "http://localhost:9/hook" })),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = rest(
        &lax,
        "POST",
        &path,
        "1.0",
        Some(json!({ "url": "http://169.254.169.254/latest" })),
    )
    .await;
    assert_eq!(status, 400, "link-local stays refused");
}

#[tokio::test]
async fn a_task_cut_short_by_a_restart_still_pushes_its_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = TestServer::start_in(tmp.path(), &["--push-allow-loopback"]).await;
    let (receiver, url) = Receiver::start(0).await;
    let task = start_task(&s, "sleep 100", Some(json!({ "url": url, "token": "tok" }))).await;
    receiver.until(reached(TaskState::Working)).await;
    s.kill().await;
    let _s = TestServer::start_in(tmp.path(), &["--push-allow-loopback"]).await;
    let seen = receiver.until(reached(TaskState::Failed)).await;
    let last = seen.last().unwrap();
    assert!(last.signed_by("tok"));
    assert_eq!(updated_task(last), Some(task));
}
