//! pty_bench's baselines, measured in the same run as ptyhost: a raw PTY read and write
//! (ptyhost's own PTY, no server), the bare WebSocket ↔ PTY relay (`pty_relay`), the Python
//! client (`client.py`) and, when asked for, terminado.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use server::sessions::SessionSpec;
use server::sessions::pty;
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite::Message;

use crate::ECHO_ROUNDS;
use crate::common::stats::percentiles;
use crate::ws::Ws;

fn spec(argv: &[&str]) -> SessionSpec {
    SessionSpec::plain(argv.iter().map(|s| s.to_string()).collect(), 120, 30)
}

pub async fn raw_pty_flood(file: &std::path::Path) -> anyhow::Result<Duration> {
    let (_pty, mut events) = pty::spawn(&spec(&["cat", file.to_str().unwrap()]))?;
    // From the first chunk to the last, as for the viewers.
    let (mut first, mut last) = (None, None);
    while events.output.read().await.is_some() {
        let now = Instant::now();
        first.get_or_insert(now);
        last = Some(now);
    }
    Ok(first.zip(last).map_or(Duration::ZERO, |(f, l)| l - f))
}

pub async fn raw_pty_echo() -> anyhow::Result<(Duration, Duration)> {
    let (pty, mut events) = pty::spawn(&spec(&["sh", "-c", "stty raw -echo; exec cat"]))?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(Some(_)) =
        tokio::time::timeout(Duration::from_millis(50), events.output.read()).await
    {}
    let mut times = Vec::with_capacity(ECHO_ROUNDS);
    for i in 0..ECHO_ROUNDS {
        let byte = b'a' + (i % 26) as u8;
        let t = Instant::now();
        pty.write(vec![byte]).map_err(|e| anyhow::anyhow!("{e}"))?;
        while let Some(chunk) = events.output.read().await {
            if chunk.contains(&byte) {
                break;
            }
        }
        times.push(t.elapsed());
    }
    Ok(percentiles(&mut times))
}

/// A running `pty_relay` (the example beside this one) serving `sh -c COMMAND`.
pub struct Relay {
    _child: tokio::process::Child,
    pub url: String,
}

impl Relay {
    pub async fn start(command: &str) -> anyhow::Result<Relay> {
        let exe = std::env::current_exe()?;
        let mut child = tokio::process::Command::new(exe.with_file_name("pty_relay"))
            .args(["sh", "-c", command])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!("pty_relay (cargo build --release --example pty_relay): {e}")
            })?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines.next_line().await?.unwrap_or_default();
        let addr = line
            .strip_prefix("listening on ")
            .ok_or_else(|| anyhow::anyhow!("pty_relay said {line:?}"))?;
        Ok(Relay {
            url: format!("ws://{addr}/"),
            _child: child,
        })
    }

    /// One-byte echo through the relay's `cat`, p50 and p99.
    pub async fn echo(&self) -> anyhow::Result<(Duration, Duration)> {
        let (mut ws, _) = tokio_tungstenite::connect_async(&self.url).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut times = Vec::with_capacity(ECHO_ROUNDS);
        for i in 0..ECHO_ROUNDS {
            let byte = b'a' + (i % 26) as u8;
            let t = Instant::now();
            ws.send(Message::Binary(vec![byte].into())).await?;
            loop {
                match ws.next().await {
                    Some(Ok(Message::Binary(b))) if b.contains(&byte) => break,
                    Some(Ok(_)) => {}
                    _ => anyhow::bail!("the relay closed"),
                }
            }
            times.push(t.elapsed());
        }
        Ok(percentiles(&mut times))
    }
}

/// The Python client (`client.py`) under `python`: its output's numbers.
pub async fn python_client(python: &Path, args: &[&str]) -> anyhow::Result<Vec<f64>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pty_bench/client.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "client.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    Ok(text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()?)
}

/// The Python that runs `client.py`: `BENCH_PYTHON`, else the tests' virtualenv, if it has
/// the `websockets` client.
pub fn python_path() -> Option<PathBuf> {
    let venv = std::env::var("PTYHOST_VENV").unwrap_or_else(|_| "/var/cache/ptyhost/venv".into());
    let python = std::env::var_os("BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&venv).join("bin/python"));
    std::process::Command::new(&python)
        .args(["-c", "import websockets"])
        .status()
        .is_ok_and(|s| s.success())
        .then_some(python)
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
pub async fn terminado_flood(
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
pub async fn terminado_echo(python: &std::ffi::OsStr) -> anyhow::Result<(Duration, Duration)> {
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
