use super::*;

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
    assert_eq!(
        params["capabilities"],
        json!([
            "pty.attach",
            "pty.observe",
            "pty.replay",
            "session.files",
            "task.cancel",
            "warm_pool.manage",
            "instance.snapshot",
            "instance.restore",
            "instance.fork"
        ]),
        "exactly what works"
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
    let capabilities = &extension(&c, RUNTIME)["params"]["capabilities"];
    assert!(
        !capabilities.to_string().contains("instance."),
        "no workspaces, no snapshots: {capabilities}"
    );
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

#[tokio::test]
async fn idempotency_ac1_a_retry_gets_the_first_response_and_runs_nothing_on_both_bindings() {
    let s = TestServer::start(&[]).await;
    let sid = s.create_session(json!({})).await.session_id;
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
    let sid = s.create_session(json!({})).await.session_id;
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
