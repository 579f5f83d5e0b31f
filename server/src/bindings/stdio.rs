//! The STDIO binding (the draft A2A custom binding, variant `stdio-json`): the whole agent
//! over stdin and stdout of one process, for a parent that spawned it. Stdout carries only
//! `Content-Length` frames; diagnostics go to stderr. The server speaks first (`handshake`),
//! the parent selects a variant (`handshakeAck`), then JSON-RPC 2.0 requests run
//! concurrently on the same task service as every other binding.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use crate::a2a::service::TaskService;
use crate::a2a::{A2aError, Version, v03};
use crate::auth::{Principal, Scope};
use crate::bindings::jsonrpc::{self, Reply};

pub const VARIANT_JSON: &str = "stdio-json";
/// Where emitted Tasks, Messages and Artifacts carry the binding's session facts (§9.5).
pub const METADATA_KEY: &str = "https://a2a-protocol.org/bindings/stdio/v1";
const MAX_HEADER_BYTES: usize = 8 * 1024;
/// How long in-flight work may take to wind down after the parent leaves.
const GRACE: Duration = Duration::from_secs(2);

/// Exit codes of the draft (§2.4).
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILURE: u8 = 1;
    pub const PROTOCOL: u8 = 2;
    pub const VERSION: u8 = 3;
    pub const STARTUP_DENIED: u8 = 4;
}

/// One read from the parent.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Frame(Vec<u8>),
    /// Stdin ended between frames.
    Eof,
    TooLarge(usize),
    /// Broken framing: the session cannot go on.
    Malformed(String),
}

/// Reads `Content-Length` frames with strict headers.
pub struct FrameReader<R> {
    inner: BufReader<R>,
    max_body: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, max_body: usize) -> FrameReader<R> {
        FrameReader {
            inner: BufReader::new(inner),
            max_body,
        }
    }

    pub async fn next(&mut self) -> Incoming {
        let mut length = None;
        let mut header_bytes = 0;
        let mut first = true;
        loop {
            let mut line = Vec::new();
            let limit = (MAX_HEADER_BYTES - header_bytes + 1) as u64;
            let read = (&mut self.inner)
                .take(limit)
                .read_until(b'\n', &mut line)
                .await;
            let n = match read {
                Ok(n) => n,
                Err(e) => return Incoming::Malformed(format!("reading stdin: {e}")),
            };
            if n == 0 {
                return if first {
                    Incoming::Eof
                } else {
                    Incoming::Malformed("stdin ended inside a frame header".into())
                };
            }
            first = false;
            header_bytes += n;
            if header_bytes > MAX_HEADER_BYTES {
                return Incoming::Malformed(format!(
                    "a header block over {MAX_HEADER_BYTES} bytes"
                ));
            }
            let Some(line) = line.strip_suffix(b"\r\n") else {
                return Incoming::Malformed("a header line must end with CRLF".into());
            };
            if line.is_empty() {
                break;
            }
            let Ok(line) = std::str::from_utf8(line) else {
                return Incoming::Malformed("a header line is not UTF-8".into());
            };
            if line.starts_with([' ', '\t']) {
                return Incoming::Malformed("folded header lines are not allowed".into());
            }
            let Some((name, value)) = line.split_once(':') else {
                return Incoming::Malformed(format!("header line without a colon: {line:?}"));
            };
            if name.is_empty() || name.ends_with([' ', '\t']) {
                return Incoming::Malformed(format!("bad header name {name:?}"));
            }
            if name.eq_ignore_ascii_case("content-length") {
                let value = value.trim();
                if length.is_some()
                    || value.is_empty()
                    || !value.bytes().all(|b| b.is_ascii_digit())
                {
                    return Incoming::Malformed(format!("bad Content-Length {value:?}"));
                }
                length = value.parse::<usize>().ok().or(Some(usize::MAX));
            }
        }
        let Some(length) = length else {
            return Incoming::Malformed("a frame without Content-Length".into());
        };
        if length > self.max_body {
            return Incoming::TooLarge(length);
        }
        let mut body = vec![0; length];
        match self.inner.read_exact(&mut body).await {
            Ok(_) => Incoming::Frame(body),
            Err(_) => Incoming::Malformed("stdin ended inside a frame body".into()),
        }
    }
}

/// Encodes one frame.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "Content-Length: {}\r\nContent-Type: application/json\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// The session's service parameters from `A2A_SP_<NAME>` variables: the name lowercased
/// with `_` as `-`, the value split at commas.
pub fn service_params(vars: impl Iterator<Item = (String, String)>) -> Map<String, Value> {
    vars.filter_map(|(k, v)| {
        let name = k
            .strip_prefix("A2A_SP_")?
            .to_ascii_lowercase()
            .replace('_', "-");
        let values: Vec<Value> = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Value::String(s.to_owned()))
            .collect();
        Some((name, Value::Array(values)))
    })
    .collect()
}

/// Marks every Task, Message and Artifact in `v` (nested ones too) with the binding's
/// session facts, leaving an existing mark alone.
pub fn stamp(v: &mut Value, mark: &Value) {
    match v {
        Value::Object(obj) => {
            let has = |k: &str| obj.contains_key(k);
            let is_task = has("id") && has("contextId") && has("status");
            let is_message = has("messageId") && has("role");
            let is_artifact = has("artifactId") && has("parts");
            if is_task || is_message || is_artifact {
                let meta = obj
                    .entry("metadata")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(meta) = meta {
                    meta.entry(METADATA_KEY).or_insert_with(|| mark.clone());
                }
            }
            for (k, child) in obj.iter_mut() {
                if k != "metadata" {
                    stamp(child, mark);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| stamp(i, mark)),
        _ => {}
    }
}

/// The frames this process writes, in order, from one task.
#[derive(Clone)]
struct Out {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    mark: Arc<Value>,
}

impl Out {
    fn send(&self, v: &Value) {
        let _ = self.tx.send(frame(v.to_string().as_bytes()));
    }

    fn result(&self, id: &Value, mut result: Value) {
        stamp(&mut result, &self.mark);
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    }

    fn error(&self, id: &Value, e: &A2aError) {
        self.send(&jsonrpc::error_object(id, e));
    }

    fn raw_error(&self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }),
        );
    }

    fn stream_end(&self, id: &Value) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "streamEnd": true }));
    }
}

/// Streams still open, by request id; whoever removes one sends its end.
type Streams = Arc<Mutex<HashMap<String, AbortHandle>>>;

/// Serves one parent over `input` and `output` until it leaves; returns the exit code.
pub async fn serve<R, W>(
    tasks: TaskService,
    session_id: String,
    max_body: usize,
    input: R,
    mut output: W,
) -> u8
where
    R: AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let pid = std::process::id();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
                return;
            }
        }
    });
    let out = Out {
        tx,
        mark: Arc::new(json!({ "sessionId": session_id, "pid": pid, "variant": VARIANT_JSON })),
    };
    out.send(&json!({
        "type": "handshake",
        "protocol": "a2a-stdio",
        "protocolVersion": "1.0",
        "sessionId": session_id,
        "supportedVariants": [VARIANT_JSON],
        "features": ["streaming"],
        "pid": pid,
    }));
    let mut reader = FrameReader::new(input, max_body);
    let code = match handshake(&mut reader, &session_id).await {
        Ok(()) => session(&mut reader, &out, &tasks, &session_id).await,
        Err(code) => code,
    };
    drop(out);
    let _ = tokio::time::timeout(GRACE, writer).await;
    code
}

/// Waits for the parent's `handshakeAck`; `Err` is the exit code.
async fn handshake<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    session_id: &str,
) -> Result<(), u8> {
    let body = match reader.next().await {
        Incoming::Frame(b) => b,
        Incoming::Eof => return Err(exit::OK),
        Incoming::TooLarge(_) | Incoming::Malformed(_) => return Err(exit::PROTOCOL),
    };
    let ack: Value = serde_json::from_slice(&body).map_err(|_| exit::PROTOCOL)?;
    if ack["type"] != "handshakeAck" {
        tracing::error!("the first frame is not a handshakeAck");
        return Err(exit::PROTOCOL);
    }
    if ack["accept"] == false {
        tracing::info!("the parent declined the session");
        return Err(exit::OK);
    }
    if ack["sessionId"].as_str().is_some_and(|s| s != session_id) {
        tracing::error!("the handshakeAck names another session");
        return Err(exit::PROTOCOL);
    }
    if ack["selectVariant"] != VARIANT_JSON {
        tracing::error!(variant = %ack["selectVariant"], "the parent selected a variant not offered");
        return Err(exit::PROTOCOL);
    }
    Ok(())
}

async fn session<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    out: &Out,
    tasks: &TaskService,
    session_id: &str,
) -> u8 {
    let who = Principal {
        token_id: format!("stdio:{session_id}"),
        scope: Scope::Admin,
        session_id: None,
        label: Some("stdio parent".into()),
        share_link: false,
    };
    let streams: Streams = Arc::default();
    let mut running = JoinSet::new();
    let code = loop {
        let body = match reader.next().await {
            Incoming::Frame(b) => b,
            Incoming::Eof => break exit::OK,
            Incoming::TooLarge(n) => {
                tracing::error!(bytes = n, "a frame over the size limit");
                out.raw_error(&Value::Null, -32000, "Message too large");
                break exit::PROTOCOL;
            }
            Incoming::Malformed(why) => {
                tracing::error!(%why, "framing broken");
                break exit::PROTOCOL;
            }
        };
        let msg: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                out.raw_error(&Value::Null, -32700, &format!("parse error: {e}"));
                break exit::PROTOCOL;
            }
        };
        if let Some(kind) = msg.get("type").and_then(Value::as_str) {
            if kind == "heartbeat" {
                continue;
            }
            tracing::error!(kind, "a control frame out of place");
            break exit::PROTOCOL;
        }
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        if msg.get("cancelStream") == Some(&Value::Bool(true)) {
            if let Some(handle) = streams.lock().unwrap().remove(&id.to_string()) {
                handle.abort();
                out.stream_end(&id);
            }
            continue;
        }
        let method = msg.get("method").and_then(Value::as_str);
        let (Some(method), true, true) = (
            method,
            msg.get("jsonrpc") == Some(&json!("2.0")),
            id.is_string() || id.is_number(),
        ) else {
            out.error(
                &id,
                &A2aError::InvalidRequest(
                    "not a JSON-RPC 2.0 request with an id and a method".into(),
                ),
            );
            continue;
        };
        if method == "system/shutdown" {
            out.result(&id, json!({}));
            break exit::OK;
        }
        let streaming = matches!(method, "SendStreamingMessage" | "SubscribeToTask");
        let key = id.to_string();
        if streaming && streams.lock().unwrap().contains_key(&key) {
            out.error(
                &id,
                &A2aError::InvalidRequest(format!("request id {key} already has an open stream")),
            );
            continue;
        }
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        let (method, out, tasks, who) =
            (method.to_owned(), out.clone(), tasks.clone(), who.clone());
        let streams_for_task = streams.clone();
        let handle = running.spawn(async move {
            match jsonrpc::call(&tasks, &who, &method, params).await {
                Ok(Reply::Value(v)) => out.result(&id, v),
                Ok(Reply::Stream(stream, version)) => {
                    let mut events = std::pin::pin!(stream.into_events());
                    while let Some(event) = events.next().await {
                        match event {
                            Ok(e) => out.result(
                                &id,
                                match version {
                                    Version::V1 => json!(e),
                                    Version::V03 => v03::event(&e),
                                },
                            ),
                            Err(e) => {
                                // An error ends the stream; no streamEnd follows.
                                streams_for_task.lock().unwrap().remove(&id.to_string());
                                out.error(&id, &e);
                                return;
                            }
                        }
                    }
                    if streams_for_task
                        .lock()
                        .unwrap()
                        .remove(&id.to_string())
                        .is_some()
                    {
                        out.stream_end(&id);
                    }
                }
                Err(e) => {
                    streams_for_task.lock().unwrap().remove(&id.to_string());
                    out.error(&id, &e);
                }
            }
        });
        if streaming {
            streams.lock().unwrap().insert(key, handle);
        }
        // Finished requests leave the set as we go.
        while running.try_join_next().is_some() {}
    };
    running.abort_all();
    let _ = tokio::time::timeout(GRACE, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8]) -> Vec<Incoming> {
        let mut r = FrameReader::new(input, 64);
        let mut got = Vec::new();
        loop {
            let next = r.next().await;
            let stop = !matches!(next, Incoming::Frame(_));
            got.push(next);
            if stop {
                return got;
            }
        }
    }

    #[tokio::test]
    async fn frames_are_read_with_strict_headers() {
        let two = b"Content-Length: 2\r\n\r\n{}content-length:3\r\nX-Other: y\r\n\r\n[1]";
        assert_eq!(
            read_all(two).await,
            [
                Incoming::Frame(b"{}".to_vec()),
                Incoming::Frame(b"[1]".to_vec()),
                Incoming::Eof
            ]
        );
        for bad in [
            &b"Content-Length : 2\r\n\r\n{}"[..],
            b"Content-Length: 2\r\n x\r\n\r\n{}",
            b"Content-Length: 2\n\n{}",
            b"Content-Length: -2\r\n\r\n{}",
            b"X: y\r\n\r\n{}",
            b"Content-Length: 5\r\n\r\n{}",
            b"Content-Length: 2\r\n",
        ] {
            let got = read_all(bad).await;
            assert!(
                matches!(got.last(), Some(Incoming::Malformed(_))),
                "{:?}: {got:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            read_all(b"Content-Length: 65\r\n\r\n").await,
            [Incoming::TooLarge(65)]
        );
    }

    #[test]
    fn service_params_come_from_a2a_sp_variables() {
        let p = service_params(
            [
                ("A2A_SP_A2A_EXTENSIONS".to_owned(), "a, b ,c".to_owned()),
                ("A2A_SESSION_ID".to_owned(), "s".to_owned()),
            ]
            .into_iter(),
        );
        assert_eq!(
            Value::Object(p),
            json!({ "a2a-extensions": ["a", "b", "c"] })
        );
    }

    #[test]
    fn tasks_messages_and_artifacts_are_stamped_once_status_updates_are_not() {
        let mark = json!({ "sessionId": "s" });
        let mut v = json!({
            "statusUpdate": { "taskId": "t", "contextId": "c", "status": { "state": "TASK_STATE_WORKING",
                "message": { "messageId": "m", "role": "ROLE_AGENT", "parts": [] } } },
            "task": { "id": "t", "contextId": "c", "status": {}, "history": [{ "messageId": "u", "role": "ROLE_USER", "parts": [],
                "metadata": { (METADATA_KEY): { "sessionId": "earlier" } } }],
                "artifacts": [{ "artifactId": "a", "parts": [] }] },
        });
        stamp(&mut v, &mark);
        assert!(v["statusUpdate"].get("metadata").is_none());
        assert_eq!(
            v["statusUpdate"]["status"]["message"]["metadata"][METADATA_KEY],
            mark
        );
        assert_eq!(v["task"]["metadata"][METADATA_KEY], mark);
        assert_eq!(v["task"]["artifacts"][0]["metadata"][METADATA_KEY], mark);
        assert_eq!(
            v["task"]["history"][0]["metadata"][METADATA_KEY]["sessionId"],
            "earlier"
        );
    }
}
