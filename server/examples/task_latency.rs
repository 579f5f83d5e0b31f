//! SendMessage latency, end to end over HTTP+JSON 1.0, one request at a time: `echo` in an
//! existing session, and `echo` without a contextId (a new session: from the warm shell
//! pool, paced so it refills between messages and back to back, and from a server started
//! with `--shell-pool 0`, which starts a shell for each), beside a2a-sdk's own Python server
//! with a trivial agent in the same run. p50 and p99 of each. HOME is a fresh directory
//! whose `.profile` sleeps LOGIN_SECS (default 0): a user's login files (pyenv, nvm, conda)
//! add their start time to every shell the pool does not hide.
//!
//!     scripts/bench-a2a.sh            (installs the Python side, builds, runs this too)
//!     cargo run --release -p server --example task_latency -- PYTHON [PTYHOST_BIN] [N] [LOGIN_SECS]

mod common;

use std::path::PathBuf;
use std::time::Duration;

const TOKEN: &str = "bench-admin-token";

/// "p50 X ms, p99 Y ms" of the samples.
fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {:.2} ms, p99 {:.2} ms (n={})",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        samples.len()
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let python = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("usage: task_latency PYTHON [PTYHOST_BIN] [N]"))?,
    );
    let bin = common::ptyhost_bin(args.next());
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(300);
    let login: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(0.0);
    let dir = tempfile::tempdir()?;
    for home in [dir.path().to_owned(), dir.path().join("unpooled")] {
        std::fs::create_dir_all(&home)?;
        std::fs::write(home.join(".profile"), format!("sleep {login}\n"))?;
    }
    let (_ptyhost, addr) = common::start_server(&bin, dir.path(), TOKEN, &[]).await?;
    let base = format!("http://{addr}");
    let (_unpooled, unpooled_addr) = common::start_server(
        &bin,
        &dir.path().join("unpooled"),
        TOKEN,
        &["--shell-pool", "0"],
    )
    .await?;
    let unpooled_base = format!("http://{unpooled_addr}");
    let (_sdk, sdk_base) = common::start_sdk(&python).await?;
    let http = reqwest::Client::new();

    // The a2a-sdk baseline: its trivial agent completes every task at once.
    for _ in 0..20 {
        common::send_message(&http, &sdk_base, None, "hi", None).await?;
    }
    let mut baseline = Vec::with_capacity(n);
    for _ in 0..n {
        baseline.push(
            common::send_message(&http, &sdk_base, None, "hi", None)
                .await?
                .0,
        );
    }

    // echo in an existing session (after a warm-up in it).
    let (_, first) = common::send_message(&http, &base, Some(TOKEN), "echo warm", None).await?;
    let sid = first["contextId"].as_str().unwrap_or_default().to_owned();
    for _ in 0..20 {
        common::send_message(&http, &base, Some(TOKEN), "echo warm", Some(&sid)).await?;
    }
    let mut existing = Vec::with_capacity(n);
    for _ in 0..n {
        existing.push(
            common::send_message(&http, &base, Some(TOKEN), "echo hi", Some(&sid))
                .await?
                .0,
        );
    }

    // No contextId: paced so the pool refills, then back to back.
    let fresh = (n / 10).max(10);
    let mut paced = Vec::with_capacity(fresh);
    for _ in 0..fresh {
        tokio::time::sleep(Duration::from_millis(600)).await;
        paced.push(
            common::send_message(&http, &base, Some(TOKEN), "echo hi", None)
                .await?
                .0,
        );
    }
    let mut back_to_back = Vec::with_capacity(fresh);
    for _ in 0..fresh {
        back_to_back.push(
            common::send_message(&http, &base, Some(TOKEN), "echo hi", None)
                .await?
                .0,
        );
    }
    let mut unpooled = Vec::with_capacity(fresh);
    for _ in 0..fresh {
        tokio::time::sleep(Duration::from_millis(600)).await;
        unpooled.push(
            common::send_message(&http, &unpooled_base, Some(TOKEN), "echo hi", None)
                .await?
                .0,
        );
    }

    println!(
        "# SendMessage (blocking) latency, HTTP+JSON 1.0, one request at a time; login files take {login} s"
    );
    println!("a2a-sdk trivial agent: {}", percentiles(baseline));
    println!(
        "ptyhost echo in an existing session: {}",
        percentiles(existing)
    );
    println!(
        "ptyhost echo without contextId, one per 0.6 s (pooled shells): {}",
        percentiles(paced)
    );
    println!(
        "ptyhost echo without contextId, back to back: {}",
        percentiles(back_to_back)
    );
    println!(
        "ptyhost --shell-pool 0, echo without contextId, one per 0.6 s: {}",
        percentiles(unpooled)
    );
    Ok(())
}
