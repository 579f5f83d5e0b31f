//! Measures ptyhost's terminal beside its baselines in the same run, one line per figure,
//! each with its goal:
//!
//! - one-byte echo through `cat` over binary pty-ws, from a Rust and a Python client,
//!   against the bare WebSocket ↔ PTY relay (`pty_relay`) and a raw PTY;
//! - a flood to one viewer (JSON, binary, the agentic-sandbox executor's shape), from the
//!   Rust client against a raw PTY read (seven rounds) and from the Python client against
//!   Python's own raw PTY read and the bare relay (three rounds), with the server's CPU per
//!   MiB;
//! - a flood to many binary observers: server CPU, who got every byte, who was re-keyed,
//!   and whether each ended on the session's final screen;
//! - observers joining one after another and all at once, from the upgrade to the keyframe;
//! - the memory of idle sessions and idle viewers.
//!
//!     cargo run --release -p server --example pty_bench -- [PTYHOST_BIN] [FLOOD_MIB] [VIEWERS]
//!
//! Build `pty_relay` first (`cargo build --release -p server --examples`). The Python
//! client runs under `BENCH_PYTHON`, else the tests' virtualenv; with `TERMINADO_PYTHON`
//! set to a Python that has terminado, the same flood and echo also run through terminado.
//! With `PTY_BENCH_GUARD=1` it measures only echo and flood (from Rust) and exits non-zero
//! when either falls below the guard's ratios to the raw PTY (`guard`): the regression
//! guard the test command runs. PTYHOST_BIN defaults to the release binary beside it.

mod baselines;
#[path = "../common/mod.rs"]
mod common;
mod ws;

use std::time::{Duration, Instant};

use serde_json::json;
use server::sessions::screen::Screen;
use tokio_tungstenite::tungstenite::Message;

use baselines::{Relay, python_client, python_path, raw_pty_echo, raw_pty_flood};
use common::proc::rss_mib;
use common::start_server;
use common::stats::{median, percentiles, spread, us};
use futures_util::{SinkExt, StreamExt};
use ws::{TOKEN, attach_as, attach_url, drain_until_closed, join, join_as_executor};

pub const ECHO_ROUNDS: usize = 500;
const JOINS: usize = 50;
const IDLE_SESSIONS: usize = 50;
const FLOOD_ROUNDS: usize = 7;
const PYTHON_ROUNDS: usize = 3;
const OBSERVER_ROUNDS: usize = 3;
/// The viewers of the single-viewer flood: the spec's JSON and binary subprotocols, and a
/// JSON viewer in the agentic-sandbox executor's shape (`{op, seq, ts, payload}`).
const VIEWERS: [(&str, bool); 3] = [
    ("pty-ws.v1", false),
    ("pty-ws.v1.binary", false),
    ("pty-ws.v1", true),
];
const ECHO: &str = "stty raw -echo; exec cat";

/// The regression guard CI runs: echo and flood against a raw PTY in the same run, with
/// room for a noisy 2-core machine (measured here: echo 3.1-3.9x the raw PTY's; flood
/// 0.6-1.1x a raw read, the JSON viewer's 16 MiB round lowest).
mod guard {
    pub const ECHO_VS_RAW: f64 = 8.0;
    pub const FLOOD_VS_RAW: f64 = 0.4;
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let mib: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let viewers: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let guarding = std::env::var_os("PTY_BENCH_GUARD").is_some();
    let dir = tempfile::tempdir()?;
    let line =
        "the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ\n";
    let text = line.repeat(mib * 1024 * 1024 / line.len());
    let flood = common::FloodFile::write(dir.path(), &text)?;
    let file = flood.path.clone();
    let bytes = std::fs::metadata(&file)?.len() as f64;
    // What a viewer receives: the terminal turns each newline into CR LF.
    let on_screen = bytes as usize + bytes as usize / line.len();
    let final_screen = {
        let mut screen = Screen::new(120, 30);
        screen.feed(text.replace('\n', "\r\n").as_bytes());
        screen.text()
    };
    let python = python_path();
    let mut failed: Vec<String> = Vec::new();

    let flags = [
        "--max-observers",
        "1000",
        "--rate-limit-connections",
        "1000",
    ];
    let (mut child, addr) = start_server(&bin, dir.path(), TOKEN, &flags).await?;
    let pid = child.id().unwrap_or(0);
    let http = reqwest::Client::new();
    let create = |body: serde_json::Value| {
        let http = http.clone();
        let addr = addr.clone();
        async move { common::create_session(&http, &addr, TOKEN, &body).await }
    };

    // Echo: raw PTY, the bare relay and ptyhost, from Rust, in alternating rounds.
    let relay = Relay::start(ECHO).await?;
    let sid = create(json!({ "command": ECHO })).await?;
    let mut controller = attach_as(&addr, &sid, "pty-ws.v1.binary").await?;
    join(&mut controller, "controller", None).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mut raw, mut bare, mut ours) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        raw.push(raw_pty_echo().await?);
        bare.push(relay.echo().await?);
        ours.push(binary_echo(&mut controller).await?);
    }
    let [raw, bare, ours] = [raw, bare, ours].map(|mut rounds| {
        let (mut p50, mut p99): (Vec<_>, Vec<_>) = rounds.drain(..).unzip();
        (us(percentiles(&mut p50).0), us(percentiles(&mut p99).0))
    });
    println!(
        "echo (binary, Rust client): p50 {:.0} us, p99 {:.0} us through ptyhost vs the bare relay's p50 {:.0} us, p99 {:.0} us (p50 ratio {:.2}, goal <= 1.3; p99 goal <= 1000 us) and a raw PTY's p50 {:.0} us (ratio {:.1}); medians of 3 rounds of {ECHO_ROUNDS}",
        ours.0,
        ours.1,
        bare.0,
        bare.1,
        ours.0 / bare.0,
        raw.0,
        ours.0 / raw.0
    );
    if ours.0 / raw.0 > guard::ECHO_VS_RAW {
        failed.push(format!("echo {:.1}x the raw PTY's", ours.0 / raw.0));
    }
    if let Some(python) = python.as_ref().filter(|_| !guarding) {
        let url = attach_url(&addr, &sid);
        drop(controller);
        let (mut bare_py, mut ours_py) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            bare_py.push(python_client(python, &["echo", &relay.url]).await?[0]);
            ours_py.push(python_client(python, &["echo", &url, TOKEN]).await?[0]);
        }
        let (b, o) = (median(&mut bare_py), median(&mut ours_py));
        println!(
            "echo (binary, Python client): p50 {o:.0} us through ptyhost vs {b:.0} us through the bare relay (ratio {:.2}, goal <= 1.3); medians of 3 rounds",
            o / b
        );
    }
    drop(relay);

    // Flood to one viewer, JSON then binary, each round right after a raw PTY read of the
    // same file: a round's ratio compares runs made under the same conditions, and the
    // figure is the median round.
    let mut raw_rates = Vec::new();
    let mut rounds = [Vec::new(), Vec::new(), Vec::new()];
    let mut costs = [Vec::new(), Vec::new(), Vec::new()];
    let mut delivered = [(0, 0); 3];
    let rounds_of = if guarding { 3 } else { FLOOD_ROUNDS };
    for _ in 0..rounds_of {
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
            let d = drain_until_closed(&mut ws, 120, 30).await?;
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
        let ratio = median(&mut ratios);
        medians[i] = median(&mut rates);
        println!(
            "flood (Rust client): {:.1} MiB/s to one {subprotocol} viewer vs {:.1} MiB/s raw PTY read (ratio {ratio:.2}, goal >= 0.9; the median of {rounds_of} rounds, {low:.2}..{high:.2}; server CPU {:.1} ms per MiB; {} of {} bytes as output, {} lag events)",
            medians[i] / 1048576.0,
            raw_rate / 1048576.0,
            median(&mut costs[i]),
            delivered[i].0,
            on_screen,
            delivered[i].1
        );
        if i < 2 && ratio < guard::FLOOD_VS_RAW {
            failed.push(format!("flood to a {subprotocol} viewer {ratio:.2}x raw"));
        }
    }

    if guarding {
        terminate(pid as i32);
        child.wait().await?;
        anyhow::ensure!(
            failed.is_empty(),
            "below the regression guard: {}",
            failed.join("; ")
        );
        println!("the regression guard holds");
        return Ok(());
    }

    // The same flood to one viewer from the Python client, against Python's raw PTY read.
    if let Some(python) = &python {
        let path = file.to_str().unwrap_or_default();
        let relay = Relay::start(&format!("cat {path}")).await?;
        let mut ratios = [Vec::new(), Vec::new()];
        let (mut raws, mut relayed) = (Vec::new(), Vec::new());
        for _ in 0..PYTHON_ROUNDS {
            let r = python_client(python, &["raw-flood", path]).await?;
            let raw = r[0] / r[1];
            raws.push(raw);
            let r = python_client(python, &["flood", &relay.url]).await?;
            relayed.push(r[0] / r[1] / raw);
            for (i, subprotocol) in ["pty-ws.v1.binary", "pty-ws.v1"].into_iter().enumerate() {
                let sid = create(flood.session(1)).await?;
                let url = attach_url(&addr, &sid);
                let v = python_client(python, &["flood", &url, TOKEN, subprotocol]).await?;
                ratios[i].push(v[0] / v[1] / raw);
            }
        }
        let raw = median(&mut raws);
        let (low, high) = spread(&relayed);
        let relayed = median(&mut relayed);
        for (i, subprotocol) in ["pty-ws.v1.binary", "pty-ws.v1"].into_iter().enumerate() {
            let (low, high) = spread(&ratios[i]);
            let ratio = median(&mut ratios[i]);
            println!(
                "flood (Python client): one {subprotocol} viewer at {ratio:.2}x Python's raw PTY read of {:.1} MiB/s (goal >= 0.9; the median of {PYTHON_ROUNDS} rounds, {low:.2}..{high:.2}), {:.2}x the bare relay's",
                raw / 1048576.0,
                ratio / relayed
            );
        }
        println!(
            "flood (Python client): the bare relay at {relayed:.2}x Python's raw PTY read (the median of {PYTHON_ROUNDS} rounds, {low:.2}..{high:.2})"
        );
    }

    // Flood to many binary observers at once, in rounds: a round's CPU share moves with
    // this machine's noise, so the figure is the median round, and every round must serve
    // every viewer.
    let mut cpus = Vec::new();
    let mut totals = ObserverTotals::default();
    for _ in 0..OBSERVER_ROUNDS {
        let sid = create(flood.session(3)).await?;
        let round = observers_round(&addr, &sid, viewers, pid).await?;
        cpus.push(round.cpu);
        totals.add(&round, on_screen, &final_screen);
    }
    let (low, high) = spread(&cpus);
    totals.per_viewer.sort_by(f64::total_cmp);
    println!(
        "{viewers} binary observers of one flood: server CPU {:.0}% of one core (goal <= 100%; the median of {OBSERVER_ROUNDS} rounds, {:.0}..{:.0}%) over {:.1} s; in all rounds {} of {} got every byte, {} were re-keyed ({} lag events, {} keyframes); {} of {} ended on the final screen; per viewer {:.1} MiB/s median, {:.1} slowest; RSS {:.1} MiB",
        median(&mut cpus) * 100.0,
        low * 100.0,
        high * 100.0,
        median(&mut totals.secs),
        totals.complete,
        viewers * OBSERVER_ROUNDS,
        totals.rekeyed,
        totals.lagged,
        totals.keyframes,
        totals.on_final,
        viewers * OBSERVER_ROUNDS,
        totals.per_viewer[totals.per_viewer.len() / 2],
        totals.per_viewer[0],
        rss_mib(pid)
    );

    // The same flood to as many Python observers, which cannot keep up: they are re-keyed.
    if let Some(python) = &python {
        let sid = create(flood.session(3)).await?;
        let url = attach_url(&addr, &sid);
        let (n, expect) = (viewers.to_string(), on_screen.to_string());
        let cpu = common::proc::cpu_secs(pid);
        let r = python_client(python, &["observers", &url, TOKEN, &n, &expect]).await?;
        let cpu = (common::proc::cpu_secs(pid) - cpu) / r[4];
        println!(
            "{viewers} Python binary observers of one flood: server CPU {:.0}% of one core (goal <= 100%) over {:.1} s; {} got every byte, {} were re-keyed ({} lag events, {} keyframes)",
            cpu * 100.0,
            r[4],
            r[0],
            r[1],
            r[2],
            r[3]
        );
    }

    // Joins: one after another, then all at once, on a session with a screen to show.
    let full = create(json!({ "command": "for i in $(seq 1 3000); do echo line $i; sleep 0.0005; done; exec cat" })).await?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut one_by_one = Vec::with_capacity(JOINS);
    for _ in 0..JOINS {
        one_by_one.push(ws::timed_join(&addr, &full).await?);
    }
    // Each joiner a task of its own, as separate clients are.
    let at_once = (0..JOINS).map(|_| {
        let (addr, full) = (addr.clone(), full.clone());
        tokio::spawn(async move { ws::timed_join(&addr, &full).await })
    });
    let mut joined = Vec::with_capacity(JOINS);
    for j in futures_util::future::join_all(at_once).await {
        joined.push(j??);
    }
    let at_once = joined;
    for (what, joins) in [("one after another", one_by_one), ("all at once", at_once)] {
        let (mut times, mut upgrades): (Vec<_>, Vec<_>) = joins.into_iter().unzip();
        let slowest = times.iter().max().copied().unwrap_or_default();
        println!(
            "join ({JOINS} observers {what}): upgrade to keyframe p50 {:.1} ms, slowest {:.1} ms (goal <= 20 ms); of which the upgrade p50 {:.1} ms",
            us(percentiles(&mut times).0) / 1000.0,
            us(slowest) / 1000.0,
            us(percentiles(&mut upgrades).0) / 1000.0,
        );
    }
    let e = {
        let empty = create(json!({ "command": "exec cat" })).await?;
        let mut times = Vec::new();
        for _ in 0..20 {
            times.push(ws::timed_join(&addr, &empty).await?.0);
        }
        percentiles(&mut times).0
    };
    println!(
        "join (baseline): an empty session's upgrade to keyframe p50 {:.1} ms",
        us(e) / 1000.0
    );

    // Memory of idle sessions, then of idle viewers on one session.
    let before = rss_mib(pid);
    let mut idle = Vec::with_capacity(IDLE_SESSIONS);
    for _ in 0..IDLE_SESSIONS {
        idle.push(create(json!({ "command": "exec cat" })).await?);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
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
        "memory: {:.0} KiB per idle session ({IDLE_SESSIONS} sessions; goal <= 64 KiB), {:.0} KiB per idle viewer ({viewers} viewers), server RSS {:.1} MiB",
        (with_sessions - before) * 1024.0 / IDLE_SESSIONS as f64,
        (with_viewers - with_sessions) * 1024.0 / viewers as f64,
        with_viewers
    );
    drop(held);

    if let Some(python) = std::env::var_os("TERMINADO_PYTHON") {
        let flood = format!("sleep 1; cat {}", file.display());
        let rate = baselines::terminado_flood(&python, &flood, on_screen).await?;
        println!(
            "terminado: {:.1} MiB/s to one viewer vs {:.1} MiB/s raw PTY read (ratio {:.2}); ptyhost's JSON viewer is {:.2}x terminado",
            rate / 1048576.0,
            raw_rate / 1048576.0,
            rate / raw_rate,
            medians[0] / rate
        );
        let (t50, t99) = baselines::terminado_echo(&python).await?;
        println!(
            "terminado echo: p50 {:.0} us, p99 {:.0} us; ptyhost's binary p50 is {:.2}x terminado's",
            us(t50),
            us(t99),
            ours.0 / us(t50),
        );
    }

    terminate(pid as i32);
    child.wait().await?;
    Ok(())
}

/// One-byte echo through the session's `cat` over binary pty-ws (`PW1I` in, `PW1O` out).
async fn binary_echo(ws: &mut ws::Ws) -> anyhow::Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(ECHO_ROUNDS);
    for i in 0..ECHO_ROUNDS {
        let byte = b'a' + (i % 26) as u8;
        let t = Instant::now();
        ws.send(Message::Binary(wire::binary_input(&[byte]).into()))
            .await?;
        loop {
            match ws.next().await {
                Some(Ok(Message::Binary(b)))
                    if wire::parse_binary_output(&b).is_some_and(|(_, _, d)| d.contains(&byte)) =>
                {
                    break;
                }
                Some(Ok(_)) => {}
                _ => anyhow::bail!("the session closed"),
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

/// One round of the many-observers flood: the server's CPU share over it and what each
/// viewer got.
struct ObserversRound {
    cpu: f64,
    secs: f64,
    drained: Vec<ws::Drained>,
}

async fn observers_round(
    addr: &str,
    sid: &str,
    viewers: usize,
    pid: u32,
) -> anyhow::Result<ObserversRound> {
    let mut observers = Vec::with_capacity(viewers);
    for _ in 0..viewers {
        let mut ws = attach_as(addr, sid, "pty-ws.v1.binary").await?;
        join(&mut ws, "observer", None).await?;
        observers.push(ws);
    }
    let cpu_before = common::proc::cpu_secs(pid);
    let wall = Instant::now();
    let drains = observers
        .into_iter()
        .map(|mut ws| tokio::spawn(async move { drain_until_closed(&mut ws, 120, 30).await }));
    let mut drained = Vec::with_capacity(viewers);
    for d in futures_util::future::join_all(drains).await {
        drained.push(d??);
    }
    // CPU over the flood itself (the wait before it costs next to nothing).
    let secs = (drained.iter())
        .map(|d| d.elapsed.as_secs_f64())
        .fold(0.0, f64::max)
        .min(wall.elapsed().as_secs_f64());
    let cpu = (common::proc::cpu_secs(pid) - cpu_before) / secs;
    Ok(ObserversRound { cpu, secs, drained })
}

/// What the viewers of every round got, summed.
#[derive(Default)]
struct ObserverTotals {
    complete: usize,
    rekeyed: usize,
    lagged: usize,
    keyframes: usize,
    on_final: usize,
    secs: Vec<f64>,
    per_viewer: Vec<f64>,
}

impl ObserverTotals {
    fn add(&mut self, round: &ObserversRound, on_screen: usize, final_screen: &[String]) {
        for d in &round.drained {
            self.complete += usize::from(d.bytes == on_screen);
            self.rekeyed += usize::from(d.lagged > 0);
            self.lagged += d.lagged;
            self.keyframes += d.keyframes;
            self.on_final += usize::from(d.screen.as_slice() == final_screen);
            (self.per_viewer).push(d.bytes as f64 / d.elapsed.as_secs_f64() / 1048576.0);
        }
        self.secs.push(round.secs);
    }
}
