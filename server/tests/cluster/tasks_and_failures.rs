use super::*;

#[tokio::test]
async fn tasks_in_one_node_s_session_are_sent_streamed_subscribed_and_canceled_through_others() {
    let Some((_db, c)) = cluster(3).await else {
        return;
    };
    // A message without a context starts its shell on the node that received it.
    let (status, first) = c[0]
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(json!({ "message": message("m-a", None, "echo on-a") })),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    let sid = task_in(&first).context_id;
    assert_eq!(c[1].session(&sid).await.node_id, "node-a");

    // HTTP+JSON through B: the command runs in A's session.
    let (status, sent) = c[1]
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(json!({ "message": message("m-b", Some(&sid), "echo through-$((40+2))") })),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    let sent = task_in(&sent);
    assert_eq!(sent.status.state, TaskState::Completed, "{sent:?}");
    assert!(artifact_text(&sent).contains("through-42"), "{sent:?}");
    assert_eq!(sent.context_id, sid);

    // A JSON-RPC stream through C: the same events a client of A would get.
    let events = rpc_stream(
        &c[2],
        "SendStreamingMessage",
        json!({ "message": message("m-c", Some(&sid), "echo streamed-$((6*7))") }),
    )
    .await;
    assert!(matches!(events[0], StreamResponse::Task(_)), "{events:?}");
    assert!(
        matches!(events.last(), Some(StreamResponse::StatusUpdate(u)) if u.status.state == TaskState::Completed),
        "{events:?}"
    );
    let streamed: String = events.iter().map(update_text).collect();
    assert!(streamed.contains("streamed-42"), "{events:?}");

    // A task sent through B, followed on its node A and through C: the same events in the
    // same order.
    let (_, ticking) = c[1]
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(json!({ "message": message("m-tick", Some(&sid),
                    "sleep 0.5; for i in 1 2 3; do echo tick-$i; sleep 0.2; done"),
                "configuration": { "returnImmediately": true } })),
        )
        .await;
    let ticking = task_in(&ticking).id;
    let (on_a, via_c) = tokio::join!(
        rpc_stream(&c[0], "SubscribeToTask", json!({ "id": ticking })),
        rpc_stream(&c[2], "SubscribeToTask", json!({ "id": ticking })),
    );
    let after_snapshot = |events: &[StreamResponse]| -> Vec<StreamResponse> {
        events
            .iter()
            .filter(|e| match e {
                StreamResponse::ArtifactUpdate(_) => true,
                StreamResponse::StatusUpdate(u) => u.status.state == TaskState::Completed,
                _ => false,
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        after_snapshot(&on_a),
        after_snapshot(&via_c),
        "{on_a:?}\n{via_c:?}"
    );
    let ticks: String = after_snapshot(&via_c).iter().map(update_text).collect();
    assert!(ticks.contains("tick-3"), "{via_c:?}");

    // A long task sent through B, subscribed to through C, canceled through B.
    let (_, long) = c[1]
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(
                json!({ "message": message("m-long", Some(&sid), "sleep 30"),
                "configuration": { "returnImmediately": true } }),
            ),
        )
        .await;
    let task_id = task_in(&long).id;
    let subscriber = {
        let url = format!("http://{}", c[2].addr);
        let task_id = task_id.clone();
        tokio::spawn(async move {
            let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                               "params": { "id": task_id } });
            reqwest::Client::new()
                .post(format!("{url}/jsonrpc"))
                .bearer_auth(ADMIN)
                .header("A2A-Version", "1.0")
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
    };
    let working = rpc(&c[2], "GetTask", json!({ "id": task_id })).await;
    assert!(
        matches!(&working, Outcome::Result(t) if t.status.state == TaskState::Working),
        "{working:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, canceled) = c[1]
        .a2a(
            "POST",
            &format!("/tasks/{task_id}:cancel"),
            ADMIN,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(
        task_in(&canceled).status.state,
        TaskState::Canceled,
        "{canceled}"
    );
    let seen = tokio::time::timeout(WAIT, subscriber)
        .await
        .unwrap()
        .unwrap();
    assert!(
        seen.contains("TASK_STATE_CANCELED"),
        "the subscriber on C saw the cancel: {seen}"
    );
    let (_, got) = c[2]
        .a2a("GET", &format!("/tasks/{task_id}"), ADMIN, None)
        .await;
    assert_eq!(task_in(&got).status.state, TaskState::Canceled);
    let (_, listed) = c[1]
        .a2a("GET", &format!("/tasks?contextId={sid}"), ADMIN, None)
        .await;
    let listed: ListTasksResponse = serde_json::from_value(listed).unwrap();
    assert_eq!(listed.tasks.len(), 5, "{listed:?}");

    // A task nobody has is not found wherever it is asked for.
    let missing = rpc(&c[1], "CancelTask", json!({ "id": "no-such-task" })).await;
    assert!(
        matches!(&missing, Outcome::Error(e) if e.code == -32001),
        "{missing:?}"
    );
}

#[tokio::test]
async fn postgresql_stopped_under_load_turns_readyz_red_then_green_and_loses_nothing_acknowledged()
{
    if postgres_database().await.is_none() {
        return;
    }
    // A PostgreSQL of this test's own, to stop and start.
    let pg = OwnPostgres(tempfile::tempdir().unwrap());
    let db = postgres_sh("start", pg.path());
    let (a, b) = tokio::join!(node(&db, 0), node(&db, 1));
    let (_, acked) = a
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(json!({ "message": message("m-acked", None, "echo acked-$((1+1))") })),
        )
        .await;
    let acked = task_in(&acked);
    assert_eq!(acked.status.state, TaskState::Completed, "{acked:?}");
    let acked = acked.id;
    let sid = a
        .command_session("i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.02; done")
        .await;
    let mut direct = a.attach(&sid, ADMIN).await;
    direct.join("observer").await;
    let mut via_b = b.attach(&sid, ADMIN).await;
    via_b.join("observer").await;

    postgres_sh("stop", pg.path());
    wait_ready(&[&a, &b], 503, Duration::from_secs(10)).await;
    // Longer than the node timeout: no node may take the other for dead afterwards.
    let outage = std::time::Instant::now();
    let mut seen = Vec::new();
    while outage.elapsed() < Duration::from_secs(4) {
        let f = direct.next().await;
        if kind(&f) == "Output" {
            seen.push(seq(&f));
        }
    }
    let forwarded = via_b.output_until("tick-").await;
    assert!(
        !forwarded.is_empty(),
        "output reaches the client through B while the database is away"
    );
    assert!(
        seen.len() > 50,
        "output kept flowing to the viewer: {} frames",
        seen.len()
    );
    postgres_sh("start", pg.path());
    wait_ready(&[&a, &b], 200, Duration::from_secs(20)).await;

    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        b.session(&sid).await.state,
        "running",
        "no live node is taken for dead"
    );
    let (_, task) = b.a2a("GET", &format!("/tasks/{acked}"), ADMIN, None).await;
    let task = task_in(&task);
    assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    assert!(artifact_text(&task).contains("acked-2"), "{task:?}");
    // Every frame the viewer saw while the database was away is in the history.
    let mut replay = b.attach(&sid, ADMIN).await;
    replay
        .send_env(
            "pty.join_session",
            json!({ "role": "observer" }),
            json!({ "replay_from": seen[0] - 1 }),
        )
        .await;
    let last = *seen.last().unwrap();
    let mut replayed = Vec::new();
    while replayed.last().is_none_or(|s| *s < last) {
        let f = replay.next().await;
        if kind(&f) == "Output" {
            replayed.push(seq(&f));
        }
    }
    let replayed: Vec<u64> = replayed.into_iter().filter(|s| *s <= last).collect();
    assert_eq!(
        replayed, seen,
        "the replay holds every frame seen during the outage"
    );
}

#[tokio::test]
async fn a_node_that_stops_says_goodbye_to_the_clients_it_forwards_and_the_session_runs_on() {
    let Some((_db, mut c)) = cluster(2).await else {
        return;
    };
    let sid = c[0].command_session("cat").await;
    let mut via_b = c[1].attach(&sid, ADMIN).await;
    via_b.join("observer").await;
    assert!(c[1].stop().await.success());
    let (code, frames) = via_b.until_close().await;
    assert_eq!(code, Some(1000));
    let goodbye = frames
        .iter()
        .find(|f| op_of(f) == "binding_goodbye")
        .expect("a goodbye");
    assert_eq!(goodbye_reason(goodbye), "server_shutdown");
    assert_eq!(c[0].session(&sid).await.state, "running");
}

#[tokio::test]
async fn idempotency_ac1_a_send_retried_through_another_node_gets_the_first_answer() {
    let Some((_db, c)) = cluster(2).await else {
        return;
    };
    const IDEMPOTENCY: &str = "https://agentic-sandbox.aiwg.io/extensions/idempotency/v1";
    let sid = c[0].command_session("cat").await;
    let body = json!({ "message": {
        "messageId": uuid::Uuid::now_v7().to_string(), "role": "ROLE_USER", "contextId": sid,
        "parts": [{ "text": "echo once" }],
    }});
    let send = |server: &TestServer| {
        server
            .http
            .post(server.url("/message:send"))
            .bearer_auth(ADMIN)
            .header("A2A-Version", "1.0")
            .header("A2A-Extensions", IDEMPOTENCY)
            .json(&body)
            .send()
    };
    let first = send(&c[0]).await.unwrap();
    assert_eq!(first.headers().get("idempotent-replayed"), None);
    let first = first.text().await.unwrap();
    let again = send(&c[1]).await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.text().await.unwrap(), first);
}
