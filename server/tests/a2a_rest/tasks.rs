use super::*;

#[tokio::test]
async fn send_message_runs_the_command_and_completes_on_exit_zero_with_its_output() {
    let s = TestServer::start(&[]).await;
    let (status, body) = s
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(send("printf 'one\\ntwo\\n'")),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let task = &body["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(output(task), "one\r\ntwo\r\n");
    assert_eq!(task["metadata"]["exit_code"], 0);
    assert_eq!(task["history"][0]["messageId"], "m-printf 'one\\ntwo\\n'");
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));
    // contextId is the session: it exists and is listed.
    let sid = task["contextId"].as_str().unwrap();
    assert_eq!(s.session(sid).await.state, "running");
}

#[tokio::test]
async fn message_stream_sends_the_task_then_its_updates_and_ends_at_the_terminal_state() {
    let s = TestServer::start(&[]).await;
    let events = events(
        &s,
        "POST",
        "/message:stream",
        Some(send("printf 'a\\n'; sleep 0.2; printf 'b\\n'")),
    )
    .await;
    assert!(events[0].1.get("task").is_some(), "the Task comes first");
    let (states, text) = summarize(&events);
    assert_eq!(
        states,
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]
    );
    assert_eq!(text, "a\r\nb\r\n");
    let last = &events.last().unwrap().1["statusUpdate"];
    assert_eq!(last["metadata"]["exit_code"], 0);
}

#[tokio::test]
async fn a_streamed_task_starts_from_its_first_state_however_fast_its_command() {
    let s = TestServer::start(&[]).await;
    for i in 0..10 {
        let events = events(
            &s,
            "POST",
            "/message:stream",
            Some(send(&format!("echo fast-{i}"))),
        )
        .await;
        let first = &events[0].1["task"];
        assert_eq!(first["status"]["state"], "TASK_STATE_SUBMITTED", "{first}");
        assert_eq!(first["artifacts"], json!([]), "{first}");
        assert_eq!(summarize(&events).1, format!("fast-{i}\r\n"));
    }
}

#[tokio::test]
async fn concurrent_subscribers_see_the_same_events_in_the_same_order() {
    let s = TestServer::start(&[]).await;
    let mut req = send("sleep 0.5; for i in 1 2 3; do echo line-$i; sleep 0.1; done");
    req["configuration"] = json!({ "returnImmediately": true });
    let (_, body) = s.a2a("POST", "/message:send", ADMIN, Some(req)).await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    let path = format!("/tasks/{id}:subscribe");
    let (a, b) = tokio::join!(
        events(&s, "POST", &path, None),
        events(&s, "GET", &path, None)
    );
    assert_eq!(a[0].1["task"]["id"], id.as_str());
    // Each sees every event after its own snapshot, in the one order: the later
    // subscriber's events are the tail of the earlier one's.
    let (long, short) = if a.len() >= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    assert!(
        long[1..].ends_with(&short[1..]) && short.len() > 2,
        "{long:?}\n{short:?}"
    );
    let (states, text) = summarize(&a);
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
    assert!(text.ends_with("line-3\r\n"), "{text:?}");
    // A finished task has nothing to subscribe to.
    let (status, err) = s.a2a("POST", &path, ADMIN, None).await;
    assert_eq!(status, 400);
    assert_status(&err, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn a_command_waiting_for_the_terminal_asks_for_input_and_the_answer_is_typed() {
    let s = TestServer::start(&[]).await;
    let (_, asked) = s
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(send("read -p 'Name? ' x; echo hello $x")),
        )
        .await;
    let task = &asked["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "Name?");
    let id = task["id"].as_str().unwrap();

    // Only a waiting task takes an answer; a foreign contextId is refused.
    let mut wrong = json!({ "message": { "messageId": "a0", "role": "ROLE_USER", "taskId": id, "contextId": "other", "parts": [{ "text": "x" }] } });
    let (status, _) = s
        .a2a("POST", "/message:send", ADMIN, Some(wrong.clone()))
        .await;
    assert_eq!(status, 400);
    wrong["message"]["contextId"] = task["contextId"].clone();
    wrong["message"]["parts"][0]["text"] = json!("Ada");
    wrong["message"]["messageId"] = json!("a1");
    let (_, answered) = s
        .a2a("POST", "/message:send", ADMIN, Some(wrong.clone()))
        .await;
    let done = &answered["task"];
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert!(output(done).ends_with("hello Ada\r\n"), "{}", output(done));
    let history: Vec<&str> = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1], "a1");
    wrong["message"]["messageId"] = json!("a2");
    let (status, err) = s.a2a("POST", "/message:send", ADMIN, Some(wrong)).await;
    assert_eq!(status, 400);
    assert_status(&err, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn a_task_waiting_for_input_can_be_canceled() {
    let s = TestServer::start(&[]).await;
    let (_, asked) = s
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(send("read -p 'Continue? ' x")),
        )
        .await;
    assert_eq!(
        asked["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let id = asked["task"]["id"].as_str().unwrap();
    let (_, canceled) = s
        .a2a("POST", &format!("/tasks/{id}:cancel"), ADMIN, None)
        .await;
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
}

#[tokio::test]
async fn a_non_zero_exit_fails_the_task_with_the_exit_code() {
    let s = TestServer::start(&[]).await;
    let (_, body) = s
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(send(
                "echo boom >&2; exit_three() { return 3; }; exit_three",
            )),
        )
        .await;
    let task = &body["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(task["metadata"]["exit_code"], 3);
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "exit code 3");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert!(output(task).contains("boom"));
}

#[tokio::test]
async fn tasks_in_one_context_share_the_shell_and_everyone_watching_sees_them_run() {
    let s = TestServer::start(&[]).await;
    let (_, first) = s
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(send("cd /tmp && export MARK=kept")),
        )
        .await;
    let sid = first["task"]["contextId"].as_str().unwrap().to_owned();
    let mut watcher = s.attach(&sid, ADMIN).await;
    watcher.join("observer").await;
    let mut req = send("echo $PWD $MARK");
    req["message"]["contextId"] = json!(sid);
    let (_, second) = s.a2a("POST", "/message:send", ADMIN, Some(req)).await;
    assert_eq!(second["task"]["contextId"], sid.as_str());
    assert_eq!(output(&second["task"]), "/tmp kept\r\n");
    watcher.output_until("/tmp kept").await;
}

#[tokio::test]
async fn data_parts_run_argv_with_cwd_and_env() {
    let s = TestServer::start(&[]).await;
    let cwd = s.dir.join("project");
    std::fs::create_dir(&cwd).unwrap();
    let req = json!({ "message": { "messageId": "d1", "role": "ROLE_USER", "parts": [{
        "data": { "argv": ["sh", "-c", "echo \"$PWD:$GREETING\""], "cwd": cwd, "env": { "GREETING": "hi there" } },
        "mediaType": "application/json" }] } });
    let (_, body) = s.a2a("POST", "/message:send", ADMIN, Some(req)).await;
    assert_eq!(
        output(&body["task"]),
        format!("{}:hi there\r\n", cwd.display())
    );
}

#[tokio::test]
async fn return_immediately_answers_before_the_command_ends_and_get_task_follows_it() {
    let s = TestServer::start(&[]).await;
    let mut req = send("sleep 1; echo done");
    req["configuration"] = json!({ "returnImmediately": true });
    let started = std::time::Instant::now();
    let (_, body) = s.a2a("POST", "/message:send", ADMIN, Some(req)).await;
    assert!(started.elapsed() < Duration::from_millis(900));
    let state = body["task"]["status"]["state"].as_str().unwrap().to_owned();
    assert!(
        state == "TASK_STATE_SUBMITTED" || state == "TASK_STATE_WORKING",
        "{state}"
    );
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    let done = tokio::time::timeout(WAIT, async {
        loop {
            let (_, t) = s.a2a("GET", &format!("/tasks/{id}"), ADMIN, None).await;
            if t["status"]["state"] == "TASK_STATE_COMPLETED" {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(output(&done), "done\r\n");
    let (_, trimmed) = s
        .a2a("GET", &format!("/tasks/{id}?historyLength=0"), ADMIN, None)
        .await;
    assert!(trimmed.get("history").is_none());
}

#[tokio::test]
async fn cancel_interrupts_a_running_command_and_only_once() {
    let s = TestServer::start(&[]).await;
    let mut req = send("sleep 100");
    req["configuration"] = json!({ "returnImmediately": true });
    let (_, body) = s.a2a("POST", "/message:send", ADMIN, Some(req)).await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let (status, canceled) = s
        .a2a("POST", &format!("/tasks/{id}:cancel"), ADMIN, None)
        .await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    assert!(started.elapsed() < Duration::from_secs(4));
    // Canceling a canceled task is not an error; a completed one is not cancelable.
    let (status, again) = s
        .a2a("POST", &format!("/tasks/{id}:cancel"), ADMIN, None)
        .await;
    assert_eq!(
        (status, again["status"]["state"].as_str()),
        (200, Some("TASK_STATE_CANCELED"))
    );
    let (_, done) = s
        .a2a("POST", "/message:send", ADMIN, Some(send("true")))
        .await;
    let done_id = done["task"]["id"].as_str().unwrap();
    let (status, err) = s
        .a2a("POST", &format!("/tasks/{done_id}:cancel"), ADMIN, None)
        .await;
    assert_eq!(status, 400);
    assert_status(&err, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE");
    // The shell is usable after the cancel.
    let mut next = send("echo after-cancel");
    next["message"]["contextId"] = body["task"]["contextId"].clone();
    let (_, after) = s.a2a("POST", "/message:send", ADMIN, Some(next)).await;
    assert_eq!(output(&after["task"]), "after-cancel\r\n");
}

#[tokio::test]
async fn list_tasks_pages_newest_first_and_filters() {
    let s = TestServer::start(&[]).await;
    let (_, first) = s
        .a2a("POST", "/message:send", ADMIN, Some(send("true")))
        .await;
    let sid = first["task"]["contextId"].as_str().unwrap().to_owned();
    for cmd in ["false", "echo x"] {
        let mut req = send(cmd);
        req["message"]["contextId"] = json!(sid);
        s.a2a("POST", "/message:send", ADMIN, Some(req)).await;
    }
    s.a2a("POST", "/message:send", ADMIN, Some(send("true")))
        .await; // another session

    let (_, page) = s
        .a2a(
            "GET",
            &format!("/tasks?contextId={sid}&pageSize=2"),
            ADMIN,
            None,
        )
        .await;
    assert_eq!(
        (page["totalSize"].as_i64(), page["pageSize"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(page["tasks"].as_array().unwrap().len(), 2);
    assert!(
        page["tasks"][0].get("artifacts").is_none(),
        "artifacts only when asked"
    );
    let token = page["nextPageToken"].as_str().unwrap();
    assert!(!token.is_empty());
    let (_, rest) = s
        .a2a(
            "GET",
            &format!("/tasks?contextId={sid}&pageSize=2&pageToken={token}&includeArtifacts=true"),
            ADMIN,
            None,
        )
        .await;
    assert_eq!(rest["tasks"].as_array().map(Vec::len), Some(1), "{rest}");
    assert_eq!(
        rest["nextPageToken"], "",
        "present and empty on the last page"
    );
    assert_eq!(rest["tasks"][0]["id"], first["task"]["id"], "oldest last");
    assert!(rest["tasks"][0]["artifacts"].is_array());

    let (_, failed) = s
        .a2a("GET", "/tasks?status=TASK_STATE_FAILED", ADMIN, None)
        .await;
    assert_eq!(failed["totalSize"], 1);
    for bad in [
        "pageSize=0",
        "pageSize=101",
        "status=failed",
        "pageToken=nope",
        "statusTimestampAfter=yesterday",
        "includeArtifacts=yes",
    ] {
        let (status, err) = s.a2a("GET", &format!("/tasks?{bad}"), ADMIN, None).await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(err["error"]["status"], "INVALID_ARGUMENT", "{bad}");
    }
}

#[tokio::test]
async fn version_and_content_type_are_negotiated_and_mirrored() {
    let s = TestServer::start(&[]).await;
    let url = format!("http://{}/message:send", s.addr);
    let body = send("true").to_string();
    let no_version = s
        .http
        .post(&url)
        .bearer_auth(ADMIN)
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(no_version.status(), 400);
    assert_eq!(no_version.headers()["vary"], "A2A-Version, Accept");
    assert_status(
        &no_version.json().await.unwrap(),
        400,
        "FAILED_PRECONDITION",
        "VERSION_NOT_SUPPORTED",
    );

    let plain = s
        .http
        .post(&url)
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    assert_eq!(plain.headers()["content-type"], "application/json");
    let a2a_json = s
        .http
        .post(&url)
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/a2a+json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(a2a_json.headers()["content-type"], "application/a2a+json");

    let text = s
        .http
        .post(&url)
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .header("Content-Type", "text/plain")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_status(
        &text.json().await.unwrap(),
        400,
        "INVALID_ARGUMENT",
        "CONTENT_TYPE_NOT_SUPPORTED",
    );
    let untyped = s
        .http
        .post(&url)
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(
        untyped.status(),
        400,
        "a body without a Content-Type is not JSON"
    );
    // A bare POST (no body, no Content-Type), as SDKs send `:cancel`, is accepted.
    let bare = s
        .http
        .post(s.url("/tasks/nope:cancel"))
        .bearer_auth(ADMIN)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 404, "it reaches the operation");
    // Also served under the instance base.
    let (status, _) = s
        .call(
            s.http.get(s.url("/tasks")).header("A2A-Version", "1.0"),
            ADMIN,
        )
        .await;
    assert_eq!(status, 200);
}
