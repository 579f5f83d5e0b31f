//! What the benchmarks share: which ptyhost to measure, starting it, observing a session,
//! reading a process's resident memory. (Each example uses some of it.)
#![allow(dead_code)]

use futures_util::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The ptyhost binary to measure: `arg`, else the release binary beside the example.
pub fn ptyhost_bin(arg: Option<String>) -> std::path::PathBuf {
    arg.map(std::path::PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap();
        exe.parent().unwrap().parent().unwrap().join("ptyhost")
    })
}

/// Starts a session running `command` through the server at `addr`; its id.
pub async fn command_session(
    http: &reqwest::Client,
    addr: &str,
    token: &str,
    command: &str,
) -> anyhow::Result<String> {
    create_session(http, addr, token, &json!({ "command": command })).await
}

/// Starts a session from `body` (a `POST /sessions` body) at `addr`; its id.
pub async fn create_session(
    http: &reqwest::Client,
    addr: &str,
    token: &str,
    body: &serde_json::Value,
) -> anyhow::Result<String> {
    let created: serde_json::Value = http
        .post(format!("http://{addr}/sessions"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await?
        .json()
        .await?;
    let sid = created["session_id"].as_str();
    sid.map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no session: {created}"))
}

/// A file to flood a session's terminal with, in a folder of its own that the session
/// takes as its workspace: a sandboxed session sees its workspace and the system folders,
/// not the rest of the host.
pub struct FloodFile {
    pub workspace: std::path::PathBuf,
    pub path: std::path::PathBuf,
}

impl FloodFile {
    /// Writes `text` to `flood.txt` in a new folder `bench` under `root` (not the folder
    /// that holds the server's data directory, which a workspace may not hold).
    pub fn write(root: &std::path::Path, text: &str) -> anyhow::Result<Self> {
        let workspace = root.join("bench");
        std::fs::create_dir_all(&workspace)?;
        let path = workspace.join("flood.txt");
        std::fs::write(&path, text)?;
        Ok(Self { workspace, path })
    }

    /// A `POST /sessions` body whose command waits `delay_secs`, then prints the file.
    pub fn session(&self, delay_secs: u32) -> serde_json::Value {
        json!({
            "command": format!("sleep {delay_secs}; cat flood.txt"),
            "cwd": self.workspace,
        })
    }
}

/// An observer of session `sid` on `addr` with admin `token` over `subprotocol`, joined
/// (resuming after `replay_from` when given).
pub async fn observe(
    addr: &str,
    sid: &str,
    token: &str,
    replay_from: Option<u64>,
    subprotocol: &str,
) -> anyhow::Result<Ws> {
    join(addr, sid, token, "observer", replay_from, subprotocol).await
}

/// A client of session `sid` on `addr` joined in `role`, as `observe` joins.
pub async fn join(
    addr: &str,
    sid: &str,
    token: &str,
    role: &str,
    replay_from: Option<u64>,
    subprotocol: &str,
) -> anyhow::Result<Ws> {
    let mut req = format!("ws://{addr}/sessions/{sid}/attach").into_client_request()?;
    req.headers_mut()
        .insert("Authorization", format!("Bearer {token}").parse()?);
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", subprotocol.parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    let mut join = json!({ "op": "pty.join_session", "id": "j", "ts": "2026-12-01T00:00:00Z",
        "payload": { "role": role } });
    if let Some(from) = replay_from {
        join["replay_from"] = json!(from);
    }
    ws.send(Message::Text(join.to_string().into())).await?;
    Ok(ws)
}

#[path = "../../tests/common/proc.rs"]
pub mod proc;

/// Starts `ptyhost serve` on a free loopback port with a store in `dir`, admin token
/// `token` and `flags`; the child and the address it listens on.
pub async fn start_server(
    bin: &std::path::Path,
    dir: &std::path::Path,
    token: &str,
    flags: &[&str],
) -> anyhow::Result<(tokio::process::Child, String)> {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(bin)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--bootstrap-token",
            token,
        ])
        .args(flags)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("HOME", dir)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await? {
        if let Some(addr) = line.strip_prefix("listening on http://") {
            return Ok((child, addr.to_owned()));
        }
    }
    anyhow::bail!("ptyhost did not start")
}

/// Starts a2a-sdk's own server with its trivial agent (`a2a_sdk_server.py`) under `python`
/// on a free loopback port; the child and its base URL, once its card answers.
pub async fn start_sdk(
    python: &std::path::Path,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/a2a_sdk_server.py");
    let child = tokio::process::Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while http
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .is_err()
    {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "a2a-sdk server did not start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok((child, base))
}

/// A new database on the PostgreSQL at `admin`, as a URL.
pub async fn new_database(admin: &str) -> anyhow::Result<String> {
    let name = format!("bench_{}", uuid::Uuid::now_v7().simple());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(admin).await?;
    sqlx::Executor::execute(
        &mut conn,
        sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")),
    )
    .await?;
    let (base, _) = admin
        .rsplit_once('/')
        .ok_or_else(|| anyhow::anyhow!("no database in {admin}"))?;
    Ok(format!("{base}/{name}"))
}

/// The figures the benchmarks report: medians, spreads, percentiles.
pub mod stats {
    use std::time::Duration;

    pub fn median(values: &mut [f64]) -> f64 {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    }

    pub fn spread(values: &[f64]) -> (f64, f64) {
        values
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)))
    }

    pub fn us(d: Duration) -> f64 {
        d.as_secs_f64() * 1e6
    }

    pub fn percentiles(times: &mut [Duration]) -> (Duration, Duration) {
        times.sort();
        let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
        (at(0.50), at(0.99))
    }
}

/// Sends one blocking SendMessage; its latency and the answered task.
pub async fn send_message(
    http: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    text: &str,
    context: Option<&str>,
) -> anyhow::Result<(std::time::Duration, serde_json::Value)> {
    let mut message = json!({
        "messageId": uuid::Uuid::now_v7().to_string(),
        "role": "ROLE_USER",
        "parts": [{ "text": text }],
    });
    if let Some(c) = context {
        message["contextId"] = json!(c);
    }
    let mut req = http
        .post(format!("{base}/message:send"))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(json!({ "message": message }).to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let started = std::time::Instant::now();
    let resp = req.send().await?;
    anyhow::ensure!(resp.status().is_success(), "SendMessage: {}", resp.status());
    let v: serde_json::Value = resp.json().await?;
    let took = started.elapsed();
    anyhow::ensure!(
        v["task"]["status"]["state"] == "TASK_STATE_COMPLETED",
        "the task did not complete: {v}"
    );
    Ok((took, v["task"].clone()))
}
