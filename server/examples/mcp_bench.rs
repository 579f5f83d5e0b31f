//! MCP `run` of `echo` in an existing session, one call at a time, over each way in: `ptyhost
//! mcp` on stdio hosting its own session, Streamable HTTP at `B/mcp`, and `ptyhost mcp --url`
//! relaying stdio to it; beside the baseline, the same command as an A2A SendMessage over
//! HTTP+JSON to the same server, in the same run. The four are measured in turns (rounds of
//! each), so drift on the machine falls on all alike. p50 and p99 of each, and p50 over the
//! baseline's. The clients are plain: JSON-RPC lines on a pipe, or POSTs with reqwest.
//!
//!     cargo run --release -p server --example mcp_bench -- [PTYHOST_BIN] [N]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const TOKEN: &str = "bench-admin-token";
const ROUNDS: usize = 6;
const WARM_UP: usize = 20;

fn initialize(id: u64) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "mcp_bench", "version": "1" } } })
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": arguments } })
}

/// The structured result of a tool call's answer; an error is an error.
fn structured(answer: Value) -> Result<Value> {
    let result = &answer["result"];
    ensure!(
        result["isError"] != true && result.is_object(),
        "refused: {answer}"
    );
    Ok(result["structuredContent"].clone())
}

/// An MCP client on a child's stdin and stdout.
struct Stdio_ {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    id: u64,
}

impl Stdio_ {
    async fn start(bin: &std::path::Path, args: &[&str], home: &std::path::Path) -> Result<Stdio_> {
        let mut child = Command::new(bin)
            .arg("mcp")
            .args(args)
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut client = Stdio_ {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            _child: child,
            id: 0,
        };
        client.request(initialize(0)).await?;
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        client.send(&initialized).await?;
        Ok(client)
    }

    async fn send(&mut self, message: &Value) -> Result<()> {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await?;
        Ok(self.stdin.flush().await?)
    }

    async fn request(&mut self, message: Value) -> Result<Value> {
        self.send(&message).await?;
        while let Some(line) = self.stdout.next_line().await? {
            let answer: Value = serde_json::from_str(&line)?;
            if answer.get("id") == message.get("id") {
                return Ok(answer);
            }
        }
        bail!("the server closed its stdout")
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        self.id += 1;
        structured(self.request(call(self.id, tool, arguments)).await?)
    }
}

/// An MCP client of `B/mcp` (one session).
struct Http {
    http: reqwest::Client,
    endpoint: String,
    session: String,
    id: u64,
}

impl Http {
    async fn start(base: &str) -> Result<Http> {
        let http = reqwest::Client::new();
        let endpoint = format!("{base}/mcp");
        let mut client = Http {
            http,
            endpoint,
            session: String::new(),
            id: 0,
        };
        let resp = client.post(&initialize(0)).await?;
        client.session = (resp.headers().get("mcp-session-id"))
            .context("no Mcp-Session-Id")?
            .to_str()?
            .to_owned();
        resp.text().await?;
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        client.post(&initialized).await?.text().await?;
        Ok(client)
    }

    async fn post(&self, message: &Value) -> Result<reqwest::Response> {
        let mut req = (self.http.post(&self.endpoint))
            .bearer_auth(TOKEN)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", "2025-11-25")
            .body(message.to_string());
        if !self.session.is_empty() {
            req = req.header("Mcp-Session-Id", &self.session);
        }
        let resp = req.send().await?;
        ensure!(
            resp.status().is_success(),
            "POST {}: {}",
            self.endpoint,
            resp.status()
        );
        Ok(resp)
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        self.id += 1;
        let body = self
            .post(&call(self.id, tool, arguments))
            .await?
            .text()
            .await?;
        let answer = (body.lines().filter_map(|l| l.strip_prefix("data:")))
            .rfind(|d| !d.trim().is_empty())
            .unwrap_or(&body);
        structured(serde_json::from_str(answer.trim())?)
    }
}

/// A client of either transport.
trait McpClient {
    fn call_tool(&mut self, tool: &'static str, arguments: Value) -> BoxFuture<'_, Result<Value>>;
}

impl McpClient for Stdio_ {
    fn call_tool(&mut self, tool: &'static str, arguments: Value) -> BoxFuture<'_, Result<Value>> {
        Box::pin(self.call(tool, arguments))
    }
}

impl McpClient for Http {
    fn call_tool(&mut self, tool: &'static str, arguments: Value) -> BoxFuture<'_, Result<Value>> {
        Box::pin(self.call(tool, arguments))
    }
}

/// One way to run `echo` in an existing session.
enum Way {
    A2a {
        http: reqwest::Client,
        base: String,
        sid: String,
    },
    Mcp {
        client: Box<dyn McpClient>,
        sid: String,
    },
}

impl Way {
    /// `client`, with a session it made for its runs.
    async fn mcp(mut client: Box<dyn McpClient>) -> Result<Way> {
        let created = client
            .call_tool("session_create", json!({ "label": "mcp_bench" }))
            .await?;
        let sid = created["session_id"]
            .as_str()
            .context("no session_id")?
            .to_owned();
        Ok(Way::Mcp { client, sid })
    }

    async fn once(&mut self) -> Result<Duration> {
        let started = Instant::now();
        match self {
            Way::A2a { http, base, sid } => {
                common::send_message(http, base, Some(TOKEN), "echo hi", Some(sid)).await?;
            }
            Way::Mcp { client, sid } => {
                let args = json!({ "session_id": sid, "command": "echo hi" });
                let r = client.call_tool("run", args).await?;
                ensure!(
                    r["status"] == "completed" && r["output"] == "hi\n",
                    "run: {r}"
                );
            }
        }
        Ok(started.elapsed())
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = common::ptyhost_bin(args.next());
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(300);
    let dir = tempfile::tempdir()?;
    let (_server, addr) = common::start_server(&bin, dir.path(), TOKEN, &[]).await?;
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();
    let (_, first) = common::send_message(&http, &base, Some(TOKEN), "echo hi", None).await?;
    let a2a_sid = first["contextId"]
        .as_str()
        .context("no contextId")?
        .to_owned();

    let stdio_data = dir.path().join("stdio-data");
    let stdio_args = ["--data-dir", stdio_data.to_str().context("a path")?];
    let stdio = Stdio_::start(&bin, &stdio_args, dir.path()).await?;
    let relay = Stdio_::start(&bin, &["--url", &base, "--token", TOKEN], dir.path()).await?;
    let a2a = Way::A2a {
        http,
        base: base.clone(),
        sid: a2a_sid,
    };
    let mut ways = [
        ("A2A HTTP+JSON SendMessage (baseline)", a2a),
        ("MCP stdio (ptyhost mcp)", Way::mcp(Box::new(stdio)).await?),
        (
            "MCP Streamable HTTP (B/mcp)",
            Way::mcp(Box::new(Http::start(&base).await?)).await?,
        ),
        (
            "MCP stdio relayed (ptyhost mcp --url)",
            Way::mcp(Box::new(relay)).await?,
        ),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); ways.len()];
    for (_, way) in ways.iter_mut() {
        for _ in 0..WARM_UP {
            way.once().await?;
        }
    }
    for _ in 0..ROUNDS {
        for (i, (_, way)) in ways.iter_mut().enumerate() {
            for _ in 0..n.div_ceil(ROUNDS) {
                samples[i].push(way.once().await?);
            }
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (baseline, _) = common::stats::percentiles(&mut samples[0].clone());
    println!(
        "run of `echo hi` in an existing session, one call at a time ({} each):",
        samples[0].len()
    );
    for ((name, _), times) in ways.iter().zip(samples.iter_mut()) {
        let (p50, p99) = common::stats::percentiles(times);
        println!(
            "  {name:<40} p50 {:>6.2} ms  p99 {:>6.2} ms  p50 {:.2}x the baseline's",
            ms(p50),
            ms(p99),
            p50.as_secs_f64() / baseline.as_secs_f64()
        );
    }
    Ok(())
}
