use super::*;

#[tokio::test]
async fn binding_scenario_4_reconnect_with_replay_from_receives_the_frames_after_it() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut writer = s.attach(&sid, ADMIN).await;
    writer.join("controller").await;
    let mut reader = s.attach(&sid, ADMIN).await;
    reader.join("observer").await;
    writer.input("first\n").await;
    let n = seq(reader.output_until("first\r\nfirst").await.last().unwrap());
    drop(reader);

    writer.input("second\n").await;
    let mut after_n: Vec<Value> = Vec::new();
    after_n.extend(writer.output_until("second\r\nsecond").await);
    let m = seq(after_n.last().unwrap());

    let mut back = s.attach(&sid, ADMIN).await;
    let init = back
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": n }))
        .await;
    let replayed: Vec<&Value> = init.iter().filter(|f| seq(f) > n && seq(f) <= m).collect();
    // Every broadcast frame the writer saw in (N, M] comes back, identical and in order.
    let expected: Vec<&Value> = after_n.iter().filter(|f| seq(f) > n).collect();
    for f in &expected {
        assert!(replayed.contains(f), "missing replayed frame {f}");
    }
    assert!(replayed.windows(2).all(|w| seq(w[0]) < seq(w[1])));
}

#[tokio::test]
async fn binding_scenario_5_replay_older_than_retention_is_out_of_range_then_keyframe() {
    let s = TestServer::start(&["--replay-frames", "3", "--replay-retention", "0"]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    for i in 0..20 {
        c.input(&format!("{i}\n")).await;
        c.output_until(&format!("{i}\r\n{i}")).await;
    }
    s.wait_until(&sid, |v| v.replay_floor > 2).await;
    let mut back = s.attach(&sid, ADMIN).await;
    let init = back
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": 2 }))
        .await;
    assert_error(&init[1], None, "REPLAY_OUT_OF_RANGE");
    assert_eq!(kind(&init[2]), "Keyframe");
}

#[tokio::test]
async fn binding_scenario_6_upgrade_without_a_valid_bearer_is_refused_with_401() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let url = s.ws_url(&sid);
    let proto = ("Sec-WebSocket-Protocol", "pty-ws.v1");
    assert_eq!(
        upgrade_status(&url, &[proto]).await.err(),
        Some(401),
        "no bearer"
    );
    assert_eq!(
        bearer_refusal(&url, "pth_not-a-real-token").await,
        Some(401),
        "unknown"
    );
    assert_eq!(
        upgrade_status(&url, &[proto, ("Authorization", "Bearer nope")])
            .await
            .err(),
        Some(401)
    );

    let expiring = s
        .token_cli(&["create", "--scope", "pty:control", "--ttl", "1s"])
        .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        bearer_refusal(&url, expiring.trim()).await,
        Some(401),
        "expired"
    );

    let revoked = s.token("pty:control", None).await;
    let list = s.token_cli(&["list"]).await;
    let id = list.lines().last().unwrap().split('\t').next().unwrap();
    s.token_cli(&["revoke", id]).await;
    assert_eq!(bearer_refusal(&url, &revoked).await, Some(401), "revoked");

    // Both carriers work for a valid token; a token in the query is refused outright.
    let auth = format!("Bearer {ADMIN}");
    assert!(
        upgrade_status(&url, &[proto, ("Authorization", &auth)])
            .await
            .is_ok()
    );
    assert_eq!(bearer_refusal(&url, ADMIN).await, None);
    let sub = bearer_protocols(ADMIN);
    let with_query = format!("{url}?access_token={ADMIN}");
    assert_eq!(
        upgrade_status(&with_query, &[("Sec-WebSocket-Protocol", &sub)])
            .await
            .err(),
        Some(400)
    );
}

#[tokio::test]
async fn binding_scenario_7_observe_scope_watches_and_replays_but_cannot_control() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let observe = s.token("pty:observe", None).await;
    let control = s.token("pty:control", None).await;

    let mut ctl = s.attach(&sid, &control).await;
    ctl.join("controller").await;
    ctl.input("visible\n").await;
    let n = seq(ctl.output_until("visible\r\nvisible").await.last().unwrap());

    let mut obs = s.attach(&sid, &observe).await;
    let id = obs
        .send("pty.join_session", json!({ "role": "controller" }))
        .await;
    assert_error(&obs.next().await, Some(&id), "PERMISSION_DENIED");
    let init = obs
        .join_with(
            json!({ "role": "observer" }),
            json!({ "replay_from": n - 1 }),
        )
        .await;
    assert!(init.iter().any(|f| seq(f) == n), "replayed");
    obs.send("pty.request_keyframe", json!({})).await;
    obs.expect_kind("Keyframe").await;
    for (op, payload) in [
        ("pty.session_input", json!({ "data": "eA==" })),
        ("pty.session_resize", json!({ "cols": 20, "rows": 20 })),
        ("pty.request_role", json!({ "role": "controller" })),
    ] {
        let id = obs.send(op, payload).await;
        assert_error(
            &obs.expect_op("Error").await,
            Some(&id),
            "PERMISSION_DENIED",
        );
    }
    ctl.input("still mine\n").await;
    obs.output_until("still mine").await;
}

#[tokio::test]
async fn binding_scenario_8_conflicting_or_missing_subprotocol_is_400_and_unknown_session_404() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let auth = format!("Bearer {ADMIN}");
    let url = s.ws_url(&sid);
    for protocols in [None, Some("graphql-ws"), Some("pty-ws.v2, graphql-ws")] {
        let mut headers = vec![("Authorization", auth.as_str())];
        if let Some(p) = protocols {
            headers.push(("Sec-WebSocket-Protocol", p));
        }
        assert_eq!(
            upgrade_status(&url, &headers).await.err(),
            Some(400),
            "{protocols:?}"
        );
    }
    let proto = ("Sec-WebSocket-Protocol", "graphql-ws, pty-ws.v1");
    assert!(
        upgrade_status(&url, &[proto, ("Authorization", &auth)])
            .await
            .is_ok()
    );

    let unknown = s.ws_url("01900000-0000-7000-8000-000000000000");
    assert_eq!(
        upgrade_status(&unknown, &[proto, ("Authorization", &auth)])
            .await
            .err(),
        Some(404)
    );
    let other_instance = url.replace("/agents/local/", "/agents/elsewhere/");
    assert_eq!(
        upgrade_status(&other_instance, &[proto, ("Authorization", &auth)])
            .await
            .err(),
        Some(404)
    );
    // A token bound to another session learns nothing: 404, not 403.
    let other = cat_session(&s).await;
    let bound = format!("Bearer {}", s.token("pty:control", Some(&other)).await);
    assert_eq!(
        upgrade_status(&url, &[proto, ("Authorization", &bound)])
            .await
            .err(),
        Some(404)
    );
    // The default instance is also served at the root.
    let root = format!("ws://{}/sessions/{sid}/attach", s.addr);
    assert!(
        upgrade_status(&root, &[proto, ("Authorization", &auth)])
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn browser_upgrades_from_foreign_origins_are_refused_with_403() {
    let s = TestServer::start(&["--allowed-origin", "https://ops.example"]).await;
    let sid = cat_session(&s).await;
    let url = s.ws_url(&sid);
    let proto = bearer_protocols(ADMIN);
    let status = |origin: Option<String>| {
        let (url, proto) = (url.clone(), proto.clone());
        async move {
            let mut headers = vec![("Sec-WebSocket-Protocol", proto.as_str())];
            if let Some(o) = origin.as_deref() {
                headers.push(("Origin", o));
            }
            upgrade_status(&url, &headers).await.err()
        }
    };
    assert_eq!(
        status(Some(format!("http://{}", s.addr))).await,
        None,
        "the server's own origin"
    );
    assert_eq!(
        status(Some("https://ops.example".into())).await,
        None,
        "an allowed origin"
    );
    assert_eq!(status(Some("https://evil.example".into())).await, Some(403));
    assert_eq!(status(None).await, None, "no Origin: not a browser");
}

#[tokio::test]
async fn plain_ws_on_a_non_loopback_address_is_refused_unless_allowed() {
    let proto = bearer_protocols(ADMIN);
    let headers = [("Sec-WebSocket-Protocol", proto.as_str())];
    let s = TestServer::start(&["--listen", "0.0.0.0:0"]).await;
    let sid = cat_session(&s).await;
    assert_eq!(
        upgrade_status(&s.ws_url(&sid), &headers).await.err(),
        Some(403)
    );
    let allowed = TestServer::start(&["--listen", "0.0.0.0:0", "--allow-insecure-ws"]).await;
    let sid = cat_session(&allowed).await;
    assert!(
        upgrade_status(&allowed.ws_url(&sid), &headers)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_resubscribe_replays_task_updates_the_ring_no_longer_holds_from_the_store() {
    // A ring of four frames: the task's output pushes its updates out to the store.
    let s = TestServer::start(&["--replay-frames", "4"]).await;
    let sid = shell(&s).await;
    let mut streamer = s.attach(&sid, ADMIN).await;
    streamer.join("controller").await;
    let task_id = stream_task(
        &mut streamer,
        "for i in $(seq 1 400); do echo line-$i; sleep 0.005; done",
    )
    .await;
    let mut streamed = Vec::new();
    loop {
        let f = streamer.next().await;
        if op_of(&f) == "TaskStatusUpdate" {
            let done = task_of(&f).status.state == TaskState::Completed;
            streamed.push((seq(&f), id_of(&f)));
            if done {
                break;
            }
        }
    }
    // More updates than the store is read for at a time, all long gone from the ring.
    assert!(streamed.len() > 256, "{} updates", streamed.len());
    // From just before the first update the streamer saw (one may come before `Accepted`).
    let mut back = s.attach(&sid, ADMIN).await;
    back.send_env(
        "SubscribeToTask",
        json!({ "task_id": task_id }),
        json!({ "replay_from": streamed[0].0 - 1 }),
    )
    .await;
    back.expect_op("SubscribeToTask.Accepted").await;
    let mut replayed = Vec::new();
    while replayed.len() < streamed.len() {
        let f = back.expect_op("TaskStatusUpdate").await;
        replayed.push((seq(&f), id_of(&f)));
    }
    assert_eq!(replayed, streamed, "every update, as it first went out");
}

#[tokio::test]
async fn a_request_that_is_no_websocket_upgrade_is_refused_in_http_s_words_and_joins_nothing() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let proto = bearer_protocols(ADMIN);
    // A plain GET with a good bearer and subprotocol: 426, saying what the route takes.
    let plain = s
        .http
        .get(s.ws_url(&sid).replace("ws://", "http://"))
        .header("Sec-WebSocket-Protocol", &proto)
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 426);
    assert!(plain.text().await.unwrap().contains("WebSocket upgrade"));
    // An upgrade in a WebSocket version other than 13: 400.
    let headers = [
        ("Sec-WebSocket-Protocol", proto.as_str()),
        ("Sec-WebSocket-Version", "8"),
    ];
    assert_eq!(
        upgrade_status(&s.ws_url(&sid), &headers).await.err(),
        Some(400)
    );
    let session = s.session(&sid).await;
    assert_eq!(
        (session.observers, session.controllers),
        (0, 0),
        "{session:?}"
    );
    // The same upgrade in version 13 goes through.
    let ws = upgrade_status(&s.ws_url(&sid), &headers[..1])
        .await
        .unwrap();
    drop(ws);
}

#[tokio::test]
async fn binding_scenario_11_json_clients_get_base64_output_and_send_session_input() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    c.send("pty.session_input", json!({ "data": "w6kg4oKsIOS4rQo=" }))
        .await; // "é € 中\n"
    let frames = c.output_until("中").await;
    let out = frames.iter().find(|f| kind(f) == "Output").unwrap();
    assert_eq!(out["payload"]["stream"], "stdout");
    assert!(
        out["payload"]["data"]
            .as_str()
            .unwrap()
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "+/=".contains(ch))
    );
}

#[tokio::test]
async fn binding_scenario_12_sequences_are_strictly_monotonic_across_three_clients() {
    let s = TestServer::start(&[]).await;
    // Without the tty's echo only cat writes, so each row appears exactly once, in order.
    let sid = s.command_session("stty -echo; exec cat").await;
    let mut clients = Vec::new();
    for role in ["controller", "observer", "observer"] {
        let mut c = s.attach(&sid, ADMIN).await;
        c.join(role).await;
        clients.push(c);
    }
    for i in 0..30 {
        clients[0].input(&format!("row {i}\n")).await;
    }
    let mut seen: Vec<BTreeMap<u64, Value>> = Vec::new();
    for c in &mut clients {
        let frames = c.output_until("row 28\r\nrow 29\r\n").await;
        let seqs: Vec<u64> = frames.iter().map(seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "strictly increasing: {seqs:?}"
        );
        seen.push(
            frames
                .into_iter()
                .filter(|f| kind(f) == "Output")
                .map(|f| (seq(&f), f))
                .collect(),
        );
    }
    // The same sequence names the same frame for every client.
    for (sq, f) in &seen[2] {
        for other in &seen[..2] {
            if let Some(g) = other.get(sq) {
                assert_eq!(f, g);
            }
        }
    }
}

#[tokio::test]
async fn binding_scenario_14_a_controller_that_stops_answering_pings_is_reaped() {
    let s = TestServer::start(&["--heartbeat-interval", "0.3", "--heartbeat-timeout", "1"]).await;
    let sid = cat_session(&s).await;
    let mut stale = s.attach(&sid, ADMIN).await;
    assert_eq!(
        stale.join("controller").await[0]["payload"]["role"],
        "controller"
    );
    // From here on `stale` is never polled, so it never answers a Ping.

    let mut watcher = s.attach(&sid, ADMIN).await;
    watcher.join("observer").await;
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let m = watcher.expect_kind("MembershipChanged").await;
            if m["payload"]["controllers"] == json!([]) {
                break;
            }
        }
    })
    .await
    .expect("the stale controller is reaped and its role released");

    let mut next = s.attach(&sid, ADMIN).await;
    assert_eq!(
        next.join("controller").await[0]["payload"]["role"],
        "controller"
    );
    next.input("taken over\n").await;
    next.output_until("taken over").await;
    // The observer, which answers pings, outlived several timeouts.
    watcher
        .send("ping", json!({ "client_ts": "2026-11-29T00:00:00Z" }))
        .await;
    assert_eq!(
        watcher.expect_op("pong").await["payload"]["client_ts"],
        "2026-11-29T00:00:00Z"
    );
    drop(stale);
}

#[tokio::test]
async fn app_level_ping_and_service_parameter_update_are_answered_with_the_request_id() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let id = c
        .send_env(
            "ping",
            json!({ "client_ts": "2026-11-29T01:02:03Z" }),
            json!({ "service_parameters": { "trace_id": "t-1" } }),
        )
        .await;
    let pong = typed(&c.next().await);
    assert_eq!(pong.id, id);
    let ServerOp::Pong(pong) = pong.op else {
        panic!("not a pong: {pong:?}");
    };
    assert!(pong.server_ts.ends_with('Z'));
    let id = c
        .send(
            "UpdateServiceParameters",
            json!({ "service_parameters": { "trace_id": "t-2" } }),
        )
        .await;
    let r = c.next().await;
    assert_eq!(
        (op_of(&r), id_of(&r)),
        ("UpdateServiceParameters.Response", id)
    );
}
