//! pty-extensions/v1 §9 conformance scenarios, one test each, against the real server.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use wire::Role;
use wire::card::{FlowParams, SupersetCard};
use wire::server::ServerOp;

mod lifecycle_and_flow;
mod roles_and_replay;

fn kinds(frames: &[serde_json::Value]) -> Vec<&str> {
    frames.iter().map(kind).collect()
}

/// Reads every frame up to the close and checks there was exactly one `Closed`.
async fn exactly_one_closed(c: &mut Client) -> serde_json::Value {
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1000));
    let closed: Vec<_> = frames.iter().filter(|f| kind(f) == "Closed").collect();
    assert_eq!(closed.len(), 1, "exactly one Closed: {frames:?}");
    let i = frames.iter().position(|f| kind(f) == "Closed").unwrap();
    assert!(
        frames[i + 1..]
            .iter()
            .all(|f| !matches!(kind(f), "Output" | "Resize"))
    );
    assert_eq!(op_of(frames.last().unwrap()), "binding_goodbye");
    closed[0].clone()
}

/// A late joiner's replay of the whole session holds the same single `Closed`.
async fn closed_is_retained(s: &TestServer, sid: &str, closed: &serde_json::Value) {
    let mut late = s.attach(sid, ADMIN).await;
    late.send_env(
        "pty.join_session",
        json!({ "role": "observer" }),
        json!({ "replay_from": 0 }),
    )
    .await;
    let (_, frames) = late.until_close().await;
    let replayed: Vec<_> = frames.iter().filter(|f| kind(f) == "Closed").collect();
    assert_eq!(replayed, vec![closed], "all frames: {frames:?}");
}

/// A session that floods `bytes` of 'a' once its controller sends a line.
async fn flood_session(s: &TestServer, bytes: usize) -> String {
    let script = format!("read x; head -c {bytes} /dev/zero | tr '\\0' a; sleep 60");
    let v = s
        .create_session(json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 24 }))
        .await;
    v.session_id
}

fn count_a(frames: &[serde_json::Value]) -> usize {
    frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| output_bytes(f).iter().filter(|b| **b == b'a').count())
        .sum()
}
