//! Measures ptyhost against a raw PTY in the same run and prints one line per figure:
//! throughput (and server CPU per MiB) of a flood to one JSON viewer, one binary viewer and
//! one JSON viewer in the agentic-sandbox executor's shape, a
//! flood to many binary observers (per-viewer bytes/s, who kept up, server CPU and memory),
//! one-byte echo latency through `cat`, the keyframe latency of a joiner on a session with
//! a full replay buffer, and the memory of idle sessions and idle viewers.
//!
//!     cargo run --release -p server --example pty_bench -- [PTYHOST_BIN] [FLOOD_MIB] [VIEWERS]
//!
//! With `TERMINADO_PYTHON` set to a Python that has terminado, the same flood and echo also
//! run through terminado (`terminado_server.py`) in the same run, for comparison.
//!
//! PTYHOST_BIN defaults to the release binary beside this example.

mod common;

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use server::sessions::SessionSpec;
use server::sessions::pty;
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use common::proc::rss_mib;
use common::start_server;
use common::stats::{median, percentiles, spread, us};

const TOKEN: &str = "bench-admin-token";
const ECHO_ROUNDS: usize = 500;
const JOINS: usize = 20;
const IDLE_SESSIONS: usize = 50;
const FLOOD_ROUNDS: usize = 7;
/// The viewers of the single-viewer flood: the spec's JSON and binary subprotocols, and a
/// JSON viewer in the agentic-sandbox executor's shape (`{op, seq, ts, payload}`).
const VIEWERS: [(&str, bool); 3] = [
    ("pty-ws.v1", false),
    ("pty-ws.v1.binary", false),
    ("pty-ws.v1", true),
];

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let mib: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let viewers: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let dir = tempfile::tempdir()?;
    let line =
        "the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ\n";
    let flood = common::FloodFile::write(dir.path(), &line.repeat(mib * 1024 * 1024 / line.len()))?;
    let file = flood.path.clone();
    let bytes = std::fs::metadata(&file)?.len() as f64;
    // What a viewer receives: the terminal turns each newline into CR LF.
    let on_screen = bytes as usize + bytes as usize / line.len();

    // Baseline: the same PTY reader, no server.
    let raw_echo = raw_pty_echo().await?;

    let flags = [
        "--max-observers",
        "1000",
        "--rate-limit-connections",
        "1000",
    ];
    let (mut child, addr) = start_server(&bin, dir.path(), TOKEN, &flags).await?;
    let http = reqwest::Client::new();
    let create = |body: Value| {
        let http = http.clone();
        let addr = addr.clone();
        async move { common::create_session(&http, &addr, TOKEN, &body).await }
    };

    // Flood to one viewer, JSON then binary, each round right after a raw PTY read of the
    // same file: a round's ratio compares runs made under the same conditions, and the
    // figure is the median round.
    let pid = child.id().unwrap_or(0);
    let mut raw_rates = Vec::new();
    let mut rounds = [Vec::new(), Vec::new(), Vec::new()];
    let mut costs = [Vec::new(), Vec::new(), Vec::new()];
    let mut delivered = [(0, 0); 3];
    for _ in 0..FLOOD_ROUNDS {
        let raw = bytes / raw_pty_flood(&file).await?.as_secs_f64();
        raw_rates.push(raw);
        for (i, (subprotocol, executor)) in VIEWERS.into_iter().enumerate() {
            let sid = create(flood.session(1)).await?;
            let mut ws = attach_as(&addr, &sid, subprotocol).await?;
            match executor {
                true => join_as_executor(&mut ws).await?,
                false => join(&mut ws, "observer", None).await?,
            }
            let cpu = common::proc::cpu_secs(pid);
            let d = drain_until_closed(&mut ws).await?;
            costs[i]
                .push((common::proc::cpu_secs(pid) - cpu) * 1000.0 / (d.bytes as f64 / 1048576.0));
            let rate = d.bytes as f64 / d.elapsed.as_secs_f64();
            rounds[i].push((rate / raw, rate));
            delivered[i] = (delivered[i].0.max(d.bytes), delivered[i].1 + d.lagged);
        }
    }
    let raw_rate = median(&mut raw_rates);
    let mut medians = [0.0; 3];
    for (i, (subprotocol, executor)) in VIEWERS.into_iter().enumerate() {
        let subprotocol = match executor {
            true => format!("{subprotocol} (executor shape)"),
            false => subprotocol.to_owned(),
        };
        let mut ratios: Vec<f64> = rounds[i].iter().map(|r| r.0).collect();
        let mut rates: Vec<f64> = rounds[i].iter().map(|r| r.1).collect();
        let (low, high) = spread(&ratios);
        medians[i] = median(&mut rates);
        println!(
            "flood: {:.1} MiB/s to one {subprotocol} viewer vs {:.1} MiB/s raw PTY read (ratio {:.2}, the median of {FLOOD_ROUNDS} rounds, {:.2}..{:.2}; server CPU {:.1} ms per MiB; {} of {} bytes as output, {} lag events)",
            medians[i] / 1048576.0,
            raw_rate / 1048576.0,
            median(&mut ratios),
            low,
            high,
            median(&mut costs[i]),
            delivered[i].0,
            on_screen,
            delivered[i].1
        );
    }
    println!(
        "binary vs JSON: {:.2}x the delivered bytes/s of one viewer; executor-shape JSON vs JSON: {:.2}x",
        medians[1] / medians[0],
        medians[2] / medians[0]
    );

    // Flood to many binary observers at once.
    let sid = create(flood.session(3)).await?;
    let mut observers = Vec::with_capacity(viewers);
    for _ in 0..viewers {
        let mut ws = attach_as(&addr, &sid, "pty-ws.v1.binary").await?;
        join(&mut ws, "observer", None).await?;
        observers.push(ws);
    }
    let cpu_before = common::proc::cpu_secs(pid);
    let wall = Instant::now();
    let drains = observers
        .into_iter()
        .map(|mut ws| tokio::spawn(async move { drain_until_closed(&mut ws).await }));
    let mut results = Vec::with_capacity(viewers);
    for d in futures_util::future::join_all(drains).await {
        results.push(d??);
    }
    // CPU over the flood itself (the wait before it costs next to nothing).
    let flood_secs = results
        .iter()
        .map(|d| d.elapsed.as_secs_f64())
        .fold(0.0, f64::max)
        .min(wall.elapsed().as_secs_f64());
    let cpu = (common::proc::cpu_secs(pid) - cpu_before) / flood_secs;
    let mut per_viewer: Vec<f64> = results
        .iter()
        .map(|d| d.bytes as f64 / d.elapsed.as_secs_f64() / 1048576.0)
        .collect();
    per_viewer.sort_by(f64::total_cmp);
    let complete = results.iter().filter(|d| d.bytes == on_screen).count();
    println!(
        "{viewers} binary observers: per viewer {:.1} MiB/s median, {:.1} MiB/s slowest; {complete} got every byte, {} caught up by keyframes ({} lag events); server CPU {:.0}% of one core, RSS {:.1} MiB",
        per_viewer[per_viewer.len() / 2],
        per_viewer[0],
        results.iter().filter(|d| d.lagged > 0).count(),
        results.iter().map(|d| d.lagged).sum::<usize>(),
        cpu * 100.0,
        rss_mib(pid)
    );

    // Echo of one byte through cat in raw mode.
    let sid = create(json!({ "command": "stty raw -echo; exec cat" })).await?;
    let mut ws = attach(&addr, &sid).await?;
    join(&mut ws, "controller", None).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut times = Vec::with_capacity(ECHO_ROUNDS);
    for i in 0..ECHO_ROUNDS {
        let byte = b'a' + (i % 26) as u8;
        let t = Instant::now();
        send(
            &mut ws,
            "pty.session_input",
            json!({ "data": STANDARD.encode([byte]) }),
            None,
        )
        .await?;
        loop {
            let f = next(&mut ws).await?;
            if f["payload"]["kind"] == "Output"
                && STANDARD
                    .decode(f["payload"]["data"].as_str().unwrap_or(""))?
                    .contains(&byte)
            {
                break;
            }
        }
        times.push(t.elapsed());
    }
    let (p50, p99) = percentiles(&mut times);
    let (r50, r99) = raw_echo;
    println!(
        "echo: p50 {:.0} us, p99 {:.0} us through ptyhost vs p50 {:.0} us, p99 {:.0} us raw PTY (ratios {:.1}, {:.1})",
        us(p50),
        us(p99),
        us(r50),
        us(r99),
        us(p50) / us(r50),
        us(p99) / us(r99)
    );

    // Keyframe for a joiner: empty session vs one whose replay buffer is full.
    let empty = create(json!({ "command": "exec cat" })).await?;
    let full = create(json!({ "command": "for i in $(seq 1 3000); do echo line $i; sleep 0.0005; done; exec cat" })).await?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let e = join_latency(&addr, &empty, None).await?;
    let f = join_latency(&addr, &full, None).await?;
    let r = join_latency(&addr, &full, Some(0)).await?;
    println!(
        "join: keyframe p50 {:.0} us on a full buffer vs {:.0} us on an empty session (ratio {:.2}); full replay from 0 then keyframe p50 {:.1} ms",
        us(f),
        us(e),
        us(f) / us(e),
        us(r) / 1000.0
    );

    // Memory of idle sessions, then of idle viewers on one session.
    let before = rss_mib(pid);
    let mut idle = Vec::with_capacity(IDLE_SESSIONS);
    for _ in 0..IDLE_SESSIONS {
        idle.push(create(json!({ "command": "exec cat" })).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_sessions = rss_mib(pid);
    let mut held = Vec::with_capacity(viewers);
    for _ in 0..viewers {
        let mut ws = attach_as(&addr, &idle[0], "pty-ws.v1.binary").await?;
        join(&mut ws, "observer", None).await?;
        held.push(ws);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_viewers = rss_mib(pid);
    println!(
        "memory: {:.0} KiB per idle session ({IDLE_SESSIONS} sessions), {:.0} KiB per idle viewer ({viewers} viewers), server RSS {:.1} MiB",
        (with_sessions - before) * 1024.0 / IDLE_SESSIONS as f64,
        (with_viewers - with_sessions) * 1024.0 / viewers as f64,
        with_viewers
    );
    drop(held);

    if let Some(python) = std::env::var_os("TERMINADO_PYTHON") {
        let flood = format!("sleep 1; cat {}", file.display());
        let rate = terminado_flood(&python, &flood, on_screen).await?;
        println!(
            "terminado: {:.1} MiB/s to one viewer vs {:.1} MiB/s raw PTY read (ratio {:.2}); ptyhost's JSON viewer is {:.2}x terminado",
            rate / 1048576.0,
            raw_rate / 1048576.0,
            rate / raw_rate,
            medians[0] / rate
        );
        let (t50, t99) = terminado_echo(&python).await?;
        println!(
            "terminado echo: p50 {:.0} us, p99 {:.0} us; ptyhost's p50 is {:.2}x, p99 {:.2}x terminado's",
            us(t50),
            us(t99),
            us(p50) / us(t50),
            us(p99) / us(t99)
        );
    }

    terminate(child.id().unwrap_or(0) as i32);
    child.wait().await?;
    Ok(())
}

fn spec(argv: &[&str]) -> SessionSpec {
    SessionSpec::plain(argv.iter().map(|s| s.to_string()).collect(), 120, 30)
}

async fn raw_pty_flood(file: &std::path::Path) -> anyhow::Result<Duration> {
    let (_pty, mut events) = pty::spawn(&spec(&["cat", file.to_str().unwrap()]))?;
    // From the first chunk to the last, as for the viewers.
    let (mut first, mut last) = (None, None);
    while events.output.recv().await.is_some() {
        let now = Instant::now();
        first.get_or_insert(now);
        last = Some(now);
    }
    Ok(first.zip(last).map_or(Duration::ZERO, |(f, l)| l - f))
}

async fn raw_pty_echo() -> anyhow::Result<(Duration, Duration)> {
    let (pty, mut events) = pty::spawn(&spec(&["sh", "-c", "stty raw -echo; exec cat"]))?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(Some(_)) =
        tokio::time::timeout(Duration::from_millis(50), events.output.recv()).await
    {}
    let mut times = Vec::with_capacity(ECHO_ROUNDS);
    for i in 0..ECHO_ROUNDS {
        let byte = b'a' + (i % 26) as u8;
        let t = Instant::now();
        pty.write(vec![byte]).map_err(|e| anyhow::anyhow!("{e}"))?;
        while let Some(chunk) = events.output.recv().await {
            if chunk.contains(&byte) {
                break;
            }
        }
        times.push(t.elapsed());
    }
    Ok(percentiles(&mut times))
}

/// SIGTERM: the server's orderly shutdown.
fn terminate(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

async fn attach(addr: &str, sid: &str) -> anyhow::Result<Ws> {
    attach_as(addr, sid, "pty-ws.v1").await
}

async fn attach_as(addr: &str, sid: &str, subprotocol: &str) -> anyhow::Result<Ws> {
    let mut req =
        format!("ws://{addr}/agents/local/sessions/{sid}/attach").into_client_request()?;
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        format!("{subprotocol}, bearer.{}", URL_SAFE_NO_PAD.encode(TOKEN)).parse()?,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    next(&mut ws).await?; // binding_hello
    Ok(ws)
}

async fn send(
    ws: &mut Ws,
    op: &str,
    payload: Value,
    replay_from: Option<u64>,
) -> anyhow::Result<()> {
    let mut env = json!({ "op": op, "id": uuid::Uuid::now_v7().to_string(), "ts": "2026-11-29T00:00:00Z", "payload": payload });
    if let Some(r) = replay_from {
        env["replay_from"] = json!(r);
    }
    ws.send(Message::Text(env.to_string().into())).await?;
    Ok(())
}

async fn next(ws: &mut Ws) -> anyhow::Result<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await? {
            Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(&t)?),
            Some(Ok(Message::Close(_))) | None => anyhow::bail!("closed"),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
        }
    }
}

/// Joins and reads the initial flush up to the joiner's own keyframe.
async fn join(ws: &mut Ws, role: &str, replay_from: Option<u64>) -> anyhow::Result<()> {
    send(ws, "pty.join_session", json!({ "role": role }), replay_from).await?;
    let mut role_seq = u64::MAX;
    loop {
        let f = next(ws).await?;
        let s = f["sequence"].as_u64().unwrap_or(0);
        match f["payload"]["kind"].as_str() {
            Some("RoleAssigned") => role_seq = s,
            Some("Keyframe") if s > role_seq => return Ok(()),
            _ => {}
        }
    }
}

/// Joins as the agentic-sandbox dashboard does (no id, no role) and reads up to the
/// joiner's keyframe.
async fn join_as_executor(ws: &mut Ws) -> anyhow::Result<()> {
    let frame = json!({ "op": "pty.join_session", "ts": "2026-12-02T00:00:00Z", "payload": {} });
    ws.send(Message::Text(frame.to_string().into())).await?;
    let mut joined = false;
    loop {
        let f = next(ws).await?;
        match f["op"].as_str() {
            Some("role_assigned") => joined = true,
            Some("keyframe") if joined => return Ok(()),
            _ => {}
        }
    }
}

async fn join_latency(addr: &str, sid: &str, replay_from: Option<u64>) -> anyhow::Result<Duration> {
    let mut times = Vec::with_capacity(JOINS);
    for _ in 0..JOINS {
        let mut ws = attach(addr, sid).await?;
        let t = Instant::now();
        join(&mut ws, "observer", replay_from).await?;
        times.push(t.elapsed());
    }
    Ok(percentiles(&mut times).0)
}

/// Starts terminado serving a fresh terminal running `sh -c COMMAND` per connection.
async fn terminado(
    python: &std::ffi::OsStr,
    command: &str,
) -> anyhow::Result<(tokio::process::Child, Ws)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/terminado_server.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .args(["sh", "-c", command])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    lines.next_line().await?;
    let (ws, _) =
        tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/websocket")).await?;
    Ok((child, ws))
}

/// terminado's messages: `["stdout", text]`, `["disconnect", …]`, `["setup", {}]`.
async fn terminado_next(ws: &mut Ws) -> anyhow::Result<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(60), ws.next()).await? {
            Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(&t)?),
            Some(Ok(Message::Close(_))) | None => return Ok(json!(["disconnect"])),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
        }
    }
}

/// Bytes/s of a flood through terminado, from the first output to the last.
async fn terminado_flood(
    python: &std::ffi::OsStr,
    command: &str,
    expect: usize,
) -> anyhow::Result<f64> {
    let (_server, mut ws) = terminado(python, command).await?;
    let (mut bytes, mut first, mut last) = (0, None, None);
    while bytes < expect {
        let m = terminado_next(&mut ws).await?;
        match m[0].as_str() {
            Some("stdout") => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                bytes += m[1].as_str().unwrap_or("").len();
            }
            Some("disconnect") => break,
            _ => {}
        }
    }
    let secs = first
        .zip(last)
        .map_or(0.0, |(f, l): (Instant, Instant)| (l - f).as_secs_f64());
    Ok(bytes as f64 / secs.max(1e-9))
}

/// One-byte echo through `cat` in raw mode behind terminado.
async fn terminado_echo(python: &std::ffi::OsStr) -> anyhow::Result<(Duration, Duration)> {
    let (_server, mut ws) = terminado(python, "stty raw -echo; exec cat").await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut times = Vec::with_capacity(ECHO_ROUNDS);
    for i in 0..ECHO_ROUNDS {
        let byte = (b'a' + (i % 26) as u8) as char;
        let t = Instant::now();
        ws.send(Message::Text(
            json!(["stdin", byte.to_string()]).to_string().into(),
        ))
        .await?;
        loop {
            let m = terminado_next(&mut ws).await?;
            if m[0] == "stdout" && m[1].as_str().is_some_and(|s| s.contains(byte)) {
                break;
            }
        }
        times.push(t.elapsed());
    }
    Ok(percentiles(&mut times))
}

/// What a viewer received of a flood.
struct Drained {
    /// Output bytes (JSON `Output` or `PW1O`).
    bytes: usize,
    /// `PTY_OUTPUT_LAGGED` errors (each followed by a keyframe).
    lagged: usize,
    /// From the first output to the last.
    elapsed: Duration,
}

/// Counts output bytes, JSON or binary, until `Closed`.
async fn drain_until_closed(ws: &mut Ws) -> anyhow::Result<Drained> {
    let (mut bytes, mut lagged, mut start, mut last) = (0, 0, None, None);
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("closed before Closed"))??;
        let f: Value = match msg {
            Message::Binary(b) => {
                let (_, _, data) = wire::parse_binary_output(&b)
                    .ok_or_else(|| anyhow::anyhow!("a binary frame that is not PW1O"))?;
                start.get_or_insert_with(Instant::now);
                last = Some(Instant::now());
                bytes += data.len();
                continue;
            }
            Message::Text(t) => serde_json::from_str(&t)?,
            Message::Close(_) => anyhow::bail!("closed before Closed"),
            _ => continue,
        };
        // The spec's session frames by kind; the executor's by op.
        let kind = f["payload"]["kind"].as_str().or(match f["op"].as_str() {
            Some("output") => Some("Output"),
            Some("closed") => Some("Closed"),
            _ => None,
        });
        match kind {
            Some("Output") => {
                start.get_or_insert_with(Instant::now);
                last = Some(Instant::now());
                bytes += STANDARD
                    .decode(f["payload"]["data"].as_str().unwrap_or(""))?
                    .len();
            }
            Some("Closed") => {
                let elapsed = start.zip(last).map_or(Duration::ZERO, |(s, l)| l - s);
                return Ok(Drained {
                    bytes,
                    lagged,
                    elapsed,
                });
            }
            _ if f["payload"]["code"] == "PTY_OUTPUT_LAGGED"
                || f["payload"]["code"] == "broadcast.lagged" =>
            {
                lagged += 1
            }
            _ => {}
        }
    }
}
