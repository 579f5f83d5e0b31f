//! Whether memory comes back after viewers leave: CYCLES times, VIEWERS observers join a
//! session printing steadily, read for a while and leave; the server's RSS is printed
//! before the first cycle (the baseline) and after each, once the viewers are gone.
//!
//!     cargo run --release -p server --example observer_cycles -- [PTYHOST_BIN] [VIEWERS] [CYCLES]
//!
//! PTYHOST_BIN defaults to the release binary beside this example.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "bench-admin-token";
const STEADY: &str = "while :; do cat /etc/services; sleep 0.05; done";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = args.next().map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap();
        exe.parent().unwrap().parent().unwrap().join("ptyhost")
    });
    let viewers: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(300);
    let cycles: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let dir = tempfile::tempdir()?;
    let flags = [
        "--max-observers",
        "1000",
        "--rate-limit-connections",
        "10000",
        "--max-connections-per-session",
        "1000",
    ];
    let (child, addr) = common::start_server(&bin, dir.path(), TOKEN, &flags).await?;
    let rss = || child.id().map_or(0.0, common::rss_mib);
    let created: Value = reqwest::Client::new()
        .post(format!("http://{addr}/sessions"))
        .bearer_auth(TOKEN)
        .json(&json!({ "command": STEADY }))
        .send()
        .await?
        .json()
        .await?;
    let sid = created["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("baseline: server RSS {:.1} MiB", rss());
    for cycle in 1..=cycles {
        let mut readers = Vec::new();
        for _ in 0..viewers {
            let mut req = format!("ws://{addr}/sessions/{sid}/attach").into_client_request()?;
            req.headers_mut()
                .insert("Authorization", format!("Bearer {TOKEN}").parse()?);
            req.headers_mut()
                .insert("Sec-WebSocket-Protocol", "pty-ws.v1".parse()?);
            let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
            let join = json!({ "op": "pty.join_session", "id": "j",
                "ts": "2026-12-01T00:00:00Z", "payload": { "role": "observer" } });
            ws.send(Message::Text(join.to_string().into())).await?;
            readers.push(tokio::spawn(async move {
                let end = tokio::time::Instant::now() + Duration::from_secs(3);
                while let Ok(Some(Ok(_))) = tokio::time::timeout_at(end, ws.next()).await {}
                let _ = ws.close(None).await;
            }));
        }
        let joined = rss();
        for r in readers {
            r.await?;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        println!(
            "cycle {cycle}: {viewers} observers: server RSS {joined:.1} MiB with them, {:.1} MiB after they left",
            rss()
        );
    }
    Ok(())
}
