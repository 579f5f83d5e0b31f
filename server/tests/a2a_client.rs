//! `ptyhost a2a`, the A2A client, against the real server: every binding in both versions
//! under each protocol policy, normalized answers, and the fallback rules (only
//! VersionNotSupported downgrades `auto`, only with fallback on; strict 1.0 never does).

mod common;

use common::*;
use serde_json::{Value, json};
use wire::a2a::{ListPushConfigsResponse, Role};

/// Runs `ptyhost a2a ARGS`; returns (exit success, stdout lines as JSON, stderr).
async fn a2a(args: &[&str]) -> (bool, Vec<Value>, String) {
    a2a_with_cache(args, None).await
}

/// `a2a` with an interface cache file (none: a fresh one each time).
async fn a2a_with_cache(
    args: &[&str],
    cache: Option<&std::path::Path>,
) -> (bool, Vec<Value>, String) {
    let fresh = tempfile::tempdir().unwrap();
    let cache = cache.map_or_else(
        || fresh.path().join("cache.json"),
        std::path::Path::to_path_buf,
    );
    let out = tokio::process::Command::new(bin())
        .arg("a2a")
        .args(args)
        .env_remove("AIWG_A2A_PROTOCOL_POLICY")
        .env_remove("AIWG_A2A_PROTOCOL_FALLBACK")
        .env("PTYHOST_A2A_CACHE", &cache)
        .env("RUST_LOG", "info")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    (
        out.status.success(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_client_speaks_every_binding_in_both_versions_with_one_normalized_answer() {
    let s = TestServer::start(&[]).await;
    let base = format!("http://{}", s.addr);
    for policy in ["0.3", "1.0", "auto"] {
        for binding in ["JSONRPC", "HTTP+JSON"] {
            let common = [
                "--token",
                ADMIN,
                "--json",
                "--a2a-protocol",
                policy,
                "--binding",
                binding,
            ];
            let (ok, out, err) = a2a(&[
                &common[..],
                &["send", &base, "echo", &format!("via-{policy}")],
            ]
            .concat())
            .await;
            assert!(ok, "{policy} {binding}: {err}");
            let task = task_in(&out[0]);
            assert_eq!(
                task.status.state,
                TaskState::Completed,
                "{policy} {binding}"
            );
            assert_eq!(artifact_text(&task), format!("via-{policy}\r\n"));
            assert_eq!(
                task.history[0].role,
                Role::User,
                "1.0 shapes whatever was spoken"
            );
            let id = task.id.as_str();

            let (ok, got, _) = a2a(&[&common[..], &["get", &base, id]].concat()).await;
            assert!(ok);
            assert_eq!(task_in(&got[0]).id, id);

            let (ok, events, err) =
                a2a(&[&common[..], &["send", "--stream", &base, "echo a; echo b"]].concat()).await;
            assert!(ok, "{err}");
            assert!(matches!(event_of(&events[0]), StreamResponse::Task(_)));
            assert!(matches!(
                event_of(events.last().unwrap()),
                StreamResponse::StatusUpdate(u) if u.status.state == TaskState::Completed
            ));

            let (ok, status, _) = a2a(&[&common[..], &["status", &base]].concat()).await;
            assert!(ok);
            let expected = if policy == "0.3" { "0.3" } else { "1.0" };
            assert_eq!(
                (
                    status[0]["selectedVersion"].as_str(),
                    status[0]["binding"].as_str()
                ),
                (Some(expected), Some(binding))
            );
        }
    }
    let (ok, _, err) = a2a(&["--token", ADMIN, "list", &base]).await;
    assert!(!ok && err.contains("0.3 has no ListTasks"), "{err}");
    let (ok, listed, _) = a2a(&[
        "--token",
        ADMIN,
        "--json",
        "--a2a-protocol",
        "1.0",
        "list",
        &base,
    ])
    .await;
    assert!(ok && listed.len() >= 6);
}

#[tokio::test]
async fn auto_falls_back_to_0_3_only_on_version_not_supported_and_only_when_allowed() {
    let s = TestServer::start(&[]).await;
    let base = format!("http://{}/agents/local", s.addr);
    let dir = tempfile::tempdir().unwrap();
    // A card whose 1.0 interface is really a 0.3 endpoint: it answers VersionNotSupported.
    let card = dir.path().join("card.json");
    std::fs::write(&card, json!({
        "name": "mislabelled", "supportedInterfaces": [
            { "url": format!("{base}/v1"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
            { "url": format!("{base}/jsonrpc"), "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
        ],
    }).to_string()).unwrap();
    let card = card.to_str().unwrap();
    let send = |extra: &[&str]| {
        let mut args = vec!["--token", ADMIN, "--json", "--card", card];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["send", &base, "true"]);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| async move {
        a2a(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
    };

    let (ok, out, err) = run(send(&["--a2a-protocol", "auto", "--a2a-protocol-fallback"])).await;
    assert!(ok, "{err}");
    assert_eq!(task_in(&out[0]).status.state, TaskState::Completed);

    // The interface cache remembers the refusal: the next auto call goes straight to 0.3.
    let cache = dir.path().join("interfaces.json");
    let args = send(&["--a2a-protocol", "auto", "--a2a-protocol-fallback"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, _, err) = a2a_with_cache(&args, Some(&cache)).await;
    assert!(ok && err.contains("falling back"), "{err}");
    let (ok, _, err) = a2a_with_cache(&args, Some(&cache)).await;
    assert!(
        ok && err.contains("cached") && !err.contains("falling back"),
        "{err}"
    );
    let remembered: Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert!(
        remembered
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("1.0|HTTP+JSON|"))
    );
    let (ok, _, err) = run(send(&[
        "--a2a-protocol",
        "auto",
        "--no-a2a-protocol-fallback",
    ]))
    .await;
    assert!(!ok && err.contains("VERSION_NOT_SUPPORTED"), "{err}");
    let (ok, _, err) = run(send(&["--a2a-protocol", "auto"])).await;
    assert!(
        !ok && err.contains("VERSION_NOT_SUPPORTED"),
        "fallback is off by default: {err}"
    );
    let (ok, _, err) = run(send(&["--a2a-protocol", "1.0", "--a2a-protocol-fallback"])).await;
    assert!(
        !ok && err.contains("VERSION_NOT_SUPPORTED"),
        "strict 1.0 never selects 0.3: {err}"
    );

    // An authentication error never downgrades: the 0.3 interface here is unreachable, so a
    // downgrade would end in a transport error instead.
    let dead = dir.path().join("dead.json");
    std::fs::write(&dead, json!({
        "name": "x", "supportedInterfaces": [
            { "url": base, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
            { "url": "http://127.0.0.1:9/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
        ],
    }).to_string()).unwrap();
    let (ok, _, err) = a2a(&[
        "--token",
        "wrong",
        "--card",
        dead.to_str().unwrap(),
        "--a2a-protocol",
        "auto",
        "--a2a-protocol-fallback",
        "send",
        &base,
        "true",
    ])
    .await;
    assert!(!ok && err.contains("UNAUTHENTICATED"), "{err}");

    // A card that claims 1.0 with only legacy transport fields is refused.
    let legacy = dir.path().join("legacy.json");
    std::fs::write(&legacy, json!({ "name": "old", "protocolVersion": "1.0", "url": format!("{base}/jsonrpc"), "preferredTransport": "JSONRPC" }).to_string()).unwrap();
    let (ok, _, err) = a2a(&["--card", legacy.to_str().unwrap(), "card", &base]).await;
    assert!(!ok && err.contains("legacy transport fields only"), "{err}");
}

#[tokio::test]
async fn the_client_spawns_a_stdio_agent_drives_it_and_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().display().to_string();
    let agent = format!("env HOME={data} {} stdio --data-dir {data}", bin());
    let (ok, out, err) = a2a(&[
        "--json",
        "--stdio",
        &agent,
        "send",
        "-",
        "echo",
        "over-stdio",
    ])
    .await;
    assert!(ok, "{err}");
    let task = task_in(&out[0]);
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(artifact_text(&task), "over-stdio\r\n");

    let conformance = format!("{agent} --executor conformance");
    let (ok, events, err) = a2a(&[
        "--json",
        "--stdio",
        &conformance,
        "send",
        "--stream",
        "-",
        "hi",
    ])
    .await;
    assert!(ok, "{err}");
    assert!(matches!(event_of(&events[0]), StreamResponse::Task(_)));
    assert!(matches!(
        event_of(events.last().unwrap()),
        StreamResponse::StatusUpdate(u) if u.status.state == TaskState::Completed
    ));

    let (ok, _, err) = a2a(&["--stdio", &agent, "get", "-", "no-such-task"]).await;
    assert!(!ok && err.contains("TASK_NOT_FOUND"), "{err}");

    let left = std::process::Command::new("pgrep")
        .args(["-f", &format!("stdio --data-dir {data}")])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "no agent outlives its client");
}

#[tokio::test]
async fn attach_shows_the_terminal_and_types_only_with_control() {
    let s = TestServer::start(&[]).await;
    let base = format!("http://{}", s.addr);
    let sid = cat_session(&s).await;
    let attach = |control: bool, stdin: &'static [u8]| {
        let (base, sid) = (base.clone(), sid.clone());
        async move {
            let mut cmd = tokio::process::Command::new(bin());
            cmd.args(["a2a", "--token", ADMIN, "attach", &base, &sid]);
            if control {
                cmd.arg("--control");
            }
            let mut child = cmd
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            use tokio::io::AsyncWriteExt;
            let mut input = child.stdin.take().unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            input.write_all(stdin).await.unwrap();
            input.flush().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            // Ctrl-] detaches.
            input.write_all(&[0x1d]).await.unwrap();
            let out = tokio::time::timeout(WAIT, child.wait_with_output())
                .await
                .expect("detached")
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let typed = attach(true, b"typed-through-attach\n").await;
    assert!(typed.contains("typed-through-attach"), "{typed:?}");
    // An observer's keystrokes are not sent: the keyframe shows only the earlier line.
    let watched = attach(false, b"observer-keys\n").await;
    assert!(
        watched.contains("typed-through-attach"),
        "the keyframe repaints: {watched:?}"
    );
    assert!(!watched.contains("observer-keys"), "{watched:?}");
}

#[tokio::test]
async fn watch_follows_a_task_by_push_and_sse_and_ends_exactly_once() {
    let s = TestServer::start(&["--push-allow-loopback"]).await;
    let base = format!("http://{}", s.addr);
    for protocol in ["1.0", "0.3"] {
        let common = ["--token", ADMIN, "--json", "--a2a-protocol", protocol];
        let (ok, sent, err) = a2a(&[
            &common[..],
            &[
                "send",
                "--return-immediately",
                &base,
                "sleep 1; echo watched-$((6*7))",
            ],
        ]
        .concat())
        .await;
        assert!(ok, "{err}");
        let id = task_in(&sent[0]).id;
        let (ok, events, err) = a2a(&[&common[..], &["watch", &base, &id]].concat()).await;
        assert!(ok, "{protocol}: {err}");
        let terminal = events
            .iter()
            .filter(|e| state_of(e) == Some(TaskState::Completed))
            .count();
        assert_eq!(
            terminal, 1,
            "{protocol}: one terminal transition in {events:?}"
        );
        // The terminal transition is the last thing shown, by whichever channel came first
        // (a 0.3 push delivers the whole Task).
        let last = events.last().unwrap();
        assert_eq!(
            state_of(last),
            Some(TaskState::Completed),
            "{protocol}: {last}"
        );
        // The output, from artifact updates or from a Task that carries it.
        let text = events.iter().map(text_of).collect::<String>();
        assert!(text.contains("watched-42"), "{protocol}: {text:?}");
        // The watcher removed its config when it was done.
        let (_, configs) = s
            .call(
                s.http
                    .get(s.url(&format!("/tasks/{id}/pushNotificationConfigs")))
                    .header("A2A-Version", "1.0"),
                ADMIN,
            )
            .await;
        let configs: ListPushConfigsResponse = serde_json::from_value(configs).unwrap();
        assert_eq!(configs.configs, [], "{protocol}");
    }
    // A task that already ended is reported once.
    let (_, sent, _) = a2a(&[
        "--token",
        ADMIN,
        "--json",
        "--a2a-protocol",
        "1.0",
        "send",
        &base,
        "true",
    ])
    .await;
    let id = &task_in(&sent[0]).id;
    let (ok, events, err) = a2a(&[
        "--token",
        ADMIN,
        "--json",
        "--a2a-protocol",
        "1.0",
        "watch",
        &base,
        id,
    ])
    .await;
    assert!(ok, "{err}");
    assert_eq!(events.len(), 1);
    assert!(matches!(
        event_of(&events[0]),
        StreamResponse::Task(t) if t.status.state == TaskState::Completed
    ));
}
