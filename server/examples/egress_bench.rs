//! What a sandboxed session's network costs, beside the host's network in the same run:
//!
//! - a download from a server on the host's loopback, through the egress proxy (a session
//!   whose allowlist names it) and with network `host`, timed by curl inside each session:
//!   256 MiB as fast as the loopback goes, and 64 MiB at a 1 Gbit/s link's pace; with the
//!   CPU time ptyhost and the whole machine spent per GiB on each side;
//! - a port preview's request latency (p50, p99) beside the same request sent directly: a
//!   dev server inside a session with a namespace of its own (through
//!   `B/sessions/{sid}/ports/{port}/`), and the same server in a session on the host's
//!   network (straight to its port). Two servers: python3's http.server, which closes each
//!   connection, and node's http, which keeps them open.
//!
//! ```text
//! scripts/bench-egress.sh        (builds in release and runs this)
//! cargo run --release -p server --example egress_bench -- [PTYHOST_BIN] [N]
//! ```

mod common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "bench-admin-token";
const ROUNDS: usize = 7;

/// Serves `/{mib}/{rate}`: that many MiB, at most `rate` MiB/s (0: as fast as it can), the
/// pace of a network link rather than the loopback's. Its port.
async fn download_server() -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let chunk = vec![b'x'; 1 << 20];
        while let Ok((mut conn, _)) = listener.accept().await {
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                let path = head.split_whitespace().nth(1).unwrap_or("/");
                let mut asked = path.rsplit('/').filter_map(|p| p.parse::<u64>().ok());
                let (rate, mib) = (asked.next().unwrap_or(0), asked.next().unwrap_or(0));
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    mib << 20
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let started = Instant::now();
                for i in 0..mib {
                    if rate > 0 {
                        let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
                        tokio::time::sleep_until(due.into()).await;
                    }
                    if conn.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(port)
}

/// Busy CPU seconds of the whole machine (every core), from `/proc/stat`.
fn machine_cpu_secs() -> f64 {
    let ticks = rustix::param::clock_ticks_per_second().max(1) as f64;
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<f64> = (stat.lines().next().unwrap_or_default())
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal …: all but idle and iowait.
    let idle = fields.get(3).unwrap_or(&0.0) + fields.get(4).unwrap_or(&0.0);
    (fields.iter().sum::<f64>() - idle) / ticks
}

/// Runs `command` in session `sid`; its output.
async fn run(
    http: &reqwest::Client,
    base: &str,
    sid: &str,
    command: &str,
) -> anyhow::Result<String> {
    let (_, task) = common::send_message(http, base, Some(TOKEN), command, Some(sid)).await?;
    let text = task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect();
    Ok(text)
}

async fn session(http: &reqwest::Client, addr: &str, network: Value) -> anyhow::Result<String> {
    common::create_session(
        http,
        addr,
        TOKEN,
        &json!({ "sandbox": { "network": network } }),
    )
    .await
}

/// MiB/s of one download of `path` (`/{mib}/{rate}`) by curl in session `sid` with
/// `curl_flags`.
async fn download(
    http: &reqwest::Client,
    base: &str,
    sid: &str,
    curl_flags: &str,
    (port, path): (u16, &str),
) -> anyhow::Result<f64> {
    let out = run(
        http,
        base,
        sid,
        &format!("curl -s -o /dev/null -w 'took=%{{time_total}} size=%{{size_download}}' {curl_flags} http://127.0.0.1:{port}{path}"),
    )
    .await?;
    let field = |name: &str| -> Option<f64> {
        out.split(name)
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let (took, size) = (field("took=").unwrap_or(0.0), field("size=").unwrap_or(0.0));
    let mib: usize = path
        .split('/')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    anyhow::ensure!(size as usize == mib << 20, "a short download: {out:?}");
    Ok(size / took / (1 << 20) as f64)
}

/// A dev server on `port`: python3's http.server, which closes every connection (HTTP/1.0),
/// or node's http, which keeps them open.
fn dev_server(kind: &str, port: u16) -> String {
    match kind {
        "python3 http.server" => {
            format!("echo small > small.txt; python3 -m http.server {port} --bind 127.0.0.1")
        }
        _ => format!(
            "node -e \"require('http').createServer((q, s) => s.end('small\\n')).listen({port}, '127.0.0.1')\""
        ),
    }
}

/// Starts `command` in session `sid` and waits until `probe` answers.
async fn http_server(
    http: &reqwest::Client,
    base: &str,
    sid: &str,
    command: String,
    probe: impl Fn() -> reqwest::RequestBuilder,
) -> anyhow::Result<()> {
    let message = json!({
        "message": {
            "messageId": uuid::Uuid::now_v7().to_string(), "role": "ROLE_USER", "contextId": sid,
            "parts": [{ "text": command }],
        },
        "configuration": { "returnImmediately": true },
    });
    http.post(format!("{base}/message:send"))
        .bearer_auth(TOKEN)
        .header("A2A-Version", "1.0")
        .json(&message)
        .send()
        .await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if probe().send().await.is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the http.server in {sid} never answered")
}

async fn latencies(
    n: usize,
    request: impl Fn() -> reqwest::RequestBuilder,
) -> anyhow::Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let r = request().send().await?;
        anyhow::ensure!(r.status().is_success(), "{}", r.status());
        r.bytes().await?;
        times.push(started.elapsed());
    }
    Ok(common::stats::percentiles(&mut times))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let n: usize = args.next().map_or(Ok(300), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let http = reqwest::Client::new();
    let (server, addr) = common::start_server(&bin, dir.path(), TOKEN, &[]).await?;
    let base = format!("http://{addr}/agents/local");
    let port = download_server().await?;

    let proxied = session(
        &http,
        &addr,
        json!({ "allow": [format!("127.0.0.1:{port}")] }),
    )
    .await?;
    let host = session(&http, &addr, json!("host")).await?;
    let pid = server.id().unwrap_or_default();
    let via = "--noproxy '' --proxy http://127.0.0.1:3128";
    // As fast as the loopback goes, then at a 1 Gbit/s link's pace.
    for (mib, rate) in [(256, 0), (64, 119)] {
        // Rounds alternate, so that the machine's drift falls on both sides alike.
        let path = format!("/{mib}/{rate}");
        let (mut through, mut direct) = (Vec::new(), Vec::new());
        let (mut through_cpu, mut direct_cpu, mut relay_cpu) = (0.0, 0.0, 0.0);
        for _ in 0..ROUNDS {
            let (machine, relay) = (machine_cpu_secs(), common::proc::cpu_secs(pid));
            through.push(download(&http, &base, &proxied, via, (port, &path)).await?);
            through_cpu += machine_cpu_secs() - machine;
            relay_cpu += common::proc::cpu_secs(pid) - relay;
            let machine = machine_cpu_secs();
            direct.push(download(&http, &base, &host, "--noproxy '*'", (port, &path)).await?);
            direct_cpu += machine_cpu_secs() - machine;
        }
        let (through, direct) = (
            common::stats::median(&mut through),
            common::stats::median(&mut direct),
        );
        // CPU seconds per GiB moved: ptyhost's own (with the task that ran curl), and the
        // whole machine's (every process and the kernel) on either side.
        let gib = (ROUNDS * (mib << 20)) as f64 / (1u64 << 30) as f64;
        let pace = match rate {
            0 => "as fast as it goes".to_owned(),
            r => format!("paced to {r} MiB/s"),
        };
        println!(
            "download of {mib} MiB {pace}, median of {ROUNDS}: through the egress proxy {through:.0} MiB/s, network host {direct:.0} MiB/s: {:.2}x; CPU s per GiB: ptyhost {:.2}, machine {:.2} through the proxy vs {:.2} direct",
            through / direct,
            relay_cpu / gib,
            through_cpu / gib,
            direct_cpu / gib,
        );
    }

    for kind in ["python3 http.server", "node http (keep-alive)"] {
        let port = 8000;
        // A server runs in the foreground of its session: one session each.
        let inside = session(&http, &addr, json!("none")).await?;
        let host = session(&http, &addr, json!("host")).await?;
        let preview = format!("{base}/sessions/{inside}/ports/{port}/small.txt");
        http_server(&http, &base, &inside, dev_server(kind, port), || {
            http.get(&preview).bearer_auth(TOKEN)
        })
        .await?;
        let host_port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let straight = format!("http://127.0.0.1:{host_port}/small.txt");
        http_server(&http, &base, &host, dev_server(kind, host_port), || {
            http.get(&straight)
        })
        .await?;
        let (pp50, pp99) = latencies(n, || http.get(&preview).bearer_auth(TOKEN)).await?;
        let (dp50, dp99) = latencies(n, || http.get(&straight)).await?;
        let us = common::stats::us;
        println!(
            "GET of a small file from {kind}, {n} one at a time: through the preview p50 {:.0} µs p99 {:.0} µs, direct p50 {:.0} µs p99 {:.0} µs: p50 {:.2}x",
            us(pp50),
            us(pp99),
            us(dp50),
            us(dp99),
            us(pp50) / us(dp50)
        );
    }
    Ok(())
}
