//! The agentic-sandbox executor's four A2A extensions on HTTP+JSON and JSON-RPC, named
//! after their specs' conformance scenarios (RUNTIME-CONF-*, idempotency AC-*, hitl-prompt
//! CF-*, multi-tenant MT-D-*), and `--profile agentic-sandbox`.

mod common;

use common::*;
use serde_json::{Value, json};

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

#[tokio::test]
async fn runtime_conf_001_and_006_the_card_declares_the_extensions_and_a_stable_instance_id() {
    let mut s = TestServer::start(&[]).await;
    let c = card(&s).await;
    for uri in [RUNTIME, IDEMPOTENCY, HITL, TENANT, PTY] {
        assert_eq!(
            extension(&c, uri)["required"],
            false,
            "{uri} is optional without the profile"
        );
    }
    let params = &extension(&c, RUNTIME)["params"];
    assert_eq!(
        params["runtime"], "container",
        "sessions are sandboxed by default"
    );
    assert_eq!(params["provider"], "ptyhost");
    assert_eq!(params["loadout"], "shell");
    let id = params["instance_id"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 4);
    assert!(
        params["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("pty.attach"))
    );
    assert!(params.get("image_ref").is_none());
    let tenant = &extension(&c, TENANT)["params"];
    assert_eq!(tenant["enforcement"], "declared");
    assert_eq!(tenant["default_tenant"], "default");
    assert_eq!(
        tenant["quota_response"],
        json!({ "status": 429, "header": "Retry-After" })
    );
    assert_eq!(extension(&c, HITL)["params"], json!({}));
    let idem = &extension(&c, IDEMPOTENCY)["params"];
    assert_eq!(
        (idem["ttl_seconds"].as_u64(), &idem["canonicalization"]),
        (Some(86400), &json!("jcs-rfc8785"))
    );

    // The superset card says the same; the id outlives the process.
    let superset = s.public(s.url("/.well-known/agent-card.json")).await;
    assert_eq!(extension(&superset, RUNTIME)["params"]["instance_id"], id);
    s.crash_and_restart(&[]).await;
    assert_eq!(
        extension(&card(&s).await, RUNTIME)["params"]["instance_id"],
        id
    );
}

#[tokio::test]
async fn a_server_with_the_sandbox_off_declares_the_host_runtime() {
    let s = TestServer::start(&["--sandbox", "off"]).await;
    let c = card(&s).await;
    assert_eq!(extension(&c, RUNTIME)["params"]["runtime"], "host");
    let sent = post(
        &s,
        "/message:send",
        &[RUNTIME],
        &json!({ "message": message("m1", "true") }),
    )
    .await;
    assert_eq!(sent.json()["task"]["metadata"]["runtime.kind"], "host");
}

#[tokio::test]
async fn runtime_conf_002_and_004_every_task_carries_the_runtime_and_the_activation_is_echoed() {
    let s = TestServer::start(&[]).await;
    let id = extension(&card(&s).await, RUNTIME)["params"]["instance_id"].clone();
    let sent = post(
        &s,
        "/message:send",
        &[RUNTIME],
        &json!({ "message": message("m1", "echo hi") }),
    )
    .await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    assert_eq!(sent.header("a2a-extensions"), Some(RUNTIME));
    let task = &sent.json()["task"];
    assert_eq!(task["metadata"]["runtime.instance_id"], id);
    assert_eq!(task["metadata"]["runtime.kind"], "container");
    assert_eq!(task["metadata"]["runtime.provider"], "ptyhost");
    let tid = task["id"].as_str().unwrap();

    let got = post(
        &s,
        "/jsonrpc",
        &[RUNTIME],
        &rpc("GetTask", json!({ "id": tid })),
    )
    .await;
    assert_eq!(got.header("a2a-extensions"), Some(RUNTIME));
    assert_eq!(got.json()["result"]["metadata"]["runtime.instance_id"], id);
    let legacy = post(
        &s,
        "/jsonrpc",
        &[RUNTIME],
        &rpc("tasks/get", json!({ "id": tid })),
    )
    .await;
    assert_eq!(
        legacy.json()["result"]["metadata"]["runtime.kind"],
        "container"
    );
    let (_, listed) = s.a2a("GET", "/tasks", ADMIN, None).await;
    assert_eq!(listed["tasks"][0]["metadata"]["runtime.instance_id"], id);
    // A stream's first Task carries it too.
    let streamed = post(
        &s,
        "/message:stream",
        &[RUNTIME],
        &json!({ "message": message("m2", "true") }),
    )
    .await;
    let first = streamed
        .text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap();
    let first: Value = serde_json::from_str(first.trim()).unwrap();
    assert_eq!(first["task"]["metadata"]["runtime.instance_id"], id);
}

#[tokio::test]
async fn runtime_conf_003_the_profile_requires_runtime_and_idempotency_and_serves_health() {
    let s = TestServer::start(&["--profile", "agentic-sandbox"]).await;
    let c = card(&s).await;
    assert_eq!(extension(&c, RUNTIME)["required"], true);
    assert_eq!(extension(&c, IDEMPOTENCY)["required"], true);
    assert_eq!(extension(&c, HITL)["required"], false);
    assert_eq!(extension(&c, TENANT)["required"], false);
    assert_eq!(extension(&c, PTY)["required"], false);
    assert_eq!(health(&s).await, (200, "healthy".to_owned()));

    let body = json!({ "message": message(&uuid(), "true") });
    let bare = post(&s, "/message:send", &[], &body).await;
    assert_eq!(bare.status, 400);
    let info = &bare.json()["error"]["details"][0];
    assert_eq!(info["reason"], "EXTENSION_SUPPORT_REQUIRED");
    assert_eq!(info["metadata"]["code"], "EXTENSION_REQUIRED");
    assert_eq!(info["metadata"]["extension"], RUNTIME);
    let half = post(
        &s,
        "/jsonrpc",
        &[RUNTIME],
        &rpc("SendMessage", body.clone()),
    )
    .await;
    assert_eq!(half.json()["error"]["code"], -32008);
    assert_eq!(
        half.json()["error"]["data"][0]["metadata"]["extension"],
        IDEMPOTENCY
    );
    let (status, read) = s.a2a("GET", "/agents/local/tasks", ADMIN, None).await;
    assert_eq!(status, 400, "reads need the required extensions too");
    assert_eq!(
        read["error"]["details"][0]["reason"],
        "EXTENSION_SUPPORT_REQUIRED"
    );

    let both = post(&s, "/message:send", &[RUNTIME, IDEMPOTENCY], &body).await;
    assert_eq!(both.status, 200, "{}", both.text);
    assert_eq!(
        both.header("a2a-extensions"),
        Some(format!("{RUNTIME}, {IDEMPOTENCY}").as_str())
    );
}

#[tokio::test]
async fn health_is_the_profiles_alone() {
    let s = TestServer::start(&[]).await;
    assert_ne!(health(&s).await.1, "healthy");
}

/// A send under idempotency/v1 in a session of its own: `echo $n >> count`, whose
/// effect shows how often it ran.
fn counted(sid: &str, id: &str) -> Value {
    let mut m = message(id, "echo ran >> runs; wc -l < runs");
    m["contextId"] = json!(sid);
    json!({ "message": m })
}

#[tokio::test]
async fn idempotency_ac1_a_retry_gets_the_first_response_and_runs_nothing_on_both_bindings() {
    let s = TestServer::start(&[]).await;
    let sid = s.create_session(json!({})).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = counted(&sid, &uuid());
    let first = post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(
        first.header("idempotent-replayed"),
        None,
        "the first answer is no replay"
    );
    assert_eq!(first.header("a2a-extensions"), Some(IDEMPOTENCY));
    // Key order and whitespace do not make another request.
    let reordered: Value =
        serde_json::from_str(&serde_json::to_string_pretty(&body).unwrap()).unwrap();
    let again = post(&s, "/message:send", &[IDEMPOTENCY], &reordered).await;
    assert_eq!(again.status, first.status);
    assert_eq!(again.text, first.text, "byte for byte");
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.header("a2a-extensions"), Some(IDEMPOTENCY));
    assert_eq!(tasks_in(&s, &sid).await, 1, "the retry ran nothing");

    let call = rpc("SendMessage", counted(&sid, &uuid()));
    let first = post(&s, "/jsonrpc", &[IDEMPOTENCY], &call).await;
    let again = post(&s, "/jsonrpc", &[IDEMPOTENCY], &call).await;
    assert_eq!(again.text, first.text);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(tasks_in(&s, &sid).await, 2);
    // A stream replays its whole event text.
    let stream = rpc(
        "message/stream",
        json!({ "message": {
            "kind": "message", "messageId": uuid(), "role": "user", "contextId": sid,
            "parts": [{ "kind": "text", "text": "echo streamed" }],
        }}),
    );
    let first = post(&s, "/jsonrpc", &[IDEMPOTENCY], &stream).await;
    assert!(first.text.contains("streamed"), "{}", first.text);
    let again = post(&s, "/jsonrpc", &[IDEMPOTENCY], &stream).await;
    assert_eq!(again.text, first.text);
    assert_eq!(again.header("content-type"), first.header("content-type"));
    assert_eq!(tasks_in(&s, &sid).await, 3);
}

#[tokio::test]
async fn idempotency_ac2_a_key_reused_with_another_request_is_422_and_the_first_stays() {
    let s = TestServer::start(&[]).await;
    let sid = s.create_session(json!({})).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = uuid();
    let body = counted(&sid, &id);
    let first = post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    let mut other = body.clone();
    other["message"]["parts"][0]["text"] = json!("echo something else");
    let refused = post(&s, "/message:send", &[IDEMPOTENCY], &other).await;
    assert_eq!(refused.status, 422, "{}", refused.text);
    let err = &refused.json()["error"];
    assert_eq!(
        err["details"][0]["reason"],
        "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD"
    );
    assert_eq!(err["data"]["message_id"], id);
    assert_ne!(
        err["data"]["original_request_hash"],
        err["data"]["submitted_request_hash"]
    );

    let rpc_refused = post(&s, "/jsonrpc", &[IDEMPOTENCY], &rpc("SendMessage", other)).await;
    assert_eq!(rpc_refused.status, 422);
    let e = &rpc_refused.json()["error"];
    assert_eq!(e["code"], -32422);
    assert_eq!(
        e["data"]["code"],
        "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD"
    );

    let again = post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.text, first.text);
    assert_eq!(tasks_in(&s, &sid).await, 1);

    let shapeless = post(
        &s,
        "/message:send",
        &[IDEMPOTENCY],
        &counted(&sid, "not-a-uuid"),
    )
    .await;
    assert_eq!(shapeless.status, 400);
    assert_eq!(tasks_in(&s, &sid).await, 1);
    // Without the extension nothing is keyed.
    let plain = post(&s, "/message:send", &[], &body).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("idempotent-replayed"), None);
    assert_eq!(tasks_in(&s, &sid).await, 2);
}

#[tokio::test]
async fn idempotency_ac3_past_the_ttl_a_retry_runs_as_new() {
    let s = TestServer::start(&["--idempotency-ttl", "1s"]).await;
    let sid = s.create_session(json!({})).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = counted(&sid, &uuid());
    post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let later = post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    assert_eq!(later.status, 200, "{}", later.text);
    assert_eq!(later.header("idempotent-replayed"), None);
    assert_eq!(tasks_in(&s, &sid).await, 2);
    let again = post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.text, later.text);
}

#[tokio::test]
async fn idempotency_ac4_the_cache_survives_a_restart() {
    let mut s = TestServer::start(&[]).await;
    let body = json!({ "message": message(&uuid(), "echo before-restart") });
    let first = post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    assert_eq!(first.status, 200);
    s.crash_and_restart(&[]).await;
    let again = post(&s, "/message:send", &[IDEMPOTENCY], &body).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.text, first.text);
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

#[tokio::test]
async fn hitl_cf1_to_cf3_the_prompt_envelope_is_answered_once_and_checked_against_its_schema() {
    let s = TestServer::start(&[]).await;
    let task = prompted(&s).await;
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let envelope = &task["status"]["message"]["metadata"][HITL];
    let prompt_id = &envelope["prompt_id"];
    assert_eq!(
        uuid::Uuid::parse_str(prompt_id.as_str().unwrap())
            .unwrap()
            .get_version_num(),
        4
    );
    assert_eq!(envelope["prompt"], "Name?");
    assert_eq!(envelope["response_schema"]["type"], "object");
    assert_eq!(envelope["response_schema"]["required"], json!(["text"]));

    // CF-6: the envelope is what a later read gets.
    let tid = task["id"].as_str().unwrap();
    let (_, read) = s.a2a("GET", &format!("/tasks/{tid}"), ADMIN, None).await;
    assert_eq!(
        read["status"]["message"]["metadata"][HITL]["prompt_id"],
        *prompt_id
    );

    // CF-3: off the schema is 422 with validation errors, and the task still waits.
    let bad = response(
        &task,
        prompt_id,
        json!({ "text": true, "extra_unknown_field": 42 }),
    );
    let refused = post(&s, "/message:send", &[HITL], &bad).await;
    assert_eq!(refused.status, 422, "{}", refused.text);
    let errors = refused.json()["error"]["data"]["validation_errors"].clone();
    let keywords: Vec<&str> = errors
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["keyword"].as_str().unwrap())
        .collect();
    assert!(
        keywords.contains(&"type") && keywords.contains(&"additionalProperties"),
        "{errors}"
    );
    let rpc_refused = post(&s, "/jsonrpc", &[HITL], &rpc("SendMessage", bad)).await;
    assert_eq!(rpc_refused.status, 422);
    assert_eq!(rpc_refused.json()["error"]["code"], -32011);
    assert_eq!(
        rpc_refused.json()["error"]["message"],
        "hitl_response_invalid"
    );
    let (_, still) = s.a2a("GET", &format!("/tasks/{tid}"), ADMIN, None).await;
    assert_eq!(still["status"]["state"], "TASK_STATE_INPUT_REQUIRED");

    // CF-1, CF-2: a valid answer is typed and resumes the task; a second one is 409.
    let good = response(&task, prompt_id, json!({ "text": "Ada" }));
    let answered = post(&s, "/message:send", &[HITL], &good).await;
    assert_eq!(answered.status, 200, "{}", answered.text);
    let done = &answered.json()["task"];
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert!(
        done["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello-Ada")
    );
    let twice = post(
        &s,
        "/message:send",
        &[HITL],
        &response(&task, prompt_id, json!({ "text": "Bob" })),
    )
    .await;
    assert_eq!(twice.status, 409, "{}", twice.text);
    let rpc_twice = post(
        &s,
        "/jsonrpc",
        &[HITL],
        &rpc(
            "SendMessage",
            response(&task, prompt_id, json!({ "text": "Bob" })),
        ),
    )
    .await;
    assert_eq!(rpc_twice.json()["error"]["code"], -32010);
    assert_eq!(
        rpc_twice.json()["error"]["message"],
        "hitl_already_answered_or_unknown"
    );
}

#[tokio::test]
async fn hitl_without_activation_a_prompt_carries_no_envelope() {
    let s = TestServer::start(&[]).await;
    let body = json!({ "message": message("ask", "read -p 'Name? ' n") });
    let asked = post(&s, "/message:send", &[], &body).await;
    let task = &asked.json()["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert!(
        task["status"]["message"]["metadata"].get(HITL).is_none(),
        "{task}"
    );
}

#[tokio::test]
async fn mt_d_a_tenant_id_is_validated_and_echoed_on_every_message_and_status_update() {
    let s = TestServer::start(&[]).await;
    let mut m = message("t1", "echo tenant");
    m["metadata"] = json!({ "tenant_id": "aiwg-prod" });
    let streamed = post(&s, "/message:stream", &[TENANT], &json!({ "message": m })).await;
    assert_eq!(streamed.header("a2a-extensions"), Some(TENANT));
    let events: Vec<Value> = streamed
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    let updates: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.get("statusUpdate"))
        .collect();
    assert!(!updates.is_empty());
    for u in &updates {
        assert_eq!(u["metadata"]["tenant_id"], "aiwg-prod", "{u}");
        if let Some(msg) = u["status"].get("message") {
            assert_eq!(msg["metadata"]["tenant_id"], "aiwg-prod", "{u}");
        }
    }
    // Activated without one: the default tenant.
    let plain = post(
        &s,
        "/message:send",
        &[TENANT],
        &json!({ "message": message("t2", "true") }),
    )
    .await;
    let task = &plain.json()["task"];
    assert_eq!(task["metadata"]["tenant_id"], "default");
    assert_eq!(
        task["status"]["message"]["metadata"]["tenant_id"],
        "default"
    );

    let mut bad = message("t3", "echo never");
    bad["metadata"] = json!({ "tenant_id": "not a tenant!" });
    let refused = post(
        &s,
        "/message:send",
        &[TENANT],
        &json!({ "message": bad.clone() }),
    )
    .await;
    assert_eq!(refused.status, 400);
    assert!(refused.text.contains("metadata.tenant_id"));
    let legacy = json!({ "message": {
        "kind": "message", "messageId": "t4", "role": "user",
        "parts": [{ "kind": "text", "text": "echo never" }], "metadata": { "tenant_id": "" },
    }});
    let rpc_refused = post(&s, "/jsonrpc", &[TENANT], &rpc("message/send", legacy)).await;
    assert_eq!(rpc_refused.json()["error"]["code"], -32602);
    let (_, listed) = s.a2a("GET", "/tasks", ADMIN, None).await;
    assert_eq!(
        listed["tasks"].as_array().unwrap().len(),
        2,
        "a refused send started nothing"
    );
}

#[tokio::test]
async fn mt_d_the_declared_tier_example_a_nonblocking_message_send_is_accepted_and_echoes_its_tenant()
 {
    let s = TestServer::start(&[]).await;
    // The shape of the spec's declared-v20 example: a 0.3 message/send, blocking false.
    let call = rpc(
        "message/send",
        json!({
            "message": {
                "kind": "message", "messageId": "01HM4Z9KQH3GYV7K2P8B5N0WQE", "role": "user",
                "parts": [{ "kind": "text", "text": "echo regression-suite" }],
                "metadata": { "tenant_id": "aiwg-prod" },
            },
            "configuration": { "blocking": false, "acceptedOutputModes": ["text/plain", "application/json"] },
        }),
    );
    let sent = post(&s, "/jsonrpc", &[TENANT], &call).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    assert_eq!(sent.header("a2a-extensions"), Some(TENANT));
    let task = &sent.json()["result"];
    assert_eq!(task["kind"], "task");
    assert_eq!(task["metadata"]["tenant_id"], "aiwg-prod");
    // Declared: any client reads the task (nothing is scoped by tenant).
    let tid = task["id"].as_str().unwrap();
    let got = post(
        &s,
        "/jsonrpc",
        &[TENANT],
        &rpc("tasks/get", json!({ "id": tid })),
    )
    .await;
    assert_eq!(got.json()["result"]["id"], tid);
}
