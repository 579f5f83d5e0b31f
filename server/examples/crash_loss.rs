//! How much output a SIGKILL loses: FLOODS sessions flood at once, one viewer on each
//! records every frame it is sent; after SIGKILL and a restart on the same store, each
//! session's last stored frame is compared with the last its viewer saw. One line per
//! round: the frames and the milliseconds of output the store was behind, worst and mean,
//! and the server's RSS during the floods.
//!
//!     cargo run --release -p server --example crash_loss -- [PTYHOST_BIN] [FLOODS] [ROUNDS]
//!
//! PTYHOST_BIN defaults to the release binary beside this example.

mod common;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "bench-admin-token";
const FLOOD: &str = "i=0; while :; do i=$((i+1)); echo flood-line-$i; done";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let floods: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(4);
    let rounds: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let http = reqwest::Client::new();
    for round in 1..=rounds {
        let dir = tempfile::tempdir()?;
        let (mut child, addr) = common::start_server(&bin, dir.path(), TOKEN, &[]).await?;
        let mut viewers = Vec::new();
        for _ in 0..floods {
            let sid = common::command_session(&http, &addr, TOKEN, FLOOD).await?;
            let stream = common::observe(&addr, &sid, TOKEN, None, "pty-ws.v1").await?;
            viewers.push((sid, tokio::spawn(last_seen(stream, Duration::from_secs(2)))));
        }
        let rss = child.id().map_or(0.0, common::proc::rss_mib);
        let mut seen = Vec::new();
        for (sid, v) in viewers {
            seen.push((sid, v.await??));
        }
        child.kill().await?;
        let (_restarted, addr) = common::start_server(&bin, dir.path(), TOKEN, &[]).await?;
        let mut behind = Vec::new();
        for (sid, (seen_seq, seen_ts)) in seen {
            let stored = last_stored(&addr, &sid, seen_seq).await?;
            let (frames, ms) = match stored {
                Some((seq, ts)) => (seen_seq.saturating_sub(seq), (seen_ts - ts).max(0)),
                None => (seen_seq, 0),
            };
            behind.push((frames, ms));
        }
        let worst = behind
            .iter()
            .max_by_key(|b| b.1)
            .copied()
            .unwrap_or_default();
        let mean_frames = behind.iter().map(|b| b.0).sum::<u64>() as f64 / behind.len() as f64;
        let mean_ms = behind.iter().map(|b| b.1).sum::<i64>() as f64 / behind.len() as f64;
        println!(
            "round {round}: {floods} floods; the store was behind by {mean_frames:.1} frames / \
             {mean_ms:.1} ms on average, {} frames / {} ms at worst; server RSS {rss:.1} MiB",
            worst.0, worst.1
        );
    }
    Ok(())
}

/// The sequence and time (ms) of the last frame `ws` is sent within `span`.
async fn last_seen(mut ws: common::Ws, span: Duration) -> anyhow::Result<(u64, i64)> {
    let end = Instant::now() + span;
    let mut last = (0, 0);
    while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(end.into(), ws.next()).await {
        if let Message::Text(t) = msg {
            let f: Value = serde_json::from_str(&t)?;
            if let Some(seq) = f["sequence"].as_u64() {
                last = (seq, ms(&f));
            }
        }
    }
    Ok(last)
}

/// The last stored frame at or before `upto` of session `sid`: its sequence and time.
async fn last_stored(addr: &str, sid: &str, upto: u64) -> anyhow::Result<Option<(u64, i64)>> {
    let mut ws = common::observe(addr, sid, TOKEN, Some(0), "pty-ws.v1").await?;
    let mut last = None;
    while let Ok(Some(Ok(msg))) = tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
        if let Message::Text(t) = msg {
            let f: Value = serde_json::from_str(&t)?;
            match f["sequence"].as_u64() {
                Some(seq) if seq <= upto && f["payload"]["kind"] == "Output" => {
                    last = Some((seq, ms(&f)));
                }
                _ => {}
            }
        }
    }
    Ok(last)
}

/// A frame's `ts` in ms since the epoch.
fn ms(f: &Value) -> i64 {
    f["ts"]
        .as_str()
        .and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })
        .map_or(0, |t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}
