//! What idle things cost the server: resident memory per idle session (SESSIONS running
//! `cat`), per idle binary viewer (VIEWERS observers of one session, each joined with its
//! initial flush read, then silent), and what is left once the viewers have gone. The
//! baseline is the server's RSS before each step, in the same run. With `reading`, each
//! viewer goes on reading what it is sent (the membership changes of the joins after its
//! own), as a connected client does, instead of leaving it unread.
//!
//!     cargo run --release -p server --example idle_memory -- [PTYHOST_BIN] [SESSIONS] [VIEWERS] [reading]
//!
//! PTYHOST_BIN defaults to the release binary beside this example.

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "bench-admin-token";

/// Reads a joiner's initial flush: up to its own keyframe (the binary frames before it).
async fn read_flush(ws: &mut common::Ws) -> anyhow::Result<()> {
    let mut role_seq = u64::MAX;
    loop {
        let Some(msg) = ws.next().await else {
            anyhow::bail!("the connection closed during the join");
        };
        let Message::Text(text) = msg? else {
            continue;
        };
        let f: serde_json::Value = serde_json::from_str(&text)?;
        let seq = f["sequence"].as_u64().unwrap_or(0);
        match f["payload"]["kind"].as_str() {
            Some("RoleAssigned") => role_seq = seq,
            Some("Keyframe") if seq > role_seq => return Ok(()),
            _ => {}
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let sessions: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let viewers: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1000);
    let reading = args.next().as_deref() == Some("reading");
    server::sys::raise_open_files_limit();
    let dir = tempfile::tempdir()?;
    let most = viewers.to_string();
    let flags = [
        "--max-observers",
        &most,
        "--max-connections-per-session",
        &most,
        "--rate-limit-connections",
        "100000",
        "--shell-pool",
        "0",
    ];
    let (child, addr) = common::start_server(&bin, dir.path(), TOKEN, &flags).await?;
    let rss = || child.id().map_or(0.0, common::proc::rss_mib);
    let settle = || tokio::time::sleep(Duration::from_secs(1));
    let http = reqwest::Client::new();

    settle().await;
    let start = rss();
    let mut ids = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        ids.push(common::command_session(&http, &addr, TOKEN, "exec cat").await?);
    }
    settle().await;
    let with_sessions = rss();

    let mut held = Vec::with_capacity(viewers);
    let mut readers = tokio::task::JoinSet::new();
    for _ in 0..viewers {
        let mut ws = common::observe(&addr, &ids[0], TOKEN, None, "pty-ws.v1.binary").await?;
        read_flush(&mut ws).await?;
        match reading {
            true => {
                readers.spawn(async move { while let Some(Ok(_)) = ws.next().await {} });
            }
            false => held.push(ws),
        }
    }
    settle().await;
    let with_viewers = rss();
    drop(held);
    readers.abort_all();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = rss();

    println!(
        "# server RSS: {start:.1} MiB at start, {with_sessions:.1} MiB with {sessions} idle sessions, {with_viewers:.1} MiB with {viewers} idle binary viewers ({}), {after:.1} MiB once they left",
        if reading { "reading" } else { "silent" }
    );
    println!(
        "per idle session: {:.0} KiB; per idle binary viewer: {:.0} KiB",
        (with_sessions - start) * 1024.0 / sessions as f64,
        (with_viewers - with_sessions) * 1024.0 / viewers as f64
    );
    Ok(())
}
