//! What a sandboxed session's network costs, beside the host's network in the same run:
//!
//! - a download of 256 MiB from a server on the host's loopback, through the egress proxy
//!   (a session whose allowlist names it) and with network `host`, timed by curl inside
//!   each session;
//! - a port preview's request latency (p50, p99) beside the same request sent directly:
//!   python3's http.server inside a session with a namespace of its own (through
//!   `B/sessions/{sid}/ports/{port}/`), and the same server in a session on the host's
//!   network (straight to its port).
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
const DOWNLOAD: usize = 256 << 20;
const ROUNDS: usize = 5;

/// Serves `DOWNLOAD` bytes to every request; its port.
async fn download_server() -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let chunk = vec![b'x'; 1 << 20];
        while let Ok((mut conn, _)) = listener.accept().await {
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {DOWNLOAD}\r\nconnection: close\r\n\r\n"
                );
                let _ = conn.write_all(head.as_bytes()).await;
                for _ in 0..DOWNLOAD / chunk.len() {
                    if conn.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(port)
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

/// MiB/s of the median of `ROUNDS` downloads by curl in session `sid` with `curl_flags`.
async fn download(
    http: &reqwest::Client,
    base: &str,
    sid: &str,
    curl_flags: &str,
    port: u16,
) -> anyhow::Result<f64> {
    let mut rates = Vec::new();
    for _ in 0..ROUNDS {
        let out = run(
            http,
            base,
            sid,
            &format!("curl -s -o /dev/null -w 'took=%{{time_total}} size=%{{size_download}}' {curl_flags} http://127.0.0.1:{port}/"),
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
        anyhow::ensure!(size as usize == DOWNLOAD, "a short download: {out:?}");
        rates.push(size / took / (1 << 20) as f64);
    }
    Ok(common::stats::median(&mut rates))
}

/// Starts python3's http.server on `port` in session `sid` and waits until `probe` answers.
async fn http_server(
    http: &reqwest::Client,
    base: &str,
    sid: &str,
    port: u16,
    probe: impl Fn() -> reqwest::RequestBuilder,
) -> anyhow::Result<()> {
    let message = json!({
        "message": {
            "messageId": uuid::Uuid::now_v7().to_string(), "role": "ROLE_USER", "contextId": sid,
            "parts": [{ "text": format!("echo small > small.txt; python3 -m http.server {port} --bind 127.0.0.1") }],
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
    let (_server, addr) = common::start_server(&bin, dir.path(), TOKEN, &[]).await?;
    let base = format!("http://{addr}/agents/local");
    let port = download_server().await?;

    let proxied = session(
        &http,
        &addr,
        json!({ "allow": [format!("127.0.0.1:{port}")] }),
    )
    .await?;
    let host = session(&http, &addr, json!("host")).await?;
    let through = download(
        &http,
        &base,
        &proxied,
        "--noproxy '' --proxy http://127.0.0.1:3128",
        port,
    )
    .await?;
    let direct = download(&http, &base, &host, "--noproxy '*'", port).await?;
    println!(
        "download of {} MiB, median of {ROUNDS}: through the egress proxy {through:.0} MiB/s, network host {direct:.0} MiB/s: {:.2}x",
        DOWNLOAD >> 20,
        through / direct
    );

    let inside = session(&http, &addr, json!("none")).await?;
    let preview = format!("{base}/sessions/{inside}/ports/8000/small.txt");
    http_server(&http, &base, &inside, 8000, || {
        http.get(&preview).bearer_auth(TOKEN)
    })
    .await?;
    let host_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let straight = format!("http://127.0.0.1:{host_port}/small.txt");
    http_server(&http, &base, &host, host_port, || http.get(&straight)).await?;
    let (pp50, pp99) = latencies(n, || http.get(&preview).bearer_auth(TOKEN)).await?;
    let (dp50, dp99) = latencies(n, || http.get(&straight)).await?;
    let us = common::stats::us;
    println!(
        "GET of a small file, {n} one at a time: through the preview p50 {:.0} µs p99 {:.0} µs, direct p50 {:.0} µs p99 {:.0} µs: p50 {:.2}x",
        us(pp50),
        us(pp99),
        us(dp50),
        us(dp99),
        us(pp50) / us(dp50)
    );
    Ok(())
}
