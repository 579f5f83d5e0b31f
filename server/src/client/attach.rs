//! `ptyhost a2a attach`: a terminal client for a session over pty-ws (binary subprotocol).
//! It observes, or with `--control` takes the controller role, types what is typed (stdin
//! in raw mode when it is a terminal), follows the terminal's size, and detaches on Ctrl-].

use std::io::Write;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wire::server::{ServerFrame, ServerOp};
use wire::{ClientOp, Dim, JoinSession, Role, SessionFrame, SessionResize};

/// Ctrl-]: leaves the session (the byte is never sent).
const DETACH: u8 = 0x1d;

/// The size of the terminal on stdout, if it is one.
fn terminal_size() -> Option<(Dim, Dim)> {
    crate::sys::terminal_size(std::io::stdout()).map(|(cols, rows)| (Dim(cols), Dim(rows)))
}

fn frame(op: ClientOp) -> Message {
    let id = uuid::Uuid::now_v7().to_string();
    Message::Text(op.encode(&id, &crate::clock::now_rfc3339(), None).into())
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
    let size = terminal_size().filter(|_| control);
    let join = JoinSession {
        role: Some(if control {
            Role::Controller
        } else {
            Role::Observer
        }),
        cols: size.map(|s| s.0),
        rows: size.map(|s| s.1),
        ..JoinSession::default()
    };
    sink.send(frame(ClientOp::Join(join))).await?;
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
                    Message::Text(text) => match ServerFrame::decode(&text)?.op {
                        ServerOp::Session(frame) => match frame {
                            SessionFrame::Output { data, .. } => {
                                out.write_all(&data.0)?;
                                out.flush()?;
                            }
                            SessionFrame::Keyframe { snapshot, .. } => {
                                out.write_all(&snapshot.0)?;
                                out.flush()?;
                            }
                            SessionFrame::Closed { reason, .. } => {
                                eprint!("\r\n[session closed: {}]\r\n", reason.as_str());
                                return Ok(());
                            }
                            _ => {}
                        },
                        ServerOp::Goodbye(g) => {
                            eprint!("\r\n[{}]\r\n", g.reason);
                            return Ok(());
                        }
                        ServerOp::Error(e) => {
                            eprint!("\r\n[{:?}: {}]\r\n", e.code, e.message);
                        }
                        _ => {}
                    },
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
                    sink.send(frame(ClientOp::Leave)).await?;
                    return Ok(());
                }
            }
            _ = resized.recv() => {
                if let (true, Some((cols, rows))) = (control, terminal_size()) {
                    sink.send(frame(ClientOp::Resize(SessionResize { cols, rows }))).await?;
                }
            }
        }
    }
}
