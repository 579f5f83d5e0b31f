//! How long a seek into a long recording takes: a closed session of FRAMES stored frames
//! (output, a keyframe every 100), then `GET B/sessions/{sid}/frames?at=T&keyframe=true`
//! for a time in the middle, beside the same request for the session's start (the
//! baseline) in the same run; p50 and p99 of each over 200 requests. Then the whole session
//! exported as asciicast (`recording.cast`), in MB/s.
//!
//!     cargo run --release -p server --example frame_seek -- [PTYHOST_BIN] [FRAMES]
//!
//! With `--prepare DIR [FRAMES]` it only stores that session in data dir DIR and prints its
//! id, for a browser to play back (scripts/bench-ui.sh).

mod common;

use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use server::store::{Frame, FrameBody, SessionRow, Store};

const TOKEN: &str = "bench-admin-token";
const START_MS: i64 = 1_800_000_000_000;

/// A closed session of `n` frames, 1 ms apart, in data dir `data_dir`; its id.
async fn recorded(data_dir: &std::path::Path, n: u64) -> anyhow::Result<String> {
    let store = Store::open(None, data_dir).await?;
    let id = uuid::Uuid::now_v7().to_string();
    store
        .sessions()
        .insert(&SessionRow {
            id: id.clone(),
            instance_id: "local".into(),
            node_id: String::new(),
            label: Some("a long recording".into()),
            argv: vec!["yes".into()],
            cwd: None,
            env: Default::default(),
            backend: "native".into(),
            class: "direct".into(),
            cols: 80,
            rows: 24,
            state: "running".into(),
            exit_code: None,
            close_reason: None,
            last_sequence: 0,
            replay_floor: 0,
            sequence_reserved: n + 1,
            created_at: START_MS,
            closed_at: None,
            workspace: None,
            sandbox: None,
            lifetime: None,
        })
        .await?;
    let mut batch = Vec::with_capacity(10_000);
    for seq in 1..=n {
        let created_at = START_MS + seq as i64;
        let body = if seq % 100 == 0 {
            let text = serde_json::json!({ "op": "pty.session_frame", "id": format!("k{seq}"),
                "ts": server::clock::rfc3339(created_at), "sequence": seq,
                "payload": { "kind": "Keyframe", "snapshot": "", "snapshot_format": "ansi",
                    "snapshot_cols": 80, "snapshot_rows": 24, "anchor_sequence": seq - 1 } });
            FrameBody::Envelope {
                kind: "Keyframe".into(),
                text: Bytes::from(text.to_string()),
            }
        } else {
            FrameBody::Output {
                envelope_id: format!("o{seq}"),
                data: Bytes::from(format!("line {seq}\r\n")),
            }
        };
        batch.push(Frame {
            sequence: seq,
            created_at,
            body,
        });
        if batch.len() == 10_000 {
            store.frames().insert(&id, &batch).await?;
            batch.clear();
        }
    }
    store.frames().insert(&id, &batch).await?;
    store
        .sessions()
        .close(&id, Some(0), "normal", n, START_MS + n as i64)
        .await?;
    store.close().await;
    Ok(id)
}

/// p50 and p99 of 200 requests for the page at `at`.
async fn seek(http: &reqwest::Client, url: &str) -> anyhow::Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(200);
    for _ in 0..200 {
        let started = Instant::now();
        let resp = http.get(url).bearer_auth(TOKEN).send().await?;
        anyhow::ensure!(resp.status().is_success(), "{}", resp.status());
        let page: serde_json::Value = resp.json().await?;
        anyhow::ensure!(page["frames"][0]["payload"]["kind"] == "Keyframe", "{page}");
        times.push(started.elapsed());
    }
    times.sort();
    Ok((times[100], times[198]))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--prepare") {
        let dir = args.nth(1).context("--prepare DIR")?;
        let n = args
            .next()
            .map(|s| s.parse())
            .transpose()?
            .unwrap_or(1_000_000);
        println!("{}", recorded(std::path::Path::new(&dir), n).await?);
        return Ok(());
    }
    let bin = common::ptyhost_bin(args.next());
    let n: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let stored = Instant::now();
    let sid = recorded(&dir.path().join("data"), n).await?;
    println!(
        "# {n} frames stored in {:.1} s",
        stored.elapsed().as_secs_f64()
    );
    let (_server, addr) =
        common::start_server(&bin, dir.path(), TOKEN, &["--shell-pool", "0"]).await?;
    let http = reqwest::Client::new();
    let url =
        |at: i64| format!("http://{addr}/sessions/{sid}/frames?at={at}&keyframe=true&limit=100");
    let (s50, s99) = seek(&http, &url(START_MS + 150)).await?;
    let (m50, m99) = seek(&http, &url(START_MS + n as i64 / 2 + 50)).await?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "seek to the start: p50 {:.2} ms, p99 {:.2} ms; to the middle: p50 {:.2} ms, p99 {:.2} ms (ratio {:.2})",
        ms(s50),
        ms(s99),
        ms(m50),
        ms(m99),
        ms(m50) / ms(s50)
    );
    let started = Instant::now();
    let cast = http
        .get(format!("http://{addr}/sessions/{sid}/recording.cast"))
        .bearer_auth(TOKEN)
        .send()
        .await?
        .bytes()
        .await?;
    let took = started.elapsed().as_secs_f64();
    println!(
        "export: {:.1} MB of asciicast in {took:.2} s, {:.1} MB/s",
        cast.len() as f64 / 1e6,
        cast.len() as f64 / 1e6 / took
    );
    Ok(())
}
