use super::*;

#[tokio::test]
async fn every_node_lists_the_cluster_s_nodes_and_sessions() {
    let Some((_db, c)) = cluster(3).await else {
        return;
    };
    let sid = c[0].command_session("cat").await;
    for server in &c {
        let list = node_list(server).await;
        assert_eq!(
            sorted(list.iter().map(|n| &n.node_id)),
            ["node-a", "node-b", "node-c"]
        );
        for n in &list {
            assert!(n.alive, "{n:?}");
            let expected = if n.node_id == "node-a" { 1 } else { 0 };
            assert_eq!(n.sessions, expected, "{n:?}");
            assert!(n.advertise_url.starts_with("http://127.0.0.1:"));
        }
        let sessions: control::SessionList = server.get_as("/sessions", ADMIN).await;
        assert_eq!(
            sorted(sessions.sessions.iter().map(|s| &s.session_id)),
            std::slice::from_ref(&sid)
        );
        assert_eq!(sessions.sessions[0].node_id, "node-a");
    }
    let observer = c[1].token("pty:observe", None).await;
    assert_eq!(
        nodes(&c[2], &observer).await.0,
        403,
        "listing nodes needs pty:admin"
    );
    let metrics = c[2].metrics().await;
    for line in [
        "ptyhost_node_alive{node_id=\"node-a\"} 1",
        "ptyhost_node_sessions{node_id=\"node-a\"} 1",
        "ptyhost_node_alive{node_id=\"node-c\",this=\"true\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }

    // A share link made on one node opens the session through another, read-only.
    let link = c[1].share(&sid, json!({ "label": "through C" })).await;
    let mut shared = c[2].attach(&sid, &link.token).await;
    shared.join("observer").await;
    shared.input("refused\r").await;
    let refused = shared.expect_op("Error").await;
    assert_eq!(
        error_of(&refused).code,
        wire::ErrorCode::PermissionDenied,
        "{refused}"
    );
}

#[tokio::test]
async fn a_session_attached_through_other_nodes_shows_every_client_the_same_frames() {
    let Some((_db, c)) = cluster(3).await else {
        return;
    };
    let sid = c[0].command_session("cat").await;
    let mut direct = c[0].attach(&sid, ADMIN).await;
    direct.join("observer").await;
    // Through B as the controller (JSON), through C as an observer (binary).
    let mut via_b = c[1].attach(&sid, ADMIN).await;
    assert_eq!(hello_session(&via_b.hello), sid, "{}", via_b.hello);
    via_b.join("controller").await;
    let mut via_c = Client::connect_binary(&c[2].ws_url(&sid), ADMIN).await;
    via_c.join("observer").await;

    via_b.input("through-b\r").await;
    let seen_direct = direct.output_until("through-b").await;
    let seen_b = via_b.output_until("through-b").await;
    let direct_seqs: Vec<u64> = seen_direct
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(seq)
        .collect();
    let b_seqs: Vec<u64> = seen_b
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(seq)
        .collect();
    assert_eq!(
        direct_seqs, b_seqs,
        "the same output frames, numbered alike"
    );
    let mut binary = Vec::new();
    while !String::from_utf8_lossy(&binary_output(&binary)).contains("through-b") {
        match via_c.next_frame(WAIT).await.expect("a frame through C") {
            Frame::Binary(b) => binary.push(b),
            Frame::Json(_) => {}
        }
    }
    let c_seqs: Vec<u64> = binary
        .iter()
        .map(|b| wire::parse_binary_output(b).unwrap().0)
        .collect();
    assert_eq!(
        c_seqs, direct_seqs,
        "binary frames through C carry the same sequences"
    );

    // A resize through B reaches everyone; a replay through C starts where asked.
    via_b
        .send("pty.session_resize", json!({ "cols": 100, "rows": 30 }))
        .await;
    let resize = direct.expect_kind("Resize").await;
    assert!(matches!(
        session_frame(&resize),
        Some(wire::SessionFrame::Resize { cols: 100, .. })
    ));
    let mut replay = c[2].attach(&sid, ADMIN).await;
    replay
        .send_env(
            "pty.join_session",
            json!({ "role": "observer" }),
            json!({ "replay_from": direct_seqs[0] - 1 }),
        )
        .await;
    let first = loop {
        let f = replay.next().await;
        if kind(&f) == "Output" {
            break f;
        }
    };
    assert_eq!(
        seq(&first),
        direct_seqs[0],
        "replay through C starts after replay_from"
    );
    let mut late = c[1].attach(&sid, ADMIN).await;
    let joined = late.join("observer").await;
    let keyframe = joined.iter().rev().find(|f| kind(f) == "Keyframe").unwrap();
    assert!(
        matches!(
            session_frame(keyframe),
            Some(wire::SessionFrame::Keyframe {
                snapshot_cols: 100,
                ..
            })
        ),
        "a late join through B gets the keyframe"
    );

    // The session ends on its node; the forwarded clients get its end and a normal close.
    let (status, _) = c[2].delete(&format!("/sessions/{sid}"), ADMIN).await;
    assert_eq!(status, 200, "terminating through C reaches node A");
    for client in [&mut via_b, &mut late] {
        let (code, frames) = client.until_close().await;
        assert_eq!(code, Some(1000));
        assert!(frames.iter().any(|f| kind(f) == "Closed"), "{frames:?}");
    }
}

#[tokio::test]
async fn files_of_a_session_go_to_and_come_from_its_node() {
    let Some((_db, c)) = cluster(2).await else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let created = c[0]
        .create_session(json!({ "command": "cat", "cwd": work.path() }))
        .await;
    let sid = &created.session_id;
    let put = c[1]
        .http
        .put(c[1].url(&format!("/sessions/{sid}/files/through-b.txt")))
        .bearer_auth(ADMIN)
        .body("written through node B")
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    assert_eq!(
        std::fs::read_to_string(work.path().join("through-b.txt")).unwrap(),
        "written through node B"
    );
    let got = c[1]
        .http
        .get(c[1].url(&format!("/sessions/{sid}/files/through-b.txt")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(got.text().await.unwrap(), "written through node B");
    let bad = c[1]
        .http
        .get(c[1].url(&format!("/sessions/{sid}/files/through-b.txt")))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(
        bad.status(),
        401,
        "node B refuses what it cannot authenticate"
    );

    // A caller cannot pass itself off as another principal through the forwarding node.
    let observer = c[1].token("pty:observe", None).await;
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        json!({ "token_id": "x", "scope": "pty:admin", "session_id": null, "label": null,
                "share_link": false })
        .to_string(),
    );
    let refused = c[1]
        .http
        .delete(c[1].url(&format!("/sessions/{sid}")))
        .bearer_auth(&observer)
        .header("x-ptyhost-principal", forged)
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        403,
        "the owner sees the observer B authenticated"
    );
    assert_eq!(c[0].session(sid).await.state, "running");
}

#[tokio::test]
async fn a_token_revoked_on_one_node_is_refused_everywhere_and_cuts_its_connections() {
    let Some((_db, c)) = cluster(3).await else {
        return;
    };
    let sid = c[0].command_session("cat").await;
    let token = c[2].token("pty:control", None).await;
    assert_eq!(c[0].get("/sessions", &token).await.0, 200);
    let mut via_b = c[1].attach(&sid, &token).await;
    via_b.join("observer").await;
    let id = c[2]
        .token_cli(&["list"])
        .await
        .lines()
        .find(|l| l.contains("pty:control"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    let revoked_at = std::time::Instant::now();
    c[2].token_cli(&["revoke", &id]).await;
    c[0].until_refused(&token).await;
    let refused = revoked_at.elapsed();
    let (code, _) = via_b.until_close().await;
    assert_eq!(code, Some(4401), "the connection through B is cut");
    assert!(
        refused < Duration::from_secs(1) && revoked_at.elapsed() < Duration::from_millis(1500),
        "refused on A {refused:?} and cut on B {:?} after the revocation",
        revoked_at.elapsed()
    );
}

#[tokio::test]
async fn a_killed_node_s_sessions_close_once_as_node_lost_and_stay_readable_everywhere() {
    let Some((db, mut c)) = cluster(3).await else {
        return;
    };
    let first = c[0].command_session("cat").await;
    let (_, shell) = c[0]
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(json!({ "message": message("m-shell", None, "echo ready") })),
        )
        .await;
    let second = task_in(&shell).context_id;
    let mut via_b = c[1].attach(&first, ADMIN).await;
    via_b.join("controller").await;
    via_b.input("before-the-kill\r").await;
    let printed = seq(via_b.output_until("before-the-kill").await.last().unwrap());
    // What the node has persisted survives it (its write-behind holds under a second).
    tokio::time::timeout(WAIT, async {
        loop {
            let list: control::SessionList = c[2].get_as("/sessions", ADMIN).await;
            let stored = list
                .sessions
                .iter()
                .find(|s| s.session_id == first)
                .map(|s| s.current_sequence);
            if stored >= Some(printed) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the output is persisted");
    let sent = c[1]
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(
                json!({ "message": message("m-lost", Some(&second), "sleep 60"),
                "configuration": { "returnImmediately": true } }),
            ),
        )
        .await;
    let task_id = task_in(&sent.1).id;

    let killed_at = std::time::Instant::now();
    c[0].kill().await;
    let (code, frames) = via_b.until_close_within(Duration::from_secs(20)).await;
    let lost_after = killed_at.elapsed();
    assert_eq!(code, Some(1000), "{frames:?}");
    let closed = frames
        .iter()
        .find(|f| kind(f) == "Closed")
        .expect("a Closed frame");
    assert_eq!(closed_of(closed).1, CloseReason::NodeLost, "{closed}");
    eprintln!("node_lost reached a client through B {lost_after:?} after SIGKILL");

    for sid in [&first, &second] {
        let s = c[2].wait_closed(sid).await;
        assert_eq!(s.close_reason.as_deref(), Some("node_lost"), "{s:?}");
        let replay = c[1].replay_closed(sid, 1).await;
        let closes: Vec<_> = replay.iter().filter(|f| kind(f) == "Closed").collect();
        assert_eq!(closes.len(), 1, "closed exactly once: {closes:?}");
        assert_eq!(closed_of(closes[0]).1, CloseReason::NodeLost);
    }
    let replay = c[2].replay_closed(&first, 1).await;
    assert!(
        output_text(&replay).contains("before-the-kill"),
        "history survives"
    );
    let (_, task) = c[2]
        .a2a("GET", &format!("/tasks/{task_id}"), ADMIN, None)
        .await;
    assert_eq!(task_in(&task).status.state, TaskState::Failed, "{task}");

    // Node A comes back under its id: what it lost stays closed.
    let back = node(&db, 0).await;
    c[0] = back;
    for sid in [&first, &second] {
        let s = c[0].session(sid).await;
        assert_eq!(s.state, "closed", "{s:?}");
        let replay = c[0].replay_closed(sid, 1).await;
        assert_eq!(replay.iter().filter(|f| kind(f) == "Closed").count(), 1);
    }
    let list = node_list(&c[0]).await;
    let a = list.iter().find(|n| n.node_id == "node-a").unwrap();
    assert!(a.alive);
    assert_eq!(a.sessions, 0);
}
