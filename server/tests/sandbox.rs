//! Sandboxed sessions (`serve --sandbox on`, the default), tested by trying to escape.
//! Every probe that a boundary holds against is also run on a server with `--sandbox off`,
//! where it must get through, so no test passes because its probe could never work.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{ADMIN, TestServer};
use serde_json::{Value, json};

/// Runs `command` as an A2A task in a new session (with `data` beside it, if any) and
/// returns the task's final state, its output and its session id.
async fn run(server: &TestServer, command: &str, data: Option<Value>) -> (String, String, String) {
    let mut parts = vec![json!({ "text": command })];
    parts.extend(data.map(|d| json!({ "data": d })));
    run_message(
        server,
        json!({ "role": "ROLE_USER", "messageId": uuid(), "parts": parts }),
    )
    .await
}

async fn run_in(server: &TestServer, sid: &str, command: &str) -> (String, String, String) {
    let message = json!({
        "role": "ROLE_USER", "messageId": uuid(), "contextId": sid,
        "parts": [{ "text": command }],
    });
    run_message(server, message).await
}

async fn run_message(server: &TestServer, message: Value) -> (String, String, String) {
    let (status, body) = server
        .a2a(
            "POST",
            "/message:send",
            ADMIN,
            Some(json!({ "message": message })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let task = common::task_in(&body);
    (
        task.status.state.name().to_owned(),
        common::artifact_text(&task),
        task.context_id,
    )
}

fn uuid() -> String {
    format!(
        "m-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

async fn both() -> (TestServer, TestServer) {
    let on = TestServer::start(&[]).await;
    let off = TestServer::start(&["--sandbox", "off"]).await;
    (on, off)
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

#[tokio::test]
async fn a_session_reads_no_password_hashes_no_data_directory_and_no_other_workspace() {
    let (on, off) = both().await;
    let (_, _, first) = run(&on, "echo secret-of-the-first > mine.txt", None).await;
    let first_ws = on.session(&first).await.workspace.unwrap();
    let probe = format!(
        "cat /etc/shadow | head -c 5; echo; ls {}; cat {first_ws}/mine.txt",
        on.dir.display()
    );
    let (state, confined, _) = run(&on, &probe, None).await;
    assert_eq!(state, "TASK_STATE_FAILED", "{confined}");
    assert!(
        confined.contains("/etc/shadow: Permission denied"),
        "{confined}"
    );
    assert!(
        !confined.contains("ptyhost.db"),
        "the data directory shows: {confined}"
    );
    assert!(
        !confined.contains("secret-of-the-first"),
        "another workspace shows: {confined}"
    );
    let (_, open, _) = run(&off, &probe, None).await;
    assert!(
        open.contains("root:"),
        "the probe reads /etc/shadow unconfined: {open}"
    );
    assert!(open.contains("ptyhost.db"), "{open}");
    assert!(open.contains("secret-of-the-first"), "{open}");
}

#[tokio::test]
async fn the_servers_environment_reaches_no_process_of_a_session() {
    let (on, off) = both().await;
    // Every test server runs with RUST_LOG set; a session must not find it anywhere.
    let probe = "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^RUST_LOG='";
    let (_, confined, _) = run(&on, probe, None).await;
    assert_eq!(confined.trim(), "0", "{confined}");
    let (_, open, _) = run(&off, probe, None).await;
    assert_ne!(open.trim(), "0", "the unconfined shell inherits it: {open}");
}

#[tokio::test]
async fn a_write_outside_the_workspace_changes_nothing_on_the_host() {
    let (on, off) = both().await;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("written");
    let probe = format!(
        "echo x > {0}; echo x > {1}/ptyhost.db; touch /usr/ptyhost-probe; echo x > inside.txt; cat inside.txt",
        target.display(),
        on.dir.display()
    );
    let db_before = std::fs::metadata(on.dir.join("ptyhost.db")).unwrap().len();
    let (_, confined, sid) = run(&on, &probe, None).await;
    assert!(
        confined.trim_end().ends_with('x'),
        "the workspace takes writes: {confined}"
    );
    assert!(!target.exists(), "a file appeared outside the workspace");
    assert!(!Path::new("/usr/ptyhost-probe").exists());
    assert!(std::fs::metadata(on.dir.join("ptyhost.db")).unwrap().len() >= db_before.min(1));
    let ws = on.session(&sid).await.workspace.unwrap();
    assert!(
        Path::new(&ws).join("inside.txt").is_file(),
        "the workspace is the host's {ws}"
    );
    let probe = format!("echo x > {}", target.display());
    run(&off, &probe, None).await;
    assert!(target.exists(), "the same write gets through unconfined");
}

#[tokio::test]
async fn tmp_is_private_and_the_hosts_processes_are_invisible() {
    let (on, off) = both().await;
    let marker = tempfile::Builder::new()
        .prefix("ptyhost-probe-")
        .tempfile_in("/tmp")
        .unwrap();
    let me = std::process::id();
    let probe = format!(
        "ls {} && echo host-tmp-visible; test -d /proc/{me} && echo host-process-visible; ls /proc | grep -c '^[0-9]'",
        marker.path().display()
    );
    let (_, confined, _) = run(&on, &probe, None).await;
    assert!(!confined.contains("host-tmp-visible"), "{confined}");
    assert!(!confined.contains("host-process-visible"), "{confined}");
    let processes: u32 = confined.lines().last().unwrap().trim().parse().unwrap();
    assert!(processes < 10, "the session sees {processes} processes");
    let (_, open, _) = run(&off, &probe, None).await;
    assert!(
        open.contains("host-tmp-visible") && open.contains("host-process-visible"),
        "{open}"
    );
}

#[tokio::test]
async fn the_servers_own_listener_is_unreachable_from_a_session() {
    let (on, off) = both().await;
    let port = |s: &TestServer| s.addr.rsplit_once(':').unwrap().1.to_owned();
    let probe = |port: String| {
        format!(
            "(echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached || echo unreachable"
        )
    };
    let (_, confined, _) = run(&on, &probe(port(&on)), None).await;
    assert!(confined.contains("unreachable"), "{confined}");
    let (_, open, _) = run(&off, &probe(port(&off)), None).await;
    assert!(
        open.contains("reached") && !open.contains("unreachable"),
        "{open}"
    );
}

#[tokio::test]
async fn mount_chroot_namespaces_and_ip_link_are_refused() {
    let (on, off) = both().await;
    let probe = "mkdir -p m; mount -t tmpfs none m 2>/dev/null && echo mounted && umount m; \
                 chroot / true 2>/dev/null && echo chrooted; \
                 unshare -U true 2>/dev/null && echo unshared; \
                 ip link set lo mtu 65536 2>/dev/null && echo linked; echo done";
    let (_, confined, _) = run(&on, probe, None).await;
    for escape in ["mounted", "chrooted", "unshared", "linked"] {
        assert!(!confined.contains(escape), "{escape}: {confined}");
    }
    assert!(confined.contains("done"));
    assert!(
        is_root(),
        "the unconfined side of this test needs root, as CI has"
    );
    let (_, open, _) = run(&off, probe, None).await;
    for escape in ["mounted", "chrooted", "unshared", "linked"] {
        assert!(open.contains(escape), "{escape} unconfined: {open}");
    }
}

#[tokio::test]
async fn a_fork_bomb_stops_at_the_pid_cap_while_the_server_answers() {
    let (on, off) = both().await;
    // Counted with a glob: once the cap is reached, no further process can start.
    let probe = "for i in $(seq 150); do sleep 3 & done; p=(/proc/[0-9]*); echo count ${#p[@]}";
    let bomb = run(&on, probe, Some(json!({ "sandbox": { "pids": 48 } })));
    let health = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        reqwest::get(format!("http://{}/healthz", on.addr))
            .await
            .unwrap()
            .status()
    };
    let ((_, confined, sid), health) = tokio::join!(bomb, health);
    assert_eq!(health, 200, "the server answers during the bomb");
    assert!(
        confined.contains("Resource temporarily unavailable"),
        "the cap was reached: {confined}"
    );
    // The count needs no new process; a shell still retrying its forks may end first.
    if let Some(n) = count(&confined) {
        assert!(n <= 48, "{n} processes under a cap of 48");
    }
    assert_eq!(on.session(&sid).await.sandbox.unwrap().pids, Some(48));
    let (_, open, _) = run(&off, probe, None).await;
    let unconfined = count(&open).unwrap_or(0);
    assert!(
        unconfined > 150,
        "the same loop makes {unconfined} unconfined: {open}"
    );
}

/// The number after `count ` in a probe's output.
fn count(output: &str) -> Option<u32> {
    let (_, rest) = output.rsplit_once("count ")?;
    rest.split_whitespace().next()?.parse().ok()
}

#[tokio::test]
async fn a_600_mib_allocation_under_a_128_mib_cap_fails_and_ends_the_session_for_its_memory() {
    let (on, off) = both().await;
    let probe = "python3 -c 'b = bytearray(600 << 20); print(len(b))'";
    let (_, _, bystander) = run(&on, "echo alive", None).await;
    let (state, _, sid) = run(
        &on,
        probe,
        Some(json!({ "sandbox": { "memory": "128MiB" } })),
    )
    .await;
    assert_eq!(state, "TASK_STATE_FAILED");
    let closed = on.wait_closed(&sid).await;
    assert_eq!(
        closed.close_reason.as_deref(),
        Some("memory_limit"),
        "{closed:?}"
    );
    let frames = on.replay_closed(&sid, 0).await;
    let closed = frames.iter().find(|f| common::kind(f) == "Closed").unwrap();
    assert_eq!(
        common::closed_of(closed).1,
        wire::CloseReason::MemoryLimit,
        "{closed}"
    );
    let (state, output, _) = run_in(&on, &bystander, "echo still-here").await;
    assert_eq!(
        (state.as_str(), output.contains("still-here")),
        ("TASK_STATE_COMPLETED", true)
    );
    let (state, open, _) = run(&off, probe, None).await;
    assert_eq!(state, "TASK_STATE_COMPLETED", "{open}");
    assert!(open.contains(&(600u64 << 20).to_string()), "{open}");
}

/// Whether a process whose command line contains `needle` runs on this machine.
fn running(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

#[tokio::test]
async fn no_process_of_a_session_outlives_a_server_killed_with_sigkill() {
    let (mut on, mut off) = both().await;
    let probe =
        |secs: u32| format!("setsid sleep {secs} > /dev/null 2>&1 < /dev/null & echo started");
    run(&on, &probe(4241), None).await;
    run(&off, &probe(4242), None).await;
    // The task ends once the background job is forked, maybe before it has exec'd sleep.
    let started = |n: &str| !running(n).is_empty();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !(started("sleep 4241") && started("sleep 4242"))
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started("sleep 4241") && started("sleep 4242"));
    on.kill().await;
    off.kill().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !running("sleep 4241").is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        running("sleep 4241").is_empty(),
        "a sandboxed process outlived the server"
    );
    let survivors = running("sleep 4242");
    assert!(
        !survivors.is_empty(),
        "the unconfined probe's process survives kill -9"
    );
    for pid in survivors {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status();
    }
}

#[tokio::test]
async fn raising_a_sandbox_cap_needs_admin_and_the_session_shows_its_limits_and_use() {
    let (on, off) = both().await;
    let control = on.token("pty:control", None).await;
    for raising in [
        json!({ "sandbox": { "memory": "4GiB" } }),
        json!({ "sandbox": { "network": "host" } }),
    ] {
        let (status, body) = on.post("/sessions", &control, raising).await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, lowered) = on
        .post(
            "/sessions",
            &control,
            json!({ "sandbox": { "memory": "256MiB", "pids": 64, "cpus": 0.5 } }),
        )
        .await;
    assert_eq!(status, 201, "{lowered}");
    let lowered: common::Session = serde_json::from_value(lowered).unwrap();
    let s = lowered.sandbox.as_ref().unwrap();
    assert_eq!(
        (s.enabled, &s.network),
        (true, &wire::control::Network::Mode("none".into()))
    );
    assert_eq!(
        (s.memory_bytes, s.pids, s.cpus),
        (Some(256 << 20), Some(64), Some(0.5))
    );
    for cap in [
        "memory",
        "pids",
        "cpus",
        "filesystem",
        "syscalls",
        "namespaces",
    ] {
        assert!(s.enforced_by.contains_key(cap), "{cap}: {s:?}");
    }
    let sid = &lowered.session_id;
    let shown = on
        .wait_until(sid, |v| v.usage.as_ref().is_some_and(|u| u.pids > 0))
        .await;
    assert!(shown.usage.as_ref().unwrap().memory_bytes > 0, "{shown:?}");
    let (status, _) = on
        .post(
            "/sessions",
            ADMIN,
            json!({ "sandbox": { "memory": "4GiB", "network": "host" } }),
        )
        .await;
    assert_eq!(status, 201);
    let (status, body) = on
        .post(
            "/sessions",
            &control,
            json!({ "sandbox": { "memory": "a lot" } }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let plain = off.create_session(json!({ "command": "true" })).await;
    assert!(!plain.sandbox.unwrap().enabled);
}

#[tokio::test]
async fn a_cwd_that_holds_the_data_directory_is_refused() {
    let on = TestServer::start(&[]).await;
    let parent = on.dir.parent().unwrap().display().to_string();
    let (status, body) = on.post("/sessions", ADMIN, json!({ "cwd": parent })).await;
    assert_eq!(status, 400, "{body}");
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("README"), "the project").unwrap();
    let s = on
        .create_session(json!({ "cwd": project.path(), "command": "cat README; sleep 5" }))
        .await;
    assert_eq!(
        s.workspace.map(std::path::PathBuf::from),
        Some(std::fs::canonicalize(project.path()).unwrap())
    );
}

#[tokio::test]
async fn a_managed_tmux_session_is_confined_like_a_direct_one() {
    let (on, off) = both().await;
    let probe = json!({
        // Printed again and again, so an attach that comes late still sees it.
        "argv": ["sh", "-c", "while :; do head -c 5 /etc/shadow 2>&1; echo; echo probe-done; sleep 0.3; done"],
        "session_class": "managed",
    });
    let mut seen = Vec::new();
    for server in [&on, &off] {
        let (status, created) = server.post("/sessions", ADMIN, probe.clone()).await;
        assert_eq!(status, 201, "{created}");
        let created: common::Session = serde_json::from_value(created).unwrap();
        let sid = created.session_id.as_str();
        let mut c = server.attach(sid, ADMIN).await;
        c.join("observer").await;
        // The first mark may end an iteration whose start came before the attach: read
        // on to the end of a whole one.
        let mut text = common::output_text(&c.output_until("probe-done").await);
        text.push_str(&common::output_text(&c.output_until("probe-done").await));
        seen.push(text);
        // Managed sessions outlive their server: end this one (and its tmux session).
        server.delete(&format!("/sessions/{sid}"), ADMIN).await;
    }
    assert!(seen[0].contains("Permission denied"), "{}", seen[0]);
    assert!(
        seen[1].contains("root:"),
        "unconfined under tmux: {}",
        seen[1]
    );
}
