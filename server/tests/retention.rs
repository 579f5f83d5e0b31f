//! The store stays bounded: a session over its byte cap loses its oldest frames and its
//! replay floor moves (old cursors get REPLAY_OUT_OF_RANGE); a closed session's frames and
//! tasks go after the closed retention; past the whole store's bound, closed sessions'
//! history goes first, oldest first.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// Prints `kib` KiB of random bytes as base64 (which LZ4 cannot shrink much), then exits.
fn noise(kib: usize) -> String {
    format!("head -c {} /dev/urandom | base64 -w 0; echo", kib * 1024)
}

async fn session(s: &TestServer, sid: &str) -> wire::control::Session {
    s.session(sid).await
}

fn refused_out_of_range(frames: &[Value]) -> bool {
    frames
        .iter()
        .any(|f| op_of(f) == "Error" && error_of(f).code == wire::ErrorCode::ReplayOutOfRange)
}

async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !done().await {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}"));
}

#[tokio::test]
async fn a_session_over_its_byte_cap_loses_its_oldest_frames_and_its_floor_moves() {
    let s = TestServer::start(&["--replay-max-bytes", "1MiB"]).await;
    let sid = s.command_session(&noise(3072)).await;
    s.wait_closed(&sid).await;
    let closed = session(&s, &sid).await;
    assert!(closed.replay_floor > 0, "{closed:?}");

    assert!(refused_out_of_range(&s.replay_closed(&sid, 0).await));
    let kept = s.replay_closed(&sid, closed.replay_floor).await;
    assert!(!refused_out_of_range(&kept));
    let bytes: usize = kept
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| output_bytes(f).len())
        .sum();
    assert!(
        (256 * 1024..=1280 * 1024).contains(&bytes),
        "{bytes} bytes of output kept under a 1 MiB cap"
    );
}

#[tokio::test]
async fn a_closed_sessions_frames_and_tasks_go_after_the_closed_retention() {
    let s = TestServer::start(&["--closed-retention", "1s"]).await;
    let send = json!({ "message": { "messageId": "m-ret", "role": "ROLE_USER",
        "parts": [{ "text": "echo kept-for-a-second" }] } });
    let post = s
        .http
        .post(s.url("/message:send"))
        .header("A2A-Version", "1.0")
        .json(&send);
    let (status, sent) = s.call(post, ADMIN).await;
    assert_eq!(status, 200, "{sent}");
    let Task {
        id: task,
        context_id: sid,
        ..
    } = task_in(&sent);
    assert_eq!(s.delete(&format!("/sessions/{sid}"), ADMIN).await.0, 200);
    s.wait_closed(&sid).await;

    eventually("the task is dropped", async || {
        let get = s
            .http
            .get(s.url(&format!("/tasks/{task}")))
            .header("A2A-Version", "1.0");
        s.call(get, ADMIN).await.0 == 404
    })
    .await;
    let gone = session(&s, &sid).await;
    assert_eq!(gone.replay_floor, gone.current_sequence, "{gone:?}");
    assert!(refused_out_of_range(&s.replay_closed(&sid, 0).await));
}

#[tokio::test]
async fn past_the_store_bound_the_oldest_closed_sessions_history_goes_first() {
    let s = TestServer::start(&["--max-store-bytes", "3MiB"]).await;
    let mut sids = Vec::new();
    for _ in 0..4 {
        let sid = s.command_session(&noise(900)).await;
        s.wait_closed(&sid).await;
        sids.push(sid);
    }
    eventually(
        "the oldest closed session's history is dropped",
        async || {
            let oldest = session(&s, &sids[0]).await;
            oldest.replay_floor == oldest.current_sequence
        },
    )
    .await;
    let newest = session(&s, &sids[3]).await;
    assert!(newest.replay_floor < newest.current_sequence, "{newest:?}");
    assert!(!refused_out_of_range(
        &s.replay_closed(&sids[3], newest.replay_floor).await
    ));
}
