use super::*;

#[tokio::test]
async fn bad_requests_get_typed_errors_and_start_nothing() {
    let s = TestServer::start(&[]).await;
    let cases = [
        (
            json!({ "message": { "messageId": "x", "role": "user", "parts": [{ "text": "ls" }] } }),
            "INVALID_REQUEST",
        ),
        (
            json!({ "message": { "messageId": "x", "role": "ROLE_USER", "parts": [] } }),
            "INVALID_REQUEST",
        ),
        (
            json!({ "message": { "messageId": "x", "role": "ROLE_USER", "parts": [{ "text": "a", "raw": "YQ==" }] } }),
            "INVALID_REQUEST",
        ),
        (json!({ "nothing": true }), "INVALID_REQUEST"),
        (
            json!({ "message": { "messageId": "x", "role": "ROLE_USER", "parts": [{ "text": "two\nlines" }] } }),
            "INVALID_PARAMS",
        ),
        (
            json!({ "message": { "messageId": "x", "role": "ROLE_USER", "contextId": "no-such-session", "parts": [{ "text": "ls" }] } }),
            "INVALID_PARAMS",
        ),
        (
            json!({ "message": { "messageId": "x", "role": "ROLE_AGENT", "parts": [{ "text": "ls" }] } }),
            "INVALID_PARAMS",
        ),
    ];
    for (body, reason) in cases {
        let (status, err) = s
            .a2a("POST", "/message:send", ADMIN, Some(body.clone()))
            .await;
        assert_eq!(status, 400, "{body}");
        assert_status(&err, 400, "INVALID_ARGUMENT", reason);
    }
    let (status, err) = s.a2a("POST", "/message:send", ADMIN, Some(json!({ "message": { "messageId": "x", "role": "ROLE_USER", "taskId": "nope", "parts": [{ "text": "ls" }] } }))).await;
    assert_eq!(status, 404);
    assert_status(&err, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    let (status, err) = s.a2a("GET", "/tasks/nope", ADMIN, None).await;
    assert_eq!(status, 404);
    assert_status(&err, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    let (status, err) = s
        .a2a("GET", "/tasks/x/pushNotificationConfigs", ADMIN, None)
        .await;
    assert_eq!(status, 404);
    assert_status(&err, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    let (_, list) = s.a2a("GET", "/tasks", ADMIN, None).await;
    assert_eq!(list["totalSize"], 0, "nothing was started");
    assert_eq!(list["nextPageToken"], "");
}

#[tokio::test]
async fn scopes_and_session_bindings_apply_to_tasks() {
    let s = TestServer::start(&[]).await;
    let (status, err) = s
        .a2a("POST", "/message:send", "nope", Some(send("true")))
        .await;
    assert_eq!(status, 401);
    assert_status(&err, 401, "UNAUTHENTICATED", "UNAUTHENTICATED");
    let observe = s.token("pty:observe", None).await;
    let (status, err) = s
        .a2a("POST", "/message:send", &observe, Some(send("true")))
        .await;
    assert_eq!(status, 403);
    assert_eq!(err["error"]["status"], "PERMISSION_DENIED");

    let (_, mine) = s
        .a2a("POST", "/message:send", ADMIN, Some(send("echo mine")))
        .await;
    let (_, theirs) = s
        .a2a("POST", "/message:send", ADMIN, Some(send("echo theirs")))
        .await;
    let sid = mine["task"]["contextId"].as_str().unwrap();
    let bound = s.token("pty:control", Some(sid)).await;
    let (_, list) = s.a2a("GET", "/tasks", &bound, None).await;
    assert_eq!(list["totalSize"], 1);
    assert_eq!(list["tasks"][0]["id"], mine["task"]["id"]);
    let other = theirs["task"]["id"].as_str().unwrap();
    assert_eq!(
        s.a2a("GET", &format!("/tasks/{other}"), &bound, None)
            .await
            .0,
        404
    );
    assert_eq!(
        s.a2a("POST", "/message:send", &bound, Some(send("true")))
            .await
            .0,
        403,
        "no new sessions"
    );
    let mut in_mine = send("echo bound");
    in_mine["message"]["contextId"] = json!(sid);
    let (_, ok) = s.a2a("POST", "/message:send", &bound, Some(in_mine)).await;
    assert_eq!(output(&ok["task"]), "bound\r\n");
}

#[tokio::test]
async fn finished_tasks_survive_a_restart_and_running_ones_fail_with_a_reason() {
    let mut s = TestServer::start(&[]).await;
    let (_, done) = s
        .a2a("POST", "/message:send", ADMIN, Some(send("echo durable")))
        .await;
    let mut req = send("sleep 100");
    req["configuration"] = json!({ "returnImmediately": true });
    let (_, running) = s.a2a("POST", "/message:send", ADMIN, Some(req)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.kill().await;
    let s2 = TestServer::start_in(&s.dir, &[]).await;
    let done_id = done["task"]["id"].as_str().unwrap();
    let (_, again) = s2
        .a2a("GET", &format!("/tasks/{done_id}"), ADMIN, None)
        .await;
    assert_eq!(again, done["task"], "a finished task reads back unchanged");
    let running_id = running["task"]["id"].as_str().unwrap();
    let (_, failed) = s2
        .a2a("GET", &format!("/tasks/{running_id}"), ADMIN, None)
        .await;
    assert_eq!(failed["status"]["state"], "TASK_STATE_FAILED");
    assert!(
        failed["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("stopped")
    );
}

#[tokio::test]
async fn the_0_3_rest_surface_speaks_0_3_protojson_on_the_same_tasks() {
    let s = TestServer::start(&[]).await;
    let msg = |id: &str, text: &str| json!({ "message": { "messageId": id, "role": "ROLE_USER", "content": [{ "text": text }] } });
    let (status, sent) = legacy(
        &s,
        "POST",
        "/message:send",
        Some(msg("l1", "echo old-rest")),
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["history"][0]["content"][0]["text"], "echo old-rest");
    assert!(task["history"][0].get("parts").is_none());
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "old-rest\r\n");
    let id = task["id"].as_str().unwrap();
    let (_, got) = legacy(&s, "GET", &format!("/tasks/{id}"), None).await;
    assert_eq!(got["id"], id);

    let mut slow = msg("l2", "sleep 100");
    slow["configuration"] = json!({ "blocking": false });
    let (_, started) = legacy(&s, "POST", "/message:send", Some(slow)).await;
    let slow_id = started["task"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, canceled) = legacy(&s, "POST", &format!("/tasks/{slow_id}:cancel"), None).await;
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELLED",
        "0.3 spelling"
    );

    let text = s
        .sse("/v1/message:stream", &msg("l3", "echo old-stream"), None)
        .await;
    let events = parse_sse(&text);
    let last = &events.last().unwrap().1["statusUpdate"];
    assert_eq!(
        (last["final"].as_bool(), last["status"]["state"].as_str()),
        (Some(true), Some("TASK_STATE_COMPLETED"))
    );

    let (status, err) = legacy(&s, "GET", "/tasks", None).await;
    assert_eq!(status, 400);
    assert_status(&err, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION");
    let v1_header = s
        .http
        .post(format!("http://{}/v1/message:send", s.addr))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(msg("l4", "true").to_string());
    let (status, err) = s.call(v1_header, ADMIN).await;
    assert_eq!(status, 400);
    assert_status(&err, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED");
    let (status, _) = legacy(&s, "GET", "/card", None).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn activated_extensions_are_echoed_in_the_header_they_came_in_and_only_those_this_binding_implements()
 {
    const PTY: &str = "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1";
    const A202: &str = "https://schemas.a202.org/a2a-ext/commercial/0.1";
    let s = TestServer::start(&[]).await;
    let echoed = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let v1 = s
        .http
        .get(s.url("/tasks"))
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .header(
            "A2A-Extensions",
            format!("https://unknown.example/x, {PTY}, {A202}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(v1.status(), 200);
    assert_eq!(
        echoed(&v1, "a2a-extensions").as_deref(),
        Some(A202),
        "unknown URIs and pty-ws's own extensions are not activated here"
    );

    let legacy = s
        .http
        .get(s.url("/v1/tasks/nope"))
        .bearer_auth(ADMIN)
        .header("X-A2A-Extensions", A202)
        .send()
        .await
        .unwrap();
    assert_eq!(echoed(&legacy, "x-a2a-extensions").as_deref(), Some(A202));
    assert_eq!(echoed(&legacy, "a2a-extensions"), None);

    let rpc = s
        .http
        .post(s.url("/jsonrpc"))
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .header("A2A-Extensions", format!("{PTY}, {A202}"))
        .header("Content-Type", "application/json")
        .body(json!({ "jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {} }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(echoed(&rpc, "a2a-extensions").as_deref(), Some(A202));

    let plain = s
        .http
        .get(s.url("/tasks"))
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(
        echoed(&plain, "a2a-extensions"),
        None,
        "nothing activated, nothing echoed"
    );
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_in_each_bindings_words_not_a_reset() {
    let s = TestServer::start(&[]).await;
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(3 * 1024 * 1024));
    let post = |path: &str| {
        s.http
            .post(format!("http://{}{path}", s.addr))
            .bearer_auth(ADMIN)
            .header("A2A-Version", "1.0")
            .header("Content-Type", "application/json")
            .body(big.clone())
            .send()
    };
    let rest = post("/message:send").await.expect("an answer, not a reset");
    assert_eq!(rest.status().as_u16(), 413);
    let body: Value = rest.json().await.unwrap();
    assert_eq!(body["error"]["code"], 413, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "INVALID_REQUEST");

    let rpc = post("/jsonrpc").await.expect("an answer, not a reset");
    assert_eq!(rpc.status().as_u16(), 413);
    let body: Value = rpc.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");

    let control = post("/sessions").await.expect("an answer, not a reset");
    assert_eq!(control.status().as_u16(), 413);
    let body: Value = control.json().await.unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");

    let a202 = post("/a202/objects").await.expect("an answer, not a reset");
    assert_eq!(a202.status().as_u16(), 413);
    let body: Value = a202.json().await.unwrap();
    assert!(body.to_string().contains("limit"), "{body}");

    // The connection is still good for the next request.
    assert_eq!(s.get("/sessions", ADMIN).await.0, 200);
}

#[tokio::test]
async fn a_command_that_ends_the_shell_fails_the_task_with_the_shells_exit_code() {
    let s = TestServer::start(&[]).await;
    let (_, body) = s
        .a2a("POST", "/message:send", ADMIN, Some(send("exit 3")))
        .await;
    let task = &body["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert_eq!(task["metadata"]["exit_code"], 3);
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "exit code 3");
}
