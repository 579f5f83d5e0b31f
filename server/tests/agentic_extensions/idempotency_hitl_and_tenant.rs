use super::*;

#[tokio::test]
async fn idempotency_ac3_past_the_ttl_a_retry_runs_as_new() {
    let s = TestServer::start(&["--idempotency-ttl", "1s"]).await;
    let sid = s.create_session(json!({})).await.session_id;
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
