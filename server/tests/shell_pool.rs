//! The warm shell pool (`--shell-pool N`): a message without a contextId takes a shell that
//! is already up, the pool refills behind it and never holds more than N, a message that
//! asks for its own cwd starts fresh, and a taken shell is a session like any other.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// Waits until the pool holds `n` shells.
async fn pool_holds(s: &TestServer, n: u64) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while s.metric("ptyhost_shell_pool_shells").await != n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the pool never held {n} shells"));
}

async fn send(s: &TestServer, message: Value) -> Task {
    let req = s
        .http
        .post(s.url("/message:send"))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(json!({ "message": message }).to_string());
    let (status, body) = s.call(req, ADMIN).await;
    assert_eq!(status, 200, "{body}");
    task_in(&body)
}

fn text(command: &str) -> Value {
    json!({ "messageId": uuid::Uuid::now_v7().to_string(), "role": "ROLE_USER", "parts": [{ "text": command }] })
}

fn output(task: &Task) -> String {
    artifact_text(task)
}

async fn listed(s: &TestServer) -> Vec<Session> {
    s.get_as::<wire::control::SessionList>("/sessions", ADMIN)
        .await
        .sessions
}

/// The pid of each shell the server runs (its children, whichever thread spawned them).
fn shells(s: &TestServer) -> Vec<u32> {
    let threads = std::fs::read_dir(format!("/proc/{}/task", s.pid())).unwrap();
    let mut pids: Vec<u32> = threads
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect();
    pids.sort();
    pids
}

#[tokio::test]
async fn a_message_without_context_takes_a_pooled_shell_and_the_pool_is_replaced() {
    let s = TestServer::start(&["--shell-pool", "1"]).await;
    pool_holds(&s, 1).await;
    assert_eq!(listed(&s).await, [], "a pooled shell is no session yet");

    let task = send(&s, text("echo pooled-$((6*7))")).await;
    assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    assert_eq!(output(&task), "pooled-42\r\n");
    assert_eq!(s.metric("ptyhost_shell_pool_taken_total").await, 1);
    pool_holds(&s, 1).await;
    let sessions = listed(&s).await;
    assert_eq!(sessions.len(), 1, "only the taken shell is listed");
    assert_eq!(sessions[0].session_id, task.context_id);
    assert_eq!(sessions[0].state, "running");
}

#[tokio::test]
async fn the_pool_never_holds_more_than_its_size_under_a_burst_of_twenty_messages() {
    let s = TestServer::start(&["--shell-pool", "2"]).await;
    pool_holds(&s, 2).await;
    let burst =
        futures_util::future::join_all((0..20).map(|i| send(&s, text(&format!("echo burst-{i}")))));
    let sample = async {
        let mut most = 0;
        loop {
            most = most.max(s.metric("ptyhost_shell_pool_shells").await);
            tokio::time::sleep(Duration::from_millis(5)).await;
            if most > 2 {
                return most;
            }
        }
    };
    let tasks = tokio::select! {
        tasks = burst => tasks,
        most = sample => panic!("the pool held {most} shells"),
    };
    let mut contexts: Vec<&str> = tasks.iter().map(|t| t.context_id.as_str()).collect();
    for (i, t) in tasks.iter().enumerate() {
        assert_eq!(output(t), format!("burst-{i}\r\n"));
    }
    contexts.sort();
    contexts.dedup();
    assert_eq!(contexts.len(), 20, "each message got its own shell");
    pool_holds(&s, 2).await;
    assert!(s.metric("ptyhost_shell_pool_shells").await <= 2);
}

#[tokio::test]
async fn a_message_with_its_own_cwd_bypasses_the_pool_and_its_shell_starts_there() {
    let s = TestServer::start(&["--shell-pool", "1"]).await;
    pool_holds(&s, 1).await;
    let dir = s.dir.join("elsewhere");
    std::fs::create_dir_all(&dir).unwrap();
    let message = json!({ "messageId": "own-cwd", "role": "ROLE_USER",
        "parts": [{ "data": { "argv": ["pwd"], "cwd": dir } }] });
    let task = send(&s, message).await;
    assert_eq!(output(&task).trim_end(), dir.to_str().unwrap());
    assert_eq!(s.metric("ptyhost_shell_pool_taken_total").await, 0);
    let session = s.session(&task.context_id).await;
    assert_eq!(session.cwd.as_deref(), dir.to_str());
    assert_eq!(
        s.metric("ptyhost_shell_pool_shells").await,
        1,
        "the pool is untouched"
    );
}

#[tokio::test]
async fn a_pooled_sessions_replay_starts_at_its_first_frame() {
    let s = TestServer::start(&["--shell-pool", "1"]).await;
    pool_holds(&s, 1).await;
    let task = send(&s, text("echo replayed")).await;
    let sid = &task.context_id;
    let mut c = s.attach(sid, ADMIN).await;
    let frames = c
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": 0 }))
        .await;
    let replayed: Vec<&Value> = frames
        .iter()
        .filter(|f| kind(f) == "Output" || kind(f) == "Resize")
        .collect();
    assert_eq!(
        seq(replayed[0]),
        1,
        "replay begins with the shell's first frame"
    );
    assert!(
        output_text(&frames).contains("replayed"),
        "and holds the command"
    );
}

#[tokio::test]
async fn a_pooled_shell_that_dies_is_replaced_and_never_listed() {
    let s = TestServer::start(&["--shell-pool", "1"]).await;
    pool_holds(&s, 1).await;
    let before = shells(&s);
    assert_eq!(before.len(), 1, "one pooled shell runs");
    let pid = rustix::process::Pid::from_raw(before[0] as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let now = shells(&s);
            if now.len() == 1 && now != before && s.metric("ptyhost_shell_pool_shells").await == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a new pooled shell replaces the dead one");
    assert_eq!(
        listed(&s).await,
        [],
        "the dead pooled shell is not a session"
    );
    let task = send(&s, text("echo after-the-death")).await;
    assert_eq!(output(&task), "after-the-death\r\n");
}
