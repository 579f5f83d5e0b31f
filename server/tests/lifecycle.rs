//! A session's lifecycle: idle timeouts (warned first), pause and resume (the cgroup
//! freezer, and SIGSTOP without one), pausing when idle, workspace snapshots, restore
//! and fork, and the store's caps with snapshots counted.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use wire::control::{Forked, Snapshot, Snapshots};
use wire::{CloseReason, PauseMethod, PtyErrorCode, SessionFrame, WarningCode};

/// A session running `command` (sandboxed unless the server says otherwise); its id.
async fn running(s: &TestServer, body: Value) -> String {
    let (status, created) = s.post("/sessions", ADMIN, body).await;
    assert_eq!(status, 201, "{created}");
    serde_json::from_value::<Session>(created)
        .unwrap()
        .session_id
}

fn workspace(session: &Session) -> PathBuf {
    PathBuf::from(session.workspace.clone().expect("a sandboxed session"))
}

async fn cpu_seconds(s: &TestServer, sid: &str) -> f64 {
    s.session(sid).await.usage.expect("usage").cpu_seconds
}

#[tokio::test]
async fn an_idle_session_closes_at_its_timeout_with_the_warning_first() {
    let s = TestServer::start(&["--session-idle-timeout", "3s"]).await;
    let sid = running(&s, json!({ "command": "cat" })).await;
    let started = Instant::now();
    let shown = s.session(&sid).await;
    assert_eq!(shown.idle_timeout.as_deref(), Some("3s"));
    assert!(shown.ends_at.is_some(), "the JSON says when it ends");
    let mut viewer = s.attach(&sid, ADMIN).await;
    viewer.join("observer").await;
    let warning = viewer.expect_kind("Warning").await;
    let Some(SessionFrame::Warning { code, at, .. }) = session_frame(&warning) else {
        unreachable!()
    };
    assert_eq!(code, WarningCode::SessionIdleTimeout);
    let instant = |t: &str| humantime::parse_rfc3339(t).unwrap();
    let ends_at = s.session(&sid).await.ends_at.unwrap();
    let apart = instant(&at).duration_since(instant(&ends_at));
    let apart = apart.unwrap_or_else(|e| e.duration());
    assert!(
        apart < Duration::from_millis(50),
        "{at} is when the JSON says, {ends_at}"
    );
    let warned = started.elapsed();
    let closed = viewer.expect_kind("Closed").await;
    let Some(SessionFrame::Closed { reason, .. }) = session_frame(&closed) else {
        unreachable!()
    };
    assert_eq!(reason, CloseReason::Timeout);
    let ended = started.elapsed();
    assert!(warned < ended, "the warning comes first");
    assert!(
        ended >= Duration::from_millis(2900) && ended < Duration::from_secs(6),
        "closed after {ended:?}"
    );
    assert_eq!(
        s.wait_closed(&sid).await.close_reason.as_deref(),
        Some("timeout")
    );

    // A session's own ttl may not pass the server's maximum.
    let capped = TestServer::start(&["--max-session-ttl", "1h"]).await;
    let (status, body) = capped
        .post("/sessions", ADMIN, json!({ "ttl": "2h" }))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("--max-session-ttl"), "{body}");
    let sid = running(&capped, json!({ "ttl": 60 })).await;
    assert_eq!(capped.session(&sid).await.ttl.as_deref(), Some("1m"));
}

#[tokio::test]
async fn a_paused_yes_uses_no_cpu_for_two_seconds_and_resumes_where_it_was() {
    let s = TestServer::start(&[]).await;
    let sid = running(&s, json!({ "command": "yes > /dev/null" })).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut controller = s.attach(&sid, ADMIN).await;
    controller.join("controller").await;
    let (status, paused) = s
        .post(&format!("/sessions/{sid}:pause"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 200, "{paused}");
    let paused: Session = serde_json::from_value(paused).unwrap();
    assert_eq!(paused.state, "paused");
    let how = paused.paused.expect("how it is paused");
    assert_eq!(how.method, PauseMethod::CgroupFreezer);
    assert!(!how.idle);
    let before = cpu_seconds(&s, &sid).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = cpu_seconds(&s, &sid).await;
    assert!(
        after - before < 0.01,
        "{before} -> {after} CPU s while paused"
    );

    // Input waits, with a typed refusal, and so do tasks.
    controller.input("x").await;
    let refused = controller.expect_kind("Error").await;
    let Some(SessionFrame::Error { code, .. }) = session_frame(&refused) else {
        unreachable!()
    };
    assert_eq!(code, PtyErrorCode::SessionPaused);

    let (status, resumed) = s
        .post(&format!("/sessions/{sid}:resume"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(
        serde_json::from_value::<Session>(resumed).unwrap().state,
        "running"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let later = cpu_seconds(&s, &sid).await;
    assert!(later - after > 0.3, "yes runs again: {after} -> {later}");
    controller.expect_kind("Resumed").await;
}

#[tokio::test]
async fn without_a_cgroup_a_pause_stops_every_process_and_says_so() {
    let s = TestServer::start(&["--sandbox", "off"]).await;
    let dir = tempfile::tempdir().unwrap();
    let sid = running(
        &s,
        json!({ "command": "yes > /dev/null & echo $! > yes.pid; wait", "cwd": dir.path() }),
    )
    .await;
    let pid_file = dir.path().join("yes.pid");
    let deadline = Instant::now() + WAIT;
    while !pid_file.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (status, paused) = s
        .post(&format!("/sessions/{sid}:pause"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 200, "{paused}");
    let paused: Session = serde_json::from_value(paused).unwrap();
    assert_eq!(paused.paused.unwrap().method, PauseMethod::Sigstop);
    let before = cpu_secs(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        cpu_secs(pid) - before < 0.02,
        "a background job is stopped too"
    );
    s.post(&format!("/sessions/{sid}:resume"), ADMIN, json!({}))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(cpu_secs(pid) - before > 0.3, "and runs again");
}

#[tokio::test]
async fn an_idle_session_pauses_and_its_next_input_resumes_it_within_100_ms() {
    let s = TestServer::start(&["--pause-when-idle", "1s"]).await;
    let sid = running(&s, json!({ "command": "cat" })).await;
    let mut controller = s.attach(&sid, ADMIN).await;
    controller.join("controller").await;
    let paused = controller.expect_kind("Paused").await;
    assert!(matches!(
        session_frame(&paused),
        Some(SessionFrame::Paused { idle: true, .. })
    ));
    assert!(s.session(&sid).await.paused.is_some_and(|p| p.idle));
    let typed = Instant::now();
    controller.input("wake up\r").await;
    controller.output_until("wake up").await;
    let echoed = typed.elapsed();
    assert!(
        echoed < Duration::from_millis(100),
        "echoed after {echoed:?}"
    );
    assert_eq!(s.session(&sid).await.state, "running");
}

/// Every entry under `root`: its relative path, mode, and content or link target.
fn tree(root: &Path) -> Vec<(PathBuf, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let meta = path.symlink_metadata().unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let body = if meta.file_type().is_symlink() {
                std::fs::read_link(&path)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if meta.is_dir() {
                dirs.push(path.clone());
                Vec::new()
            } else {
                std::fs::read(&path).unwrap()
            };
            let mode = match meta.file_type().is_symlink() {
                true => 0,
                false => meta.mode() & 0o7777,
            };
            out.push((rel, mode, body));
        }
    }
    out.sort();
    out
}

async fn snapshot(s: &TestServer, sid: &str) -> Snapshot {
    let (status, body) = s
        .post(
            &format!("/sessions/{sid}:snapshot"),
            ADMIN,
            json!({ "label": "t" }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    serde_json::from_value(body).unwrap()
}

#[tokio::test]
async fn a_snapshot_of_a_thousand_files_restores_byte_identical_and_keeps_links_as_links() {
    let s = TestServer::start(&[]).await;
    let sid = running(&s, json!({})).await;
    let source = workspace(&s.session(&sid).await);
    for i in 0..1000 {
        let dir = source.join(format!("d{}", i % 10));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}")),
            format!("file {i}\n").repeat(i % 7),
        )
        .unwrap();
    }
    let tool = source.join("tool.sh");
    std::fs::write(&tool, "#!/bin/sh\necho tool\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o750)).unwrap();
    // A link to a file outside: kept as a link, and the file itself is never read.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "not for snapshots").unwrap();
    symlink(outside.path().join("secret"), source.join("escape")).unwrap();
    symlink("d1/f1", source.join("inside")).unwrap();

    let taken = snapshot(&s, &sid).await;
    assert!(taken.files >= 1013, "{taken:?}");
    let listed: Snapshots = s.get_as("/snapshots", ADMIN).await;
    assert!(
        listed
            .snapshots
            .iter()
            .any(|x| x.snapshot_id == taken.snapshot_id)
    );
    let shown: Snapshot = s
        .get_as(&format!("/snapshots/{}", taken.snapshot_id), ADMIN)
        .await;
    assert_eq!(shown, taken);

    let restored = running(&s, json!({ "from_snapshot": taken.snapshot_id })).await;
    let copy = workspace(&s.session(&restored).await);
    assert_ne!(copy, source);
    assert_eq!(tree(&copy), tree(&source));
    let escape = copy.join("escape");
    assert!(escape.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(
        std::fs::read_link(escape).unwrap(),
        outside.path().join("secret")
    );
    assert!(!String::from_utf8_lossy(&tree(&copy).concat_bodies()).contains("not for snapshots"));

    let (status, _) = s
        .delete(&format!("/snapshots/{}", taken.snapshot_id), ADMIN)
        .await;
    assert_eq!(status, 204);
    let (status, body) = s
        .post(
            "/sessions",
            ADMIN,
            json!({ "from_snapshot": taken.snapshot_id }),
        )
        .await;
    assert_eq!(status, 404, "{body}");
}

trait Bodies {
    fn concat_bodies(&self) -> Vec<u8>;
}

impl Bodies for Vec<(PathBuf, u32, Vec<u8>)> {
    fn concat_bodies(&self) -> Vec<u8> {
        self.iter().flat_map(|(_, _, b)| b.clone()).collect()
    }
}

#[tokio::test]
async fn a_fork_of_three_gives_three_independent_workspaces() {
    let s = TestServer::start(&[]).await;
    let sid = running(&s, json!({ "label": "origin" })).await;
    std::fs::write(workspace(&s.session(&sid).await).join("shared"), "before\n").unwrap();
    let (status, body) = s
        .post(
            &format!("/sessions/{sid}:fork"),
            ADMIN,
            json!({ "count": 3 }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let forked: Forked = serde_json::from_value(body).unwrap();
    assert_eq!(forked.sessions.len(), 3);
    let spaces: Vec<PathBuf> = forked.sessions.iter().map(workspace).collect();
    for space in &spaces {
        assert_eq!(
            std::fs::read_to_string(space.join("shared")).unwrap(),
            "before\n"
        );
    }
    std::fs::write(spaces[0].join("shared"), "changed in one\n").unwrap();
    std::fs::write(spaces[0].join("new"), "only here\n").unwrap();
    for space in &spaces[1..] {
        assert_eq!(
            std::fs::read_to_string(space.join("shared")).unwrap(),
            "before\n"
        );
        assert!(!space.join("new").exists());
    }
    assert_eq!(forked.sessions[0].label.as_deref(), Some("origin (fork 1)"));
}

#[tokio::test]
async fn the_store_cap_holds_with_snapshots_counted() {
    let s = TestServer::start(&["--max-snapshot-bytes", "1MiB"]).await;
    let sid = running(&s, json!({})).await;
    let space = workspace(&s.session(&sid).await);
    // Random bytes do not compress: the archive is as large as the file.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(space.join("noise"), &noise).unwrap();
    let (status, body) = s
        .post(&format!("/sessions/{sid}:snapshot"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 507, "{body}");
    assert!(body.to_string().contains("--max-snapshot-bytes"), "{body}");
    let listed: Snapshots = s.get_as("/snapshots", ADMIN).await;
    assert!(listed.snapshots.is_empty(), "nothing of it is kept");
    assert_eq!(
        s.session(&sid).await.state,
        "running",
        "and the session runs on"
    );

    let small = TestServer::start(&["--max-store-bytes", "2MiB"]).await;
    let sid = running(&small, json!({})).await;
    std::fs::write(workspace(&small.session(&sid).await).join("noise"), &noise).unwrap();
    let (status, body) = small
        .post(&format!("/sessions/{sid}:snapshot"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 507, "{body}");
    assert!(body.to_string().contains("--max-store-bytes"), "{body}");
}

/// Sends `parts` as a new message (no contextId) and waits for its task.
async fn send(s: &TestServer, parts: Value) -> (u16, Value) {
    let message = json!({ "message": {
        "role": "ROLE_USER", "messageId": uuid::Uuid::now_v7().to_string(), "parts": parts,
    }});
    s.a2a("POST", "/message:send", ADMIN, Some(message)).await
}

#[tokio::test]
async fn a_message_branches_from_a_snapshot_by_its_data_part_alone() {
    let s = TestServer::start(&["--shell-pool", "0"]).await;
    let sid = running(&s, json!({})).await;
    std::fs::write(
        workspace(&s.session(&sid).await).join("state.txt"),
        "branch point\n",
    )
    .unwrap();
    let taken = snapshot(&s, &sid).await;
    let (status, body) = send(
        &s,
        json!([{ "text": "cat state.txt" }, { "data": { "from_snapshot": taken.snapshot_id } }]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let task = task_in(&body);
    assert_eq!(artifact_text(&task).trim(), "branch point");
    assert_ne!(task.context_id, sid, "in a session of its own");

    let (status, body) = send(
        &s,
        json!([{ "text": "true" }, { "data": { "from_snapshot": "no-such-snapshot" } }]),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("no-such-snapshot"), "{body}");
}

#[tokio::test]
async fn the_warm_pool_is_resized_and_sandboxed_at_run_time_and_counts_hits_and_misses() {
    let s = TestServer::start(&["--shell-pool", "0"]).await;
    let pool: wire::control::Pool = s.get_as("/pool", ADMIN).await;
    assert_eq!((pool.size, pool.ready), (0, 0));
    let control = s.token("pty:control", None).await;
    let (status, _) = s.get("/pool", &control).await;
    assert_eq!(status, 403, "the pool is the operator's");
    let put = s
        .http
        .put(s.url("/pool"))
        .bearer_auth(ADMIN)
        .json(&json!({ "size": 1, "sandbox": { "memory": "256MiB" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let deadline = Instant::now() + WAIT;
    while s.get_as::<wire::control::Pool>("/pool", ADMIN).await.ready < 1 {
        assert!(Instant::now() < deadline, "the pool fills");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = send(&s, json!([{ "text": "echo pooled" }])).await;
    assert_eq!(status, 200, "{body}");
    let task = task_in(&body);
    let session = s.session(&task.context_id).await;
    assert_eq!(session.sandbox.unwrap().memory_bytes, Some(256 << 20));
    assert_eq!(s.metric("ptyhost_shell_pool_hits_total").await, 1);
    let put = s
        .http
        .put(s.url("/pool"))
        .bearer_auth(ADMIN)
        .json(&json!({ "size": 0 }))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    send(&s, json!([{ "text": "echo fresh" }])).await;
    let pool: wire::control::Pool = s.get_as("/pool", ADMIN).await;
    assert_eq!((pool.size, pool.hits, pool.misses), (0, 1, 1));
    assert_eq!(s.metric("ptyhost_shell_pool_misses_total").await, 1);
}

#[tokio::test]
async fn the_cli_pauses_resumes_snapshots_restores_and_forks() {
    let s = TestServer::start(&[]).await;
    let sid = running(&s, json!({})).await;
    std::fs::write(
        workspace(&s.session(&sid).await).join("kept"),
        "by the cli\n",
    )
    .unwrap();
    assert_eq!(s.session_cli(&["pause", &sid]).await.trim(), "paused");
    assert_eq!(s.session_cli(&["resume", &sid]).await.trim(), "running");
    let taken = s.session_cli(&["snapshot", &sid, "--label", "cli"]).await;
    let snapshot_id = taken.split('\t').next().unwrap().to_owned();
    let shown: Snapshot = s.get_as(&format!("/snapshots/{snapshot_id}"), ADMIN).await;
    assert_eq!(shown.label.as_deref(), Some("cli"));
    let restored = s.session_cli(&["restore", &snapshot_id]).await;
    let copy = workspace(&s.session(restored.trim()).await);
    assert_eq!(
        std::fs::read_to_string(copy.join("kept")).unwrap(),
        "by the cli\n"
    );
    let forked = s.session_cli(&["fork", &sid, "--count", "2"]).await;
    assert_eq!(forked.lines().count(), 2, "{forked}");
}
