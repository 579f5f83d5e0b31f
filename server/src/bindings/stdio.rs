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
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use wire::a2a::StreamResponse;

use crate::a2a::service::{TaskService, TaskStream};
use crate::a2a::{A2aError, Version, v03};
use crate::auth::{Principal, Scope};
use crate::bindings::jsonrpc::{self, Reply};
use crate::bindings::proto;
use crate::framing::{FrameReader, Incoming, VARIANT_JSON, VARIANT_PROTO, frame, frame_with};

/// Where emitted Tasks, Messages and Artifacts carry the binding's session facts (§9.5).
pub const METADATA_KEY: &str = "https://a2a-protocol.org/bindings/stdio/v1";
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

/// Streams still open, by request id (registered before their task starts, its handle set
/// once it runs). Whoever removes one sends its end, and a stream sends a frame only while
/// it is registered, under the same lock: nothing of a stream follows its end.
type Streams = Arc<Mutex<HashMap<String, Option<AbortHandle>>>>;

/// Ends a stream the parent cancelled: stops its task and, if it was open, sends `end`.
fn cancel_stream(streams: &Streams, key: &str, end: impl FnOnce()) {
    let mut open = streams.lock().unwrap();
    if let Some(handle) = open.remove(key) {
        if let Some(h) = handle {
            h.abort();
        }
        end();
    }
}

/// Forwards a task stream while it is open (both variants): `shape` turns each event into
/// what `send` writes; an error (`fail`) ends the stream without `end`.
async fn forward<T>(
    stream: TaskStream,
    streams: &Streams,
    key: &str,
    shape: impl Fn(StreamResponse) -> Result<T, A2aError>,
    send: impl Fn(T),
    end: impl FnOnce(),
    fail: impl FnOnce(&A2aError),
) {
    let mut events = std::pin::pin!(stream.into_events());
    while let Some(event) = events.next().await {
        match event.and_then(&shape) {
            Ok(item) => {
                if !while_open(streams, key, || send(item)) {
                    return;
                }
            }
            Err(e) => {
                streams.lock().unwrap().remove(key);
                fail(&e);
                return;
            }
        }
    }
    if streams.lock().unwrap().remove(key).is_some() {
        end();
    }
}

/// Sends a stream's frame if the stream is still open.
fn while_open(streams: &Streams, key: &str, send: impl FnOnce()) -> bool {
    let open = streams.lock().unwrap();
    let still = open.contains_key(key);
    if still {
        send();
    }
    still
}

/// The extensions the parent activated (`A2A_SP_A2A_EXTENSIONS`), or why it may not call.
type Activated = Arc<Result<Vec<&'static str>, A2aError>>;

/// An A2A method, once the parent's activation allows it.
async fn call(
    tasks: &TaskService,
    who: &Principal,
    method: &str,
    params: Value,
    extensions: &Activated,
) -> Result<Reply, A2aError> {
    match extensions.as_ref() {
        Ok(uris) => jsonrpc::call(tasks, who, method, params, uris).await,
        Err(e) => Err(e.clone()),
    }
}

/// Serves one parent over `input` and `output` until it leaves; returns the exit code.
pub async fn serve<R, W>(
    tasks: TaskService,
    session_id: String,
    extensions: Result<Vec<&'static str>, A2aError>,
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
        "supportedVariants": [VARIANT_JSON, VARIANT_PROTO],
        "features": ["streaming"],
        "pid": pid,
    }));
    let mut reader = FrameReader::new(input, max_body);
    let code = match handshake(&mut reader, &session_id).await {
        Ok(VARIANT_PROTO) => {
            session_proto(&mut reader, &out, &tasks, &session_id, Arc::new(extensions)).await
        }
        Ok(_) => session(&mut reader, &out, &tasks, &session_id, Arc::new(extensions)).await,
        Err(code) => code,
    };
    drop(out);
    let _ = tokio::time::timeout(GRACE, writer).await;
    code
}

/// Waits for the parent's `handshakeAck`; the selected variant, or `Err` with the exit code.
async fn handshake<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    session_id: &str,
) -> Result<&'static str, u8> {
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
    match ack["selectVariant"].as_str() {
        Some(VARIANT_JSON) => Ok(VARIANT_JSON),
        Some(VARIANT_PROTO) => Ok(VARIANT_PROTO),
        _ => {
            tracing::error!(variant = %ack["selectVariant"], "the parent selected a variant not offered");
            Err(exit::PROTOCOL)
        }
    }
}

async fn session<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    out: &Out,
    tasks: &TaskService,
    session_id: &str,
    extensions: Activated,
) -> u8 {
    let who = parent(session_id);
    let streams: Streams = Arc::default();
    let mut running = JoinSet::new();
    let code = loop {
        let too_large = || out.raw_error(&Value::Null, -32000, "Message too large");
        let body = match next_body(reader, too_large).await {
            Ok(b) => b,
            Err(code) => break code,
        };
        let msg: Value = match crate::json::parse_unique(&body) {
            Ok(v) => v,
            Err(e) if e.is_data() => {
                let e = A2aError::InvalidRequest(format!("the request is ambiguous: {e}"));
                out.error(&Value::Null, &e);
                continue;
            }
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
            cancel_stream(&streams, &id.to_string(), || out.stream_end(&id));
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
        let (method, out, tasks, who, extensions) = (
            method.to_owned(),
            out.clone(),
            tasks.clone(),
            who.clone(),
            extensions.clone(),
        );
        let streams_for_task = streams.clone();
        if streaming {
            streams.lock().unwrap().insert(key.clone(), None);
        }
        let handle = running.spawn(async move {
            match call(&tasks, &who, &method, params, &extensions).await {
                Ok(Reply::Value(v)) => out.result(&id, v),
                Ok(Reply::Stream(stream, version)) => {
                    let shape = |e: StreamResponse| {
                        Ok(match version {
                            Version::V1 => json!(e),
                            Version::V03 => v03::event(&e),
                        })
                    };
                    forward(
                        *stream,
                        &streams_for_task,
                        &id.to_string(),
                        shape,
                        |result| out.result(&id, result),
                        || out.stream_end(&id),
                        |e| out.error(&id, e),
                    )
                    .await;
                }
                Err(e) => {
                    streams_for_task.lock().unwrap().remove(&id.to_string());
                    out.error(&id, &e);
                }
            }
        });
        if streaming && let Some(slot) = streams.lock().unwrap().get_mut(&key) {
            *slot = Some(handle);
        }
        // Finished requests leave the set as we go.
        while running.try_join_next().is_some() {}
    };
    wind_down(running).await;
    code
}

/// Stops the requests still running, allowing them the grace period to end.
async fn wind_down(mut running: JoinSet<()>) {
    running.abort_all();
    let _ = tokio::time::timeout(GRACE, async {
        while running.join_next().await.is_some() {}
    })
    .await;
}

/// The parent process, which the process boundary trusts as an administrator.
fn parent(session_id: &str) -> Principal {
    Principal {
        token_id: format!("stdio:{session_id}"),
        scope: Scope::Admin,
        session_id: None,
        label: Some("stdio parent".into()),
        share_link: false,
    }
}

/// The next frame's body, or the exit code the session ends with (EOF ends it well; an
/// oversized frame, after `too_large` answered it, or broken framing end it badly).
async fn next_body<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    too_large: impl FnOnce(),
) -> Result<Vec<u8>, u8> {
    match reader.next().await {
        Incoming::Frame(b) => Ok(b),
        Incoming::Eof => Err(exit::OK),
        Incoming::TooLarge(n) => {
            tracing::error!(bytes = n, "a frame over the size limit");
            too_large();
            Err(exit::PROTOCOL)
        }
        Incoming::Malformed(why) => {
            tracing::error!(%why, "framing broken");
            Err(exit::PROTOCOL)
        }
    }
}

/// Frames of the `stdio-proto` variant: protobuf bodies, routed by `A2A-*` headers.
impl Out {
    fn proto(&self, kind: &str, id: &str, body: &[u8]) {
        let headers = [("A2A-Kind", kind), ("A2A-Id", id)];
        let _ = self
            .tx
            .send(frame_with("application/x-protobuf", &headers, body));
    }

    fn proto_error(&self, id: &str, e: &A2aError) {
        self.proto(
            "error",
            id,
            &proto::error(e.jsonrpc_code(), &e.to_string(), e.reason()),
        );
    }
}

/// The `stdio-proto` session: the same operations as `stdio-json`, with each request's
/// kind, id and method in `A2A-Kind` / `A2A-Id` / `A2A-Method` and protobuf bodies
/// (proto/a2a.proto). Control frames (heartbeat) stay JSON and carry no `A2A-Kind`.
async fn session_proto<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    out: &Out,
    tasks: &TaskService,
    session_id: &str,
    extensions: Activated,
) -> u8 {
    let who = parent(session_id);
    let streams: Streams = Arc::default();
    let mut running = JoinSet::new();
    let code = loop {
        let too_large = || out.proto("error", "", &proto::error(-32000, "Message too large", ""));
        let body = match next_body(reader, too_large).await {
            Ok(b) => b,
            Err(code) => break code,
        };
        let (kind, id, method) = (
            reader.header("A2A-Kind").map(str::to_owned),
            reader.header("A2A-Id").unwrap_or("").to_owned(),
            reader.header("A2A-Method").unwrap_or("").to_owned(),
        );
        match kind.as_deref() {
            None => match serde_json::from_slice::<Value>(&body) {
                Ok(v) if v["type"] == "heartbeat" => continue,
                _ => {
                    tracing::error!("a frame without A2A-Kind that is no heartbeat");
                    break exit::PROTOCOL;
                }
            },
            Some("cancel") => {
                cancel_stream(&streams, &id, || out.proto("streamEnd", &id, &[]));
                continue;
            }
            Some("request") => {}
            Some(other) => {
                tracing::error!(kind = other, "an A2A-Kind a parent does not send");
                break exit::PROTOCOL;
            }
        }
        let Some((request_type, answer_type, streaming)) = proto::method_types(&method) else {
            out.proto_error(
                &id,
                &A2aError::MethodNotFound(format!("no method {method:?}")),
            );
            continue;
        };
        let params = match proto::decode(request_type, &body) {
            Ok(p) => p,
            Err(e) => {
                out.proto_error(&id, &A2aError::InvalidParams(e));
                continue;
            }
        };
        if method == "system/shutdown" {
            out.proto("response", &id, &[]);
            break exit::OK;
        }
        if streaming && streams.lock().unwrap().contains_key(&id) {
            out.proto_error(
                &id,
                &A2aError::InvalidRequest(format!("request id {id} already has an open stream")),
            );
            continue;
        }
        let (out, tasks, who, streams_for_task, extensions) = (
            out.clone(),
            tasks.clone(),
            who.clone(),
            streams.clone(),
            extensions.clone(),
        );
        let task_id = id.clone();
        if streaming {
            streams.lock().unwrap().insert(id.clone(), None);
        }
        let handle = running.spawn(async move {
            let id = task_id;
            let encode = |mut v: Value, type_name: &str| {
                stamp(&mut v, &out.mark);
                proto::encode(type_name, &v)
            };
            match call(&tasks, &who, &method, params, &extensions).await {
                Ok(Reply::Value(v)) => match encode(v, answer_type) {
                    Ok(bytes) => out.proto("response", &id, &bytes),
                    Err(e) => out.proto_error(&id, &A2aError::from(anyhow::anyhow!(e))),
                },
                Ok(Reply::Stream(stream, _)) => {
                    let shape = |e: StreamResponse| {
                        encode(json!(e), answer_type)
                            .map_err(|e| A2aError::from(anyhow::anyhow!(e)))
                    };
                    forward(
                        *stream,
                        &streams_for_task,
                        &id,
                        shape,
                        |bytes| out.proto("stream", &id, &bytes),
                        || out.proto("streamEnd", &id, &[]),
                        |e| out.proto_error(&id, e),
                    )
                    .await;
                }
                Err(e) => {
                    streams_for_task.lock().unwrap().remove(&id);
                    out.proto_error(&id, &e);
                }
            }
        });
        if streaming && let Some(slot) = streams.lock().unwrap().get_mut(&id) {
            *slot = Some(handle);
        }
        while running.try_join_next().is_some() {}
    };
    wind_down(running).await;
    code
}

#[cfg(test)]
mod tests;
