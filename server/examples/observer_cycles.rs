//! Whether memory comes back after viewers leave: CYCLES times, VIEWERS observers join a
//! session printing steadily, read for a while and leave; the server's RSS is printed
//! before the first cycle (the baseline) and after each, once the viewers are gone.
//!
//!     cargo run --release -p server --example observer_cycles -- [PTYHOST_BIN] [VIEWERS] [CYCLES]
//!
//! PTYHOST_BIN defaults to the release binary beside this example.

mod common;

use std::time::Duration;

use futures_util::StreamExt;

const TOKEN: &str = "bench-admin-token";
const STEADY: &str = "while :; do cat /etc/services; sleep 0.05; done";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
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
    let rss = || child.id().map_or(0.0, common::proc::rss_mib);
    let sid = common::command_session(&reqwest::Client::new(), &addr, TOKEN, STEADY).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("baseline: server RSS {:.1} MiB", rss());
    for cycle in 1..=cycles {
        let mut readers = Vec::new();
        for _ in 0..viewers {
            let mut ws = common::observe(&addr, &sid, TOKEN, None, "pty-ws.v1").await?;
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
