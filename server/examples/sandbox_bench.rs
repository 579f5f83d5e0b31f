//! What the sandbox costs, beside the same server with `--sandbox off` in the same run:
//! SendMessage latency for `echo` in an existing session, for a message without a
//! contextId served from the warm shell pool, and for one that starts a new shell
//! (`--shell-pool 0`), one request at a time; and the server's memory per idle session.
//!
//!     scripts/bench-sandbox.sh        (builds in release and runs this)
//!     cargo run --release -p server --example sandbox_bench -- [PTYHOST_BIN] [N]

mod common;

use std::time::Duration;

use serde_json::{Value, json};

const TOKEN: &str = "bench-admin-token";
const IDLE_SESSIONS: usize = 50;

async fn send(
    http: &reqwest::Client,
    base: &str,
    context: Option<&str>,
) -> anyhow::Result<(Duration, Value)> {
    common::send_message(http, base, Some(TOKEN), "echo hi", context).await
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Figures {
    existing: (Duration, Duration),
    pooled: (Duration, Duration),
    new_shell: (Duration, Duration),
    idle_kib: f64,
}

async fn measure(bin: &std::path::Path, flags: &[&str], n: usize) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let http = reqwest::Client::new();
    let (server, addr) = common::start_server(bin, dir.path(), TOKEN, flags).await?;
    let base = format!("http://{addr}");
    let (_, first) = send(&http, &base, None).await?;
    let sid = first["contextId"].as_str().unwrap_or_default().to_owned();
    for _ in 0..20 {
        send(&http, &base, Some(&sid)).await?;
    }
    let mut existing = Vec::with_capacity(n);
    for _ in 0..n {
        existing.push(send(&http, &base, Some(&sid)).await?.0);
    }
    let fresh = (n / 10).max(10);
    let mut pooled = Vec::with_capacity(fresh);
    for _ in 0..fresh {
        tokio::time::sleep(Duration::from_millis(600)).await;
        pooled.push(send(&http, &base, None).await?.0);
    }
    // Idle sessions: the server's RSS before and after starting them (each prompted).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = |c: &tokio::process::Child| c.id().map_or(0.0, common::proc::rss_mib);
    let before = rss(&server);
    for _ in 0..IDLE_SESSIONS {
        let r = http
            .post(format!("{base}/sessions"))
            .bearer_auth(TOKEN)
            .json(&json!({}))
            .send()
            .await?;
        anyhow::ensure!(r.status() == 201, "create session: {}", r.status());
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_kib = (rss(&server) - before) * 1024.0 / IDLE_SESSIONS as f64;
    drop(server);

    let unpooled_dir = tempfile::tempdir()?;
    let mut unpooled_flags = flags.to_vec();
    unpooled_flags.extend(["--shell-pool", "0"]);
    let (_unpooled, addr) =
        common::start_server(bin, unpooled_dir.path(), TOKEN, &unpooled_flags).await?;
    let unpooled_base = format!("http://{addr}");
    let mut new_shell = Vec::with_capacity(fresh);
    for _ in 0..fresh {
        new_shell.push(send(&http, &unpooled_base, None).await?.0);
    }
    Ok(Figures {
        existing: common::stats::percentiles(&mut existing),
        pooled: common::stats::percentiles(&mut pooled),
        new_shell: common::stats::percentiles(&mut new_shell),
        idle_kib,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(300);
    let on = measure(&bin, &[], n).await?;
    let off = measure(&bin, &["--sandbox", "off"], n).await?;
    println!(
        "# The sandbox's cost: SendMessage (blocking) over HTTP+JSON 1.0, one at a time; p50 / p99"
    );
    println!("| measure | --sandbox on | --sandbox off | on/off (p50) |");
    println!("|---|---|---|---|");
    for (name, a, b) in [
        ("echo in an existing session", on.existing, off.existing),
        (
            "echo without contextId, from the pool (one per 0.6 s)",
            on.pooled,
            off.pooled,
        ),
        (
            "echo without contextId, a new shell (--shell-pool 0)",
            on.new_shell,
            off.new_shell,
        ),
    ] {
        println!(
            "| {name} | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.2}x |",
            ms(a.0),
            ms(a.1),
            ms(b.0),
            ms(b.1),
            ms(a.0) / ms(b.0)
        );
    }
    println!(
        "| server memory per idle session ({IDLE_SESSIONS} sessions) | {:.0} KiB | {:.0} KiB | {:.2}x |",
        on.idle_kib,
        off.idle_kib,
        on.idle_kib / off.idle_kib
    );
    Ok(())
}
