//! `ptyhost a2a attach`: a terminal client for a session over pty-ws (binary subprotocol).
//! It observes, or with `--control` takes the controller role, types what is typed (stdin
//! in raw mode when it is a terminal), follows the terminal's size, and detaches on Ctrl-].

use std::io::Write;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Ctrl-]: leaves the session (the byte is never sent).
const DETACH: u8 = 0x1d;

/// The size of the terminal on stdout, if it is one.
fn terminal_size() -> Option<(u16, u16)> {
    crate::sys::terminal_size(std::io::stdout())
}

fn envelope(op: &str, payload: Value) -> Message {
    let id = uuid::Uuid::now_v7().to_string();
    let env = wire::Envelope::new(op, id, crate::clock::now_rfc3339(), payload);
    Message::Text(env.to_text().into())
}

/// Attaches to `attach_url` until the session closes, the server leaves, or Ctrl-].
pub async fn run(attach_url: &str, token: Option<&str>, control: bool) -> anyhow::Result<()> {
    let mut req = attach_url.into_client_request()?;
    let mut protocols = wire::SUBPROTOCOL_BINARY.to_owned();
    if let Some(t) = token {
        protocols.push_str(&format!(", bearer.{}", URL_SAFE_NO_PAD.encode(t)));
    }
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", protocols.parse()?);
    let (ws, _) = tokio_tungstenite::connect_async(req).await?;
    let (mut sink, mut stream) = ws.split();
    let mut join = json!({ "role": if control { "controller" } else { "observer" } });
    if let (true, Some((cols, rows))) = (control, terminal_size()) {
        join["cols"] = json!(cols);
        join["rows"] = json!(rows);
    }
    sink.send(envelope(wire::OP_JOIN, join)).await?;
    let _raw = crate::sys::RawMode::enter(std::io::stdin());
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 4096];
    let mut stdin_open = true;
    let mut resized =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let mut out = std::io::stdout();
    loop {
        tokio::select! {
            msg = stream.next() => {
                let Some(msg) = msg else { return Ok(()) };
                match msg? {
                    Message::Binary(frame) => {
                        if let Some((_, _, data)) = wire::parse_binary_output(&frame) {
                            out.write_all(data)?;
                            out.flush()?;
                        }
                    }
                    Message::Text(text) => {
                        let f: Value = serde_json::from_str(&text)?;
                        match (f["op"].as_str(), f["payload"]["kind"].as_str()) {
                            (_, Some("Output")) | (_, Some("Keyframe")) => {
                                let field = if f["payload"]["kind"] == "Output" { "data" } else { "snapshot" };
                                let bytes = base64::engine::general_purpose::STANDARD
                                    .decode(f["payload"][field].as_str().unwrap_or(""))?;
                                out.write_all(&bytes)?;
                                out.flush()?;
                            }
                            (_, Some("Closed")) => {
                                eprint!("\r\n[session closed: {}]\r\n", f["payload"]["reason"].as_str().unwrap_or("?"));
                                return Ok(());
                            }
                            (Some("binding_goodbye"), _) => {
                                eprint!("\r\n[{}]\r\n", f["payload"]["reason"].as_str().unwrap_or("goodbye"));
                                return Ok(());
                            }
                            (Some("Error"), _) => {
                                eprint!("\r\n[{}: {}]\r\n", f["payload"]["code"].as_str().unwrap_or("error"), f["payload"]["message"].as_str().unwrap_or(""));
                            }
                            _ => {}
                        }
                    }
                    Message::Close(_) => return Ok(()),
                    _ => {}
                }
            }
            n = stdin.read(&mut buf), if stdin_open => {
                let n = n?;
                if n == 0 {
                    stdin_open = false;
                    continue;
                }
                let typed = &buf[..n];
                let (typed, detach) = match typed.iter().position(|b| *b == DETACH) {
                    Some(i) => (&typed[..i], true),
                    None => (typed, false),
                };
                if control && !typed.is_empty() {
                    sink.send(Message::Binary(wire::binary_input(typed).into())).await?;
                }
                if detach {
                    sink.send(envelope("pty.leave_session", json!({}))).await?;
                    return Ok(());
                }
            }
            _ = resized.recv() => {
                if let (true, Some((cols, rows))) = (control, terminal_size()) {
                    sink.send(envelope("pty.session_resize", json!({ "cols": cols, "rows": rows }))).await?;
                }
            }
        }
    }
}
