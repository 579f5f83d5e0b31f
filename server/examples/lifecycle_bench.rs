//! What a session's lifecycle costs, beside its baseline in the same run:
//!
//! - a snapshot of a 100 MiB workspace (1,000 files: half text, half random bytes) through
//!   `POST B/sessions/{sid}:snapshot`, beside `tar -cf - . | zstd -3` of the same folder,
//!   in time and size; and a restore (`POST B/sessions {from_snapshot}`, less a fresh
//!   session's own start) beside `zstd -d | tar -xf -`;
//! - pausing and resuming a running session (`:pause`, `:resume`), each round trip.
//!
//! ```text
//! scripts/bench-lifecycle.sh      (builds in release and runs this)
//! cargo run --release -p server --example lifecycle_bench -- [PTYHOST_BIN] [ROUNDS]
//! ```

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "bench-admin-token";
const FILES: usize = 1000;
const FILE_BYTES: usize = 100 << 10;

/// Fills `dir` with `FILES` files of `FILE_BYTES`: every other one text, the rest random.
fn workspace(dir: &Path) -> anyhow::Result<()> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..FILES {
        let sub = dir.join(format!("src/m{}", i % 20));
        std::fs::create_dir_all(&sub)?;
        let body: Vec<u8> = match i % 2 {
            0 => format!("fn item_{i}() -> usize {{ {i} }} // a line of code\n")
                .into_bytes()
                .into_iter()
                .cycle()
                .take(FILE_BYTES)
                .collect(),
            _ => (0..FILE_BYTES)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect(),
        };
        std::fs::write(sub.join(format!("f{i}")), body)?;
    }
    Ok(())
}

async fn post(
    http: &reqwest::Client,
    url: String,
    body: Value,
) -> anyhow::Result<(Duration, Value)> {
    let started = Instant::now();
    let resp = http.post(url).bearer_auth(TOKEN).json(&body).send().await?;
    let status = resp.status();
    let answer: Value = resp.json().await?;
    anyhow::ensure!(status.is_success(), "{status}: {answer}");
    Ok((started.elapsed(), answer))
}

/// Runs `script` with `sh -c`; how long it took.
fn shell(script: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let status = Command::new("sh").args(["-c", script]).status()?;
    anyhow::ensure!(status.success(), "{script} failed");
    Ok(started.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let rounds: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let http = reqwest::Client::new();
    let (_server, addr) =
        common::start_server(&bin, dir.path(), TOKEN, &["--shell-pool", "0"]).await?;
    let base = format!("http://{addr}");
    let (_, created) = post(
        &http,
        format!("{base}/sessions"),
        json!({ "command": "cat" }),
    )
    .await?;
    let sid = created["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let space = std::path::PathBuf::from(created["workspace"].as_str().unwrap_or_default());
    workspace(&space)?;
    let archive = dir.path().join("baseline.tar.zst");
    let unpacked = dir.path().join("baseline");
    let (mut ours, mut theirs, mut restores, mut untars) = (vec![], vec![], vec![], vec![]);
    let (mut bytes, mut baseline_bytes) = (0, 0);
    for _ in 0..rounds {
        // Rounds alternate, so that the machine's drift falls on both sides alike.
        let (took, taken) =
            post(&http, format!("{base}/sessions/{sid}:snapshot"), json!({})).await?;
        ours.push(ms(took));
        bytes = taken["bytes"].as_u64().unwrap_or(0);
        let snapshot = taken["snapshot_id"].as_str().unwrap_or_default().to_owned();
        theirs.push(ms(shell(&format!(
            "tar -C {} -cf - . | zstd -3 -q -o {} -f",
            space.display(),
            archive.display()
        ))?));
        baseline_bytes = std::fs::metadata(&archive)?.len();

        let (fresh, _) = post(&http, format!("{base}/sessions"), json!({})).await?;
        let (restored, _) = post(
            &http,
            format!("{base}/sessions"),
            json!({ "from_snapshot": snapshot }),
        )
        .await?;
        restores.push(ms(restored.saturating_sub(fresh)));
        let _ = std::fs::remove_dir_all(&unpacked);
        std::fs::create_dir_all(&unpacked)?;
        untars.push(ms(shell(&format!(
            "zstd -d -q -c {} | tar -C {} -xf -",
            archive.display(),
            unpacked.display()
        ))?));
        http.delete(format!("{base}/snapshots/{snapshot}"))
            .bearer_auth(TOKEN)
            .send()
            .await?;
    }
    let median = common::stats::median;
    let (snap, tar, restore, untar) = (
        median(&mut ours),
        median(&mut theirs),
        median(&mut restores),
        median(&mut untars),
    );
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "snapshot of {} MiB in {FILES} files, median of {rounds}: {snap:.0} ms, {:.1} MiB; tar | zstd -3: {tar:.0} ms, {:.1} MiB: {:.2}x the time, {:.2}x the size",
        (FILES * FILE_BYTES) >> 20,
        mib(bytes),
        mib(baseline_bytes),
        snap / tar,
        bytes as f64 / baseline_bytes as f64,
    );
    println!(
        "restore (a session from the snapshot, less a fresh session's start): {restore:.0} ms; zstd -d | tar -x: {untar:.0} ms: {:.2}x",
        restore / untar
    );

    let (_, created) = post(
        &http,
        format!("{base}/sessions"),
        json!({ "command": "yes > /dev/null" }),
    )
    .await?;
    let busy = created["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (mut pauses, mut resumes) = (vec![], vec![]);
    for _ in 0..50 {
        let (paused, _) = post(&http, format!("{base}/sessions/{busy}:pause"), json!({})).await?;
        let (resumed, _) = post(&http, format!("{base}/sessions/{busy}:resume"), json!({})).await?;
        pauses.push(paused);
        resumes.push(resumed);
    }
    let (p50, p99) = common::stats::percentiles(&mut pauses);
    let (r50, r99) = common::stats::percentiles(&mut resumes);
    println!(
        "pause / resume of a running `yes`, 50 rounds: pause p50 {:.2} ms p99 {:.2} ms, resume p50 {:.2} ms p99 {:.2} ms",
        ms(p50),
        ms(p99),
        ms(r50),
        ms(r99)
    );
    Ok(())
}
