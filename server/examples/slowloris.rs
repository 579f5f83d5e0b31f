//! A slowloris against ptyhost, with `/healthz` probed throughout; one line per figure.
//! First the probe alone (the baseline, same run), then the attack from one address, then
//! from many: each attacker holds a request head it never finishes, trickling a byte a
//! second, and reconnects whenever the server closes it or turns it away.
//!
//!     cargo run --release -p server --example slowloris -- [PTYHOST_BIN] [CONNECTIONS] [SECS]
//!
//! PTYHOST_BIN defaults to the release binary beside this example.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const TOKEN: &str = "bench-admin-token";
/// How often `/healthz` is probed, each time on a new connection (as a load balancer does).
const PROBE_EVERY: Duration = Duration::from_millis(50);
/// A probe that takes longer counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Tally {
    /// Attacker connections the server holds now, and the most it held at once.
    held: AtomicI64,
    most: AtomicI64,
    /// Attacker connections the server closed without an answer (the header-read timeout,
    /// or a refusal past the ones it answers at once), or answered (turned away).
    closed: AtomicU64,
    turned: AtomicU64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let connections: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1100);
    let secs: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(15);
    let dir = tempfile::tempdir()?;
    let (child, addr) = common::start_server(&bin, dir.path(), TOKEN, &[]).await?;
    let rss = || child.id().map_or(0.0, common::proc::rss_mib);
    let addr: SocketAddr = addr.parse()?;
    let phase = Duration::from_secs(secs);

    let (p50, p99, failed) = probe(addr, phase).await;
    println!(
        "baseline: /healthz p50 {p50:.2} ms, p99 {p99:.2} ms, {failed} failed; server RSS {:.1} MiB",
        rss()
    );
    for (name, addresses) in [("one address", 1), ("250 addresses", 250)] {
        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        let attackers: Vec<_> = (0..connections)
            .map(|i| {
                let from = format!(
                    "127.0.{}.{}",
                    2 + (i % addresses) / 250,
                    1 + (i % addresses) % 250
                );
                tokio::spawn(attack(addr, from, tally.clone(), stop.clone()))
            })
            .collect();
        let (p50, p99, failed) = probe(addr, phase).await;
        let rss_now = rss();
        stop.store(true, Ordering::Relaxed);
        for a in attackers {
            a.abort();
        }
        println!(
            "{name}: {connections} attackers, the server held at most {} and {} at the end; \
             {} closed unanswered, {} turned away with an answer; /healthz p50 {p50:.2} ms, p99 {p99:.2} ms, \
             {failed} failed; server RSS {rss_now:.1} MiB",
            tally.most.load(Ordering::Relaxed),
            tally.held.load(Ordering::Relaxed),
            tally.closed.load(Ordering::Relaxed),
            tally.turned.load(Ordering::Relaxed),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// One attacker: holds an unfinished request head from `from` until the server lets go,
/// then comes back.
async fn attack(addr: SocketAddr, from: String, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(socket) = TcpSocket::new_v4() else {
            return;
        };
        let bound = format!("{from}:0").parse().map(|a| socket.bind(a));
        if !matches!(bound, Ok(Ok(()))) {
            return;
        }
        let Ok(mut tcp) = socket.connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if tcp
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-a: ")
            .await
            .is_err()
        {
            continue;
        }
        let now = tally.held.fetch_add(1, Ordering::Relaxed) + 1;
        tally.most.fetch_max(now, Ordering::Relaxed);
        let mut byte = [0u8; 1];
        let answered = loop {
            tokio::select! {
                read = tcp.read(&mut byte) => break matches!(read, Ok(1..)),
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    if tcp.write_all(b"a").await.is_err() {
                        break false;
                    }
                }
            }
        };
        tally.held.fetch_sub(1, Ordering::Relaxed);
        let counter = if answered {
            &tally.turned
        } else {
            &tally.closed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Probes `/healthz` for `phase`; p50 and p99 latency in ms, and how many failed.
async fn probe(addr: SocketAddr, phase: Duration) -> (f64, f64, usize) {
    let end = Instant::now() + phase;
    let mut took = Vec::new();
    let mut failed = 0;
    while Instant::now() < end {
        let start = Instant::now();
        let once = async {
            let mut tcp = tokio::net::TcpStream::connect(addr).await?;
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await?;
            let mut answer = Vec::new();
            tcp.read_to_end(&mut answer).await?;
            anyhow::ensure!(answer.starts_with(b"HTTP/1.1 200"), "not 200");
            anyhow::Ok(())
        };
        match tokio::time::timeout(PROBE_TIMEOUT, once).await {
            Ok(Ok(())) => took.push(start.elapsed().as_secs_f64() * 1000.0),
            _ => failed += 1,
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    took.sort_by(f64::total_cmp);
    let at = |q: f64| {
        took.get(((took.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    (at(0.5), at(0.99), failed)
}
