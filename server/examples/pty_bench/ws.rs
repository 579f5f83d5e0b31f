//! pty_bench's Rust client of pty-ws: attaching, joining, and reading a flood to its end
//! with what a viewer needs to show the final screen.

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use server::sessions::screen::Screen;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

pub const TOKEN: &str = "bench-admin-token";

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn attach(addr: &str, sid: &str) -> anyhow::Result<Ws> {
    attach_as(addr, sid, "pty-ws.v1").await
}

pub fn attach_url(addr: &str, sid: &str) -> String {
    format!("ws://{addr}/agents/local/sessions/{sid}/attach")
}

pub async fn attach_as(addr: &str, sid: &str, subprotocol: &str) -> anyhow::Result<Ws> {
    let mut req = attach_url(addr, sid).into_client_request()?;
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        format!("{subprotocol}, bearer.{}", URL_SAFE_NO_PAD.encode(TOKEN)).parse()?,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    next(&mut ws).await?; // binding_hello
    Ok(ws)
}

pub async fn send(
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

/// The next JSON frame (binary ones are passed over).
pub async fn next(ws: &mut Ws) -> anyhow::Result<Value> {
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
pub async fn join(ws: &mut Ws, role: &str, replay_from: Option<u64>) -> anyhow::Result<()> {
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
pub async fn join_as_executor(ws: &mut Ws) -> anyhow::Result<()> {
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

/// From the upgrade's request to the joiner's keyframe, for an observer; and the part of
/// it until the upgrade was answered.
pub async fn timed_join(addr: &str, sid: &str) -> anyhow::Result<(Duration, Duration)> {
    let t = Instant::now();
    let mut ws = attach(addr, sid).await?;
    let upgraded = t.elapsed();
    join(&mut ws, "observer", None).await?;
    let took = t.elapsed();
    ws.close(None).await?;
    Ok((took, upgraded))
}

/// What a viewer received of a flood.
pub struct Drained {
    /// Output bytes (JSON `Output` or `PW1O`).
    pub bytes: usize,
    /// `PTY_OUTPUT_LAGGED` errors (each followed by a keyframe).
    pub lagged: usize,
    pub keyframes: usize,
    /// From the first output to the last.
    pub elapsed: Duration,
    /// What it shows at the end.
    pub screen: Vec<String>,
}

/// What a viewer must keep to draw its last screen: the last keyframe and the output
/// since, or (once that output alone fills many screens) the newest output only.
struct Tail {
    keyframe: Option<(Vec<u8>, u16, u16)>,
    output: Vec<u8>,
}

/// Output kept after a keyframe before the keyframe is let go: far more than a screen of
/// the flood's lines.
const TAIL_BYTES: usize = 256 * 1024;

impl Tail {
    fn output(&mut self, data: &[u8]) {
        self.output.extend_from_slice(data);
        if self.output.len() > 2 * TAIL_BYTES {
            self.keyframe = None;
            self.output.drain(..self.output.len() - TAIL_BYTES);
        }
    }

    fn screen(&self, cols: u16, rows: u16) -> Vec<String> {
        let mut screen = match &self.keyframe {
            Some((snapshot, c, r)) => {
                let mut screen = Screen::new(*c, *r);
                screen.feed(snapshot);
                screen
            }
            None => Screen::new(cols, rows),
        };
        screen.feed(&self.output);
        screen.text()
    }
}

/// Counts output bytes, JSON or binary, until `Closed`; and draws the viewer's last screen
/// (of `cols` × `rows` until a keyframe says otherwise).
pub async fn drain_until_closed(ws: &mut Ws, cols: u16, rows: u16) -> anyhow::Result<Drained> {
    let (mut bytes, mut lagged, mut keyframes, mut start, mut last) = (0, 0, 0, None, None);
    let mut tail = Tail {
        keyframe: None,
        output: Vec::new(),
    };
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
                tail.output(data);
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
                let data = STANDARD.decode(f["payload"]["data"].as_str().unwrap_or(""))?;
                bytes += data.len();
                tail.output(&data);
            }
            Some("Keyframe") => {
                keyframes += 1;
                let p = &f["payload"];
                let snapshot = STANDARD.decode(p["snapshot"].as_str().unwrap_or(""))?;
                let size = |k: &str| p[k].as_u64().unwrap_or(1) as u16;
                tail.keyframe = Some((snapshot, size("snapshot_cols"), size("snapshot_rows")));
                tail.output.clear();
            }
            Some("Closed") => {
                let elapsed = start.zip(last).map_or(Duration::ZERO, |(s, l)| l - s);
                return Ok(Drained {
                    bytes,
                    lagged,
                    keyframes,
                    elapsed,
                    screen: tail.screen(cols, rows),
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
