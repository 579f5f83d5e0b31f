//! The STDIO binding (the draft A2A custom binding, variant `stdio-json`): the whole agent
//! over stdin and stdout of one process, for a parent that spawned it. Stdout carries only
//! `Content-Length` frames; diagnostics go to stderr. The server speaks first (`handshake`),
//! the parent selects a variant (`handshakeAck`), then JSON-RPC 2.0 requests run
//! concurrently on the same task service as every other binding.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use wire::a2a::StreamResponse;
use wire::rpc::{JsonRpcError, JsonRpcResponse};
use wire::stdio::{Handshake, Opening, PROTOCOL, PROTOCOL_VERSION, SessionMark, StreamEnd};

use crate::a2a::service::{TaskService, TaskStream};
use crate::a2a::{A2aError, Version};
use crate::auth::{Principal, Scope};
use crate::bindings::jsonrpc::{self, Reply};
use crate::framing::{FrameReader, Incoming, VARIANT_JSON, VARIANT_PROTO, frame};

/// Where emitted Tasks, Messages and Artifacts carry the binding's session facts (§9.5).
pub const METADATA_KEY: &str = "https://a2a-protocol.org/bindings/stdio/v1";
/// How long in-flight work may take to wind down after the parent leaves.
const GRACE: Duration = Duration::from_secs(2);

mod codecs;
use codecs::{JsonCodec, ProtoCodec};

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
    fn send<T: Serialize>(&self, v: &T) {
        let body = serde_json::to_vec(v).unwrap_or_default();
        let _ = self.tx.send(frame(&body));
    }

    fn result(&self, id: &Value, mut result: Value) {
        stamp(&mut result, &self.mark);
        self.send(&JsonRpcResponse::result(id.clone(), result));
    }

    fn error(&self, id: &Value, e: &A2aError) {
        self.send(&jsonrpc::error_object(id, e));
    }

    fn raw_error(&self, id: &Value, code: i64, message: &str) {
        let error = JsonRpcError {
            code,
            message: message.to_owned(),
            data: None,
        };
        self.send(&JsonRpcResponse::<Value>::error(id.clone(), error));
    }

    fn stream_end(&self, id: &Value) {
        self.send(&StreamEnd::of(id.clone()));
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
    let mark = SessionMark {
        session_id: session_id.clone(),
        pid,
        variant: VARIANT_JSON.to_owned(),
    };
    let out = Out {
        tx,
        mark: Arc::new(wire::to_json(mark)),
    };
    out.send(&Opening::Handshake(Handshake {
        protocol: PROTOCOL.to_owned(),
        protocol_version: PROTOCOL_VERSION.to_owned(),
        session_id: session_id.clone(),
        supported_variants: vec![VARIANT_JSON.to_owned(), VARIANT_PROTO.to_owned()],
        features: vec!["streaming".to_owned()],
        pid,
    }));
    let mut reader = FrameReader::new(input, max_body);
    let code = match handshake(&mut reader, &session_id).await {
        Ok(VARIANT_PROTO) => {
            let codec = ProtoCodec(out.clone());
            session(
                &mut reader,
                codec,
                &tasks,
                &session_id,
                Arc::new(extensions),
            )
            .await
        }
        Ok(_) => {
            let codec = JsonCodec(out.clone());
            session(
                &mut reader,
                codec,
                &tasks,
                &session_id,
                Arc::new(extensions),
            )
            .await
        }
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
    let Ok(Opening::HandshakeAck(ack)) = serde_json::from_slice(&body) else {
        tracing::error!("the first frame is not a handshakeAck");
        return Err(exit::PROTOCOL);
    };
    if ack.accept == Some(false) {
        tracing::info!("the parent declined the session");
        return Err(exit::OK);
    }
    if ack.session_id.is_some_and(|s| s != session_id) {
        tracing::error!("the handshakeAck names another session");
        return Err(exit::PROTOCOL);
    }
    match ack.select_variant.as_deref() {
        Some(VARIANT_JSON) => Ok(VARIANT_JSON),
        Some(VARIANT_PROTO) => Ok(VARIANT_PROTO),
        other => {
            tracing::error!(variant = ?other, "the parent selected a variant not offered");
            Err(exit::PROTOCOL)
        }
    }
}

/// One frame as a variant reads it.
enum Read<Id> {
    /// A request to run: its id, method, parameters (1.0 JSON) and whether it streams.
    Request {
        id: Id,
        method: String,
        params: Value,
        streaming: bool,
    },
    /// The parent cancels the stream of this request.
    Cancel(Id),
    /// A heartbeat, or a request already answered with its refusal.
    Answered,
    /// `system/shutdown`: answered, then the session ends with exit 0.
    Shutdown(Id),
    /// The session ends with this exit code.
    Exit(u8),
}

/// What tells the variants apart: how a frame reads, and how answers, stream events, stream
/// ends and errors are written. One session loop runs both.
trait Codec: Clone + Send + Sync + 'static {
    type Id: Clone + Send + Sync + 'static;
    /// One stream event, as written.
    type Item: Send;

    /// The key of a request's stream.
    fn key(id: &Self::Id) -> String;
    fn read<R: AsyncRead + Unpin>(&self, reader: &FrameReader<R>, body: &[u8]) -> Read<Self::Id>;
    /// The answer to a frame over the size limit (the session then ends).
    fn too_large(&self);
    fn answer(&self, id: &Self::Id, method: &str, result: Value);
    fn shape(
        &self,
        method: &str,
        version: Version,
        event: StreamResponse,
    ) -> Result<Self::Item, A2aError>;
    fn event(&self, id: &Self::Id, item: Self::Item);
    fn end(&self, id: &Self::Id);
    fn error(&self, id: &Self::Id, e: &A2aError);
    fn shut_down(&self, id: &Self::Id);
}

/// The session after the handshake: requests run concurrently, streams until their end or
/// the parent's cancel, until EOF, `system/shutdown` or a protocol error.
async fn session<R: AsyncRead + Unpin, C: Codec>(
    reader: &mut FrameReader<R>,
    codec: C,
    tasks: &TaskService,
    session_id: &str,
    extensions: Activated,
) -> u8 {
    let who = parent(session_id);
    let streams: Streams = Arc::default();
    let mut running = JoinSet::new();
    let code = loop {
        let body = match next_body(reader, || codec.too_large()).await {
            Ok(b) => b,
            Err(code) => break code,
        };
        let (id, method, params, streaming) = match codec.read(reader, &body) {
            Read::Request {
                id,
                method,
                params,
                streaming,
            } => (id, method, params, streaming),
            Read::Cancel(id) => {
                cancel_stream(&streams, &C::key(&id), || codec.end(&id));
                continue;
            }
            Read::Answered => continue,
            Read::Shutdown(id) => {
                codec.shut_down(&id);
                break exit::OK;
            }
            Read::Exit(code) => break code,
        };
        let key = C::key(&id);
        if streaming && streams.lock().unwrap().contains_key(&key) {
            let refusal = format!("request id {key} already has an open stream");
            codec.error(&id, &A2aError::InvalidRequest(refusal));
            continue;
        }
        let (codec, tasks, who, streams_for_task, extensions) = (
            codec.clone(),
            tasks.clone(),
            who.clone(),
            streams.clone(),
            extensions.clone(),
        );
        if streaming {
            streams.lock().unwrap().insert(key.clone(), None);
        }
        let task_key = key.clone();
        let handle = running.spawn(async move {
            let key = task_key;
            match call(&tasks, &who, &method, params, &extensions).await {
                Ok(Reply::Value(v)) => codec.answer(&id, &method, v),
                Ok(Reply::Stream(stream, version)) => {
                    forward(
                        *stream,
                        &streams_for_task,
                        &key,
                        |e| codec.shape(&method, version, e),
                        |item| codec.event(&id, item),
                        || codec.end(&id),
                        |e| codec.error(&id, e),
                    )
                    .await;
                }
                Err(e) => {
                    streams_for_task.lock().unwrap().remove(&key);
                    codec.error(&id, &e);
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

#[cfg(test)]
mod tests;
