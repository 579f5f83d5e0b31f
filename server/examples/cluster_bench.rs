//! One-byte echo latency through `cat` and flood throughput to one binary viewer on a
//! single node on SQLite (the baseline), and on two nodes on one PostgreSQL with the
//! viewer attached to the session's own node and through the other node, in rounds taken
//! in turn in one run; then the time from SIGKILL of a node to every one of its sessions
//! showing `Closed{node_lost}` on the survivor.
//!
//!     scripts/bench-cluster.sh        (a throwaway PostgreSQL, the release build, this)
//!     cargo run --release -p server --example cluster_bench -- POSTGRES_URL [PTYHOST_BIN] [FLOOD_MIB]

mod common;

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use common::stats::{median, percentiles, spread, us};

const TOKEN: &str = "bench-admin-token";
const ECHO_ROUNDS: usize = 10;
const ECHOES_PER_ROUND: usize = 200;
const FLOOD_ROUNDS: usize = 5;
const LOST_SESSIONS: usize = 20;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let admin = args.next().ok_or_else(|| {
        anyhow::anyhow!("usage: cluster_bench POSTGRES_URL [PTYHOST_BIN] [FLOOD_MIB]")
    })?;
    let bin = common::ptyhost_bin(args.next());
    let flood_mib: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let db = common::new_database(&admin).await?;
    let dir = tempfile::tempdir()?;
    let start = |id: &'static str| {
        let (bin, db, dir) = (bin.clone(), db.clone(), dir.path().join(id));
        async move {
            std::fs::create_dir_all(&dir)?;
            let flags = ["--database-url", &db, "--node-id", id, "--shell-pool", "0"];
            common::start_server(&bin, &dir, TOKEN, &flags).await
        }
    };
    let (mut owner, owner_addr) = start("owner").await?;
    let (_other, other_addr) = start("other").await?;
    let single_dir = dir.path().join("single");
    let (_single, single_addr) =
        common::start_server(&bin, &single_dir, TOKEN, &["--shell-pool", "0"]).await?;
    let http = reqwest::Client::new();
    println!(
        "# one machine: a single node on SQLite (the baseline), and two nodes on one PostgreSQL, a viewer attached to the session's own node (direct) or through the other (forwarded)"
    );
    // (node the session runs on, node the client attaches to)
    let paths = [
        ("single", &single_addr, &single_addr),
        ("direct", &owner_addr, &owner_addr),
        ("forwarded", &owner_addr, &other_addr),
    ];

    // Echo: rounds in turn, each path on a session of its own.
    let mut clients = Vec::new();
    for (_, node, via) in paths {
        let sid = common::command_session(&http, node, TOKEN, "stty raw -echo; exec cat").await?;
        clients.push(controller(via, &sid).await?);
    }
    let mut times = vec![Vec::new(); paths.len()];
    for _ in 0..ECHO_ROUNDS {
        for (i, ws) in clients.iter_mut().enumerate() {
            times[i].extend(echoes(ws, ECHOES_PER_ROUND).await?);
        }
    }
    let echo: Vec<_> = times.iter_mut().map(|t| percentiles(t)).collect();
    let line = paths.iter().zip(&echo).map(|((name, ..), (p50, p99))| {
        format!("{name} p50 {:.0} us, p99 {:.0} us", us(*p50), us(*p99))
    });
    println!(
        "echo ({} each): {}; forwarding adds {:.0} us to the p50",
        ECHO_ROUNDS * ECHOES_PER_ROUND,
        line.collect::<Vec<_>>().join("; "),
        us(echo[2].0) - us(echo[1].0)
    );
    drop(clients);

    // Flood: a new session per round and path, one binary observer, the paths in turn.
    let line: String = (0..79).map(|i| (b'!' + (i % 90) as u8) as char).collect();
    let text = format!("{line}\n").repeat(flood_mib * 1024 * 1024 / 80);
    let flood = common::FloodFile::write(dir.path(), &text)?;
    let mut rates = vec![Vec::new(); paths.len()];
    let mut ratios = Vec::new();
    for _ in 0..FLOOD_ROUNDS {
        for (i, (_, node, via)) in paths.iter().enumerate() {
            let sid = common::create_session(&http, node, TOKEN, &flood.session(1)).await?;
            let ws = common::observe(via, &sid, TOKEN, None, "pty-ws.v1.binary").await?;
            rates[i].push(drain(ws).await?);
        }
        let n = rates[1].len() - 1;
        ratios.push(rates[2][n] / rates[1][n]);
    }
    let line = paths
        .iter()
        .zip(rates.iter_mut())
        .map(|((name, ..), r)| format!("{name} {:.1} MiB/s", median(r) / 1048576.0));
    println!(
        "flood ({flood_mib} MiB to one binary viewer, median of {FLOOD_ROUNDS} rounds): {}; forwarded/direct {:.2} ({:.2}..{:.2})",
        line.collect::<Vec<_>>().join(", "),
        median(&mut ratios.clone()),
        spread(&ratios).0,
        spread(&ratios).1,
    );

    // Losing a node: its sessions closed by the survivor after --node-timeout (15 s).
    let mut lost = Vec::new();
    for _ in 0..LOST_SESSIONS {
        lost.push(common::command_session(&http, &owner_addr, TOKEN, "exec cat").await?);
    }
    let killed = Instant::now();
    owner.kill().await?;
    let mut closed_at = Vec::new();
    while closed_at.len() < lost.len() {
        anyhow::ensure!(
            killed.elapsed() < Duration::from_secs(60),
            "sessions still running"
        );
        let list: Value = http
            .get(format!("http://{other_addr}/sessions"))
            .bearer_auth(TOKEN)
            .send()
            .await?
            .json()
            .await?;
        let done = list["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| lost.iter().any(|l| s["session_id"] == l.as_str()))
            .filter(|s| s["close_reason"] == "node_lost")
            .count();
        while closed_at.len() < done {
            closed_at.push(killed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "node lost: every one of its {LOST_SESSIONS} sessions Closed{{node_lost}} {:.2} s after SIGKILL (the first {:.2} s; --node-timeout 15 s)",
        closed_at.last().unwrap().as_secs_f64(),
        closed_at[0].as_secs_f64()
    );
    Ok(())
}

/// The controller of session `sid` through the node at `addr`, past its first frames.
async fn controller(addr: &str, sid: &str) -> anyhow::Result<common::Ws> {
    let mut ws = common::join(addr, sid, TOKEN, "controller", None, "pty-ws.v1").await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), ws.next()).await {}
    Ok(ws)
}

/// `n` one-byte echoes: each byte sent as input, timed until an Output frame carries it.
async fn echoes(ws: &mut common::Ws, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let byte = b'a' + (i % 26) as u8;
        let input = json!({ "op": "pty.session_input", "id": format!("i{i}"),
            "ts": "2026-12-01T00:00:00Z", "payload": { "data": STANDARD.encode([byte]) } });
        let t = Instant::now();
        ws.send(Message::Text(input.to_string().into())).await?;
        loop {
            let Some(Ok(Message::Text(text))) = ws.next().await else {
                anyhow::bail!("the connection ended during the echoes");
            };
            let f: Value = serde_json::from_str(&text)?;
            if f["payload"]["kind"] == "Output"
                && STANDARD
                    .decode(f["payload"]["data"].as_str().unwrap_or(""))?
                    .contains(&byte)
            {
                break;
            }
            if f["op"] == "Error" {
                anyhow::bail!("refused: {f}");
            }
        }
        times.push(t.elapsed());
    }
    Ok(times)
}

/// Output bytes per second to a binary viewer, first output byte to last, until the
/// session closes.
async fn drain(mut ws: common::Ws) -> anyhow::Result<f64> {
    let (mut bytes, mut first, mut last) = (0usize, None, Instant::now());
    while let Some(m) = ws.next().await {
        match m? {
            Message::Binary(b) => {
                if let Some((_, _, data)) = wire::parse_binary_output(&b) {
                    first.get_or_insert_with(Instant::now);
                    bytes += data.len();
                    last = Instant::now();
                }
            }
            Message::Text(t) if t.contains("\"Closed\"") => break,
            Message::Close(_) => break,
            _ => {}
        }
    }
    let first = first.ok_or_else(|| anyhow::anyhow!("no output"))?;
    Ok(bytes as f64 / (last - first).as_secs_f64())
}
