//! Several nodes on one PostgreSQL: every node lists the cluster's nodes and sessions, a
//! session created on one node is attached, driven and read through the others, and a
//! node that dies leaves its sessions closed once (`node_lost`) and readable everywhere.

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};

/// A node's heartbeat timeout in these tests: a killed node counts as dead after it.
const NODE_TIMEOUT: &str = "2";

/// `n` nodes (`node-a`, `node-b`, …) on one new database, or none without PostgreSQL.
/// They start together: the first migrates the empty database while the others wait on
/// its lock.
async fn cluster(n: usize) -> Option<(String, Vec<TestServer>)> {
    let db = postgres_database().await?;
    let nodes = futures_util::future::join_all((0..n).map(|i| node(&db, i))).await;
    Some((db, nodes))
}

async fn node(db: &str, i: usize) -> TestServer {
    let id = format!("node-{}", (b'a' + i as u8) as char);
    TestServer::start(&[
        "--database-url",
        db,
        "--node-id",
        &id,
        "--node-timeout",
        NODE_TIMEOUT,
        "--shell-pool",
        "0",
    ])
    .await
}

fn ids(list: &Value, key: &str, field: &str) -> Vec<String> {
    let mut ids: Vec<String> = list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[field].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

async fn nodes(server: &TestServer, token: &str) -> (u16, Value) {
    let req = server.http.get(format!("http://{}/nodes", server.addr));
    server.call(req, token).await
}

#[tokio::test]
async fn every_node_lists_the_cluster_s_nodes_and_sessions() {
    let Some((_db, c)) = cluster(3).await else {
        return;
    };
    let sid = c[0].command_session("cat").await;
    for server in &c {
        let (status, list) = nodes(server, ADMIN).await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(
            ids(&list, "nodes", "node_id"),
            ["node-a", "node-b", "node-c"]
        );
        for n in list["nodes"].as_array().unwrap() {
            assert_eq!(n["alive"], true, "{n}");
            let expected = if n["node_id"] == "node-a" { 1 } else { 0 };
            assert_eq!(n["sessions"], expected, "{n}");
            assert!(
                n["advertise_url"]
                    .as_str()
                    .unwrap()
                    .starts_with("http://127.0.0.1:")
            );
        }
        let (_, sessions) = server.get("/sessions", ADMIN).await;
        assert_eq!(
            ids(&sessions, "sessions", "session_id"),
            std::slice::from_ref(&sid)
        );
        assert_eq!(sessions["sessions"][0]["node_id"], "node-a");
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
    let mut shared = c[2].attach(&sid, link["token"].as_str().unwrap()).await;
    shared.join("observer").await;
    shared.input("refused\r").await;
    let refused = shared.expect_op("Error").await;
    assert_eq!(refused["payload"]["code"], "PERMISSION_DENIED", "{refused}");
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
    assert_eq!(
        via_b.hello["payload"]["session"]["session_id"], sid,
        "{}",
        via_b.hello
    );
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
    assert_eq!(resize["payload"]["cols"], 100);
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
    assert_eq!(
        keyframe["payload"]["snapshot_cols"], 100,
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

fn binary_output(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .flat_map(|b| {
            wire::parse_binary_output(b)
                .map_or(&[][..], |(_, _, d)| d)
                .to_vec()
        })
        .collect()
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
    let sid = created["session_id"].as_str().unwrap();
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
    assert_eq!(c[0].session(sid).await["state"], "running");
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
    let second = shell["task"]["contextId"].as_str().unwrap().to_owned();
    let mut via_b = c[1].attach(&first, ADMIN).await;
    via_b.join("controller").await;
    via_b.input("before-the-kill\r").await;
    let printed = seq(via_b.output_until("before-the-kill").await.last().unwrap());
    // What the node has persisted survives it (its write-behind holds under a second).
    tokio::time::timeout(WAIT, async {
        loop {
            let (_, list) = c[2].get("/sessions", ADMIN).await;
            let stored = list["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["session_id"] == first.as_str())
                .and_then(|s| s["current_sequence"].as_u64());
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
    let task_id = sent.1["task"]["id"].as_str().expect("a task").to_owned();

    let killed_at = std::time::Instant::now();
    c[0].kill().await;
    let (code, frames) = via_b.until_close_within(Duration::from_secs(20)).await;
    let lost_after = killed_at.elapsed();
    assert_eq!(code, Some(1000), "{frames:?}");
    let closed = frames
        .iter()
        .find(|f| kind(f) == "Closed")
        .expect("a Closed frame");
    assert_eq!(closed["payload"]["reason"], "node_lost", "{closed}");
    eprintln!("node_lost reached a client through B {lost_after:?} after SIGKILL");

    for sid in [&first, &second] {
        let s = c[2].wait_closed(sid).await;
        assert_eq!(s["close_reason"], "node_lost", "{s}");
        let replay = c[1].replay_closed(sid, 1).await;
        let closes: Vec<_> = replay.iter().filter(|f| kind(f) == "Closed").collect();
        assert_eq!(closes.len(), 1, "closed exactly once: {closes:?}");
        assert_eq!(closes[0]["payload"]["reason"], "node_lost");
    }
    let replay = c[2].replay_closed(&first, 1).await;
    assert!(
        output_text(&replay).contains("before-the-kill"),
        "history survives"
    );
    let (_, task) = c[2]
        .a2a("GET", &format!("/tasks/{task_id}"), ADMIN, None)
        .await;
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");

    // Node A comes back under its id: what it lost stays closed.
    let back = node(&db, 0).await;
    c[0] = back;
    for sid in [&first, &second] {
        let s = c[0].session(sid).await;
        assert_eq!(s["state"], "closed", "{s}");
        let replay = c[0].replay_closed(sid, 1).await;
        assert_eq!(replay.iter().filter(|f| kind(f) == "Closed").count(), 1);
    }
    let (_, list) = nodes(&c[0], ADMIN).await;
    let a = list["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node_id"] == "node-a")
        .unwrap();
    assert_eq!(a["alive"], true);
    assert_eq!(a["sessions"], 0);
}

/// An A2A 1.0 JSON-RPC call on `server`.
async fn rpc(server: &TestServer, method: &str, params: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let req = server
        .http
        .post(format!("http://{}/jsonrpc", server.addr))
        .header("Content-Type", "application/json")
        .body(body.to_string());
    server.call(req.header("A2A-Version", "1.0"), ADMIN).await.1
}

/// The JSON-RPC results of a streaming call, in order.
async fn rpc_stream(server: &TestServer, method: &str, params: Value) -> Vec<Value> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let text = server.sse("/jsonrpc", &body, Some("1.0")).await;
    text.split("\n\n")
        .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data:")))
        .map(|data| serde_json::from_str::<Value>(data.trim()).unwrap()["result"].clone())
        .collect()
}

fn message(id: &str, context: Option<&str>, text: &str) -> Value {
    let mut m = json!({ "messageId": id, "role": "ROLE_USER", "parts": [{ "text": text }] });
    if let Some(c) = context {
        m["contextId"] = json!(c);
    }
    m
}

fn artifact_text(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().unwrap())
        .filter_map(|p| p["text"].as_str())
        .collect()
}

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
    let sid = first["task"]["contextId"].as_str().unwrap().to_owned();
    assert_eq!(c[1].session(&sid).await["node_id"], "node-a");

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
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    assert!(
        artifact_text(&sent["task"]).contains("through-42"),
        "{sent}"
    );
    assert_eq!(sent["task"]["contextId"], sid);

    // A JSON-RPC stream through C: the same events a client of A would get.
    let events = rpc_stream(
        &c[2],
        "SendStreamingMessage",
        json!({ "message": message("m-c", Some(&sid), "echo streamed-$((6*7))") }),
    )
    .await;
    assert!(events[0]["task"]["id"].is_string(), "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    let streamed: String = events
        .iter()
        .filter_map(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
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
    let ticking = ticking["task"]["id"].as_str().unwrap().to_owned();
    let (on_a, via_c) = tokio::join!(
        rpc_stream(&c[0], "SubscribeToTask", json!({ "id": ticking })),
        rpc_stream(&c[2], "SubscribeToTask", json!({ "id": ticking })),
    );
    let after_snapshot = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| {
                e.get("artifactUpdate").is_some()
                    || e["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        after_snapshot(&on_a),
        after_snapshot(&via_c),
        "{on_a:?}\n{via_c:?}"
    );
    let ticks: String = after_snapshot(&via_c)
        .iter()
        .filter_map(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
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
    let task_id = long["task"]["id"].as_str().unwrap().to_owned();
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
    assert_eq!(
        working["result"]["status"]["state"], "TASK_STATE_WORKING",
        "{working}"
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
        canceled["status"]["state"], "TASK_STATE_CANCELED",
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
    assert_eq!(got["status"]["state"], "TASK_STATE_CANCELED");
    let (_, listed) = c[1]
        .a2a("GET", &format!("/tasks?contextId={sid}"), ADMIN, None)
        .await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 5, "{listed}");

    // A task nobody has is not found wherever it is asked for.
    let missing = rpc(&c[1], "CancelTask", json!({ "id": "no-such-task" })).await;
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
}

/// `scripts/postgres.sh COMMAND DIR`; its output.
fn postgres_sh(command: &str, dir: &std::path::Path) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres.sh");
    let out = std::process::Command::new(script)
        .args([command, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "postgres.sh {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

async fn readyz(server: &TestServer) -> u16 {
    let url = format!("http://{}/readyz", server.addr);
    match server
        .http
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
    {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

async fn wait_ready(nodes: &[&TestServer], status: u16, within: Duration) {
    tokio::time::timeout(within, async {
        loop {
            let mut all = true;
            for n in nodes {
                all &= readyz(n).await == status;
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("every node's /readyz answers {status}"));
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
    assert_eq!(
        acked["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{acked}"
    );
    let acked = acked["task"]["id"].as_str().unwrap().to_owned();
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
        b.session(&sid).await["state"],
        "running",
        "no live node is taken for dead"
    );
    let (_, task) = b.a2a("GET", &format!("/tasks/{acked}"), ADMIN, None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert!(artifact_text(&task).contains("acked-2"), "{task}");
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

/// A PostgreSQL in a temp dir, removed (stopped first) however the test ends.
struct OwnPostgres(tempfile::TempDir);

impl OwnPostgres {
    fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        postgres_sh("remove", self.path());
    }
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
        .find(|f| f["op"] == "binding_goodbye")
        .expect("a goodbye");
    assert_eq!(goodbye["payload"]["reason"], "server_shutdown");
    assert_eq!(c[0].session(&sid).await["state"], "running");
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
