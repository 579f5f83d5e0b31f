//! The client side of the STDIO binding: spawns the agent, checks its handshake, selects
//! `stdio-json`, and routes answers by request id. The child is killed if it outlives us
//! (`kill_on_drop`), and `close` asks it to shut down and waits for it.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use wire::rpc::JsonRpcRequest;
use wire::stdio::{HandshakeAck, Opening};

use super::{ClientError, Events, decode, encode, rpc_result};
use crate::framing::{FrameReader, Incoming, VARIANT_JSON, frame};

/// Frames for each open request id.
type Pending = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>>;

pub struct StdioAgent {
    child: Child,
    stdin: ChildStdin,
    pending: Pending,
    next_id: u64,
}

impl StdioAgent {
    /// Spawns `argv` with a fresh `A2A_SESSION_ID` and completes the handshake.
    pub async fn spawn(argv: &[String]) -> Result<StdioAgent, ClientError> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| ClientError::Transport("--stdio needs a command".into()))?;
        let session_id = uuid::Uuid::now_v7().to_string();
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env("A2A_SESSION_ID", &session_id)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ClientError::Transport(format!("{program}: {e}")))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let mut frames = FrameReader::new(child.stdout.take().expect("piped stdout"), 16 << 20);
        let hello = match tokio::time::timeout(Duration::from_secs(30), frames.next()).await {
            Ok(Incoming::Frame(body)) => match serde_json::from_slice(&body) {
                Ok(Opening::Handshake(hello)) => hello,
                _ => {
                    let shown = String::from_utf8_lossy(&body);
                    return Err(ClientError::Decode(format!("not a handshake: {shown}")));
                }
            },
            _ => return Err(ClientError::Transport("the agent sent no handshake".into())),
        };
        let accept = hello.fits(&session_id, VARIANT_JSON);
        let ack = Opening::HandshakeAck(HandshakeAck {
            session_id: Some(session_id.clone()),
            select_variant: Some(VARIANT_JSON.to_owned()),
            accept: Some(accept),
        });
        let _ = stdin.write_all(&frame(encode(&ack).as_bytes())).await;
        if !accept {
            return Err(ClientError::a2a(
                "VERSION_NOT_SUPPORTED",
                format!("the agent's handshake does not fit: {hello:?}"),
            ));
        }
        let pending: Pending = Arc::default();
        let routes = pending.clone();
        tokio::spawn(async move {
            while let Incoming::Frame(body) = frames.next().await {
                let Ok(v) = serde_json::from_slice::<Value>(&body) else {
                    continue;
                };
                let key = v["id"].to_string();
                let tx = routes.lock().unwrap().get(&key).cloned();
                if let Some(tx) = tx {
                    let _ = tx.send(v);
                }
            }
            // The agent is gone: every open request fails.
            routes.lock().unwrap().clear();
        });
        Ok(StdioAgent {
            child,
            stdin,
            pending,
            next_id: 0,
        })
    }

    async fn open(
        &mut self,
        method: &str,
        params: impl Serialize,
    ) -> Result<(Value, mpsc::UnboundedReceiver<Value>), ClientError> {
        self.next_id += 1;
        let id = Value::from(self.next_id);
        let (tx, rx) = mpsc::unbounded_channel();
        self.pending.lock().unwrap().insert(id.to_string(), tx);
        let request = JsonRpcRequest::new(id.clone(), method, params);
        self.stdin
            .write_all(&frame(encode(&request).as_bytes()))
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok((id, rx))
    }

    /// One request, one answer (1.0 method names and shapes).
    pub async fn call<T: DeserializeOwned>(
        &mut self,
        method: &str,
        params: impl Serialize,
    ) -> Result<T, ClientError> {
        let (id, mut rx) = self.open(method, params).await?;
        let answer = rx.recv().await;
        self.pending.lock().unwrap().remove(&id.to_string());
        rpc_result(answer.ok_or_else(|| ClientError::Transport("the agent exited".into()))?)
            .and_then(decode)
    }

    /// A streaming request: its `result` frames until `streamEnd` (an error ends it too).
    pub async fn stream(
        &mut self,
        method: &str,
        params: impl Serialize,
    ) -> Result<Events, ClientError> {
        let (id, rx) = self.open(method, params).await?;
        let start = (rx, self.pending.clone(), id.to_string(), false);
        let events =
            futures_util::stream::unfold(start, |(mut rx, pending, key, done)| async move {
                let next = if done { None } else { rx.recv().await };
                match next {
                    Some(v) if v.get("streamEnd").is_none() => {
                        let item = rpc_result(v).and_then(decode);
                        let stop = item.is_err();
                        Some((item, (rx, pending, key, stop)))
                    }
                    _ => {
                        pending.lock().unwrap().remove(&key);
                        None
                    }
                }
            });
        Ok(Box::pin(events))
    }

    /// Asks the agent to shut down, closes its stdin and waits for it (killing it after 5 s).
    pub async fn close(mut self) {
        let shutdown = self.call::<Value>("system/shutdown", serde_json::Map::new());
        let _ = shutdown.await;
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
