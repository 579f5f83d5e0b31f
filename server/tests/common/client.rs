//! The pty-ws client of the tests (tokio-tungstenite) and helpers that read its frames.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use wire::a2a::Task;
use wire::server::{ErrorPayload, Sent, ServerFrame, ServerOp};
use wire::{CloseReason, ErrorCode, PtyErrorCode, Role, SessionFrame};

use super::*;

/// The protocol list browsers send: `pty-ws.v1` plus the token as `bearer.<base64url>`.
pub fn bearer_protocols(token: &str) -> String {
    format!("pty-ws.v1, bearer.{}", URL_SAFE_NO_PAD.encode(token))
}

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The HTTP status refusing an upgrade that carries `token` as a subprotocol bearer, or
/// `None` when the upgrade succeeds.
pub async fn bearer_refusal(url: &str, token: &str) -> Option<u16> {
    upgrade_status(url, &[("Sec-WebSocket-Protocol", &bearer_protocols(token))])
        .await
        .err()
}

/// Attempts an upgrade with the given headers; returns the HTTP status of a refusal.
pub async fn upgrade_status(url: &str, headers: &[(&str, &str)]) -> Result<Ws, u16> {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("unexpected upgrade error: {e}"),
    }
}

pub struct Client {
    pub ws: Ws,
    pub hello: Value,
    pub protocol: String,
    next_id: u64,
    /// The server speaks the spec's shape (not the agentic-sandbox executor's): every
    /// frame is checked against the wire types.
    spec: bool,
}

/// A frame as it came: JSON text, or binary.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Json(Value),
    Binary(Vec<u8>),
}

impl Client {
    pub async fn connect(url: &str, token: &str) -> Client {
        Client::connect_as(url, token, "pty-ws.v1").await
    }

    /// Connects offering `pty-ws.v1.binary` (PW1O output, PW1I input).
    pub async fn connect_binary(url: &str, token: &str) -> Client {
        Client::connect_as(url, token, "pty-ws.v1.binary").await
    }

    async fn connect_as(url: &str, token: &str, subprotocol: &str) -> Client {
        let mut req = url.into_client_request().unwrap();
        let offered = bearer_protocols(token).replacen("pty-ws.v1", subprotocol, 1);
        req.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_str(&offered).unwrap(),
        );
        let (ws, resp) = tokio_tungstenite::connect_async(req)
            .await
            .expect("upgrade");
        let protocol = resp.headers()["sec-websocket-protocol"]
            .to_str()
            .unwrap()
            .to_owned();
        let mut c = Client {
            ws,
            hello: Value::Null,
            protocol,
            next_id: 0,
            spec: false,
        };
        c.hello = c.next().await;
        c.spec = serde_json::from_value::<ServerFrame>(c.hello.clone()).is_ok();
        c
    }

    /// Sends a frame; returns its id.
    pub async fn send(&mut self, op: &str, payload: Value) -> String {
        self.send_env(op, payload, json!({})).await
    }

    /// Sends a frame with extra envelope fields (`replay_from`, `service_parameters`, ...).
    pub async fn send_env(&mut self, op: &str, payload: Value, extra: Value) -> String {
        self.next_id += 1;
        let id = format!("req-{}", self.next_id);
        let mut env = json!({
            "op": op, "id": id, "ts": "2026-11-29T00:00:00.000Z", "payload": payload,
            "extensions": ["https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"],
        });
        env.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        self.send_raw(&env.to_string()).await;
        id
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.ws.send(Message::Text(text.into())).await.unwrap();
    }

    pub async fn send_binary(&mut self, frame: Vec<u8>) {
        self.ws.send(Message::Binary(frame.into())).await.unwrap();
    }

    /// The next frame, text or binary, within `wait`.
    pub async fn next_frame(&mut self, wait: Duration) -> Option<Frame> {
        tokio::time::timeout(wait, async {
            loop {
                match self.ws.next().await {
                    Some(Ok(Message::Text(t))) => return Some(Frame::Json(checked(&t, self.spec))),
                    Some(Ok(Message::Binary(b))) => return Some(Frame::Binary(b.to_vec())),
                    Some(Ok(Message::Close(_))) | None => return None,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => panic!("socket error: {e}"),
                }
            }
        })
        .await
        .ok()
        .flatten()
    }

    /// The next JSON frame (WebSocket pings are answered by the library).
    pub async fn next(&mut self) -> Value {
        self.try_next(WAIT).await.expect("a frame")
    }

    pub async fn try_next(&mut self, wait: Duration) -> Option<Value> {
        tokio::time::timeout(wait, async {
            loop {
                match self.ws.next().await {
                    Some(Ok(Message::Text(t))) => return Some(checked(&t, self.spec)),
                    Some(Ok(Message::Close(_))) | None => return None,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => panic!("socket error: {e}"),
                }
            }
        })
        .await
        .ok()
        .flatten()
    }

    /// Reads until the close frame; returns its code and every JSON frame before it.
    pub async fn until_close(&mut self) -> (Option<u16>, Vec<Value>) {
        self.until_close_within(WAIT).await
    }

    /// `until_close`, waiting up to `wait` for the close.
    pub async fn until_close_within(&mut self, wait: Duration) -> (Option<u16>, Vec<Value>) {
        let mut frames = Vec::new();
        let code = tokio::time::timeout(wait, async {
            loop {
                match self.ws.next().await {
                    Some(Ok(Message::Text(t))) => frames.push(checked(&t, self.spec)),
                    Some(Ok(Message::Close(c))) => return c.map(|c| u16::from(c.code)),
                    None | Some(Err(_)) => return None,
                    Some(Ok(_)) => {}
                }
            }
        })
        .await
        .expect("the server closes");
        (code, frames)
    }

    /// Joins; returns the initial flush up to and including the joiner's keyframe and
    /// membership frames (three frames for a plain join).
    pub async fn join(&mut self, role: &str) -> Vec<Value> {
        self.join_with(json!({ "role": role }), json!({})).await
    }

    pub async fn join_with(&mut self, payload: Value, extra: Value) -> Vec<Value> {
        self.send_env("pty.join_session", payload, extra).await;
        let mut frames = Vec::new();
        let (mut keyframe, mut membership) = (false, false);
        let mut role_seq = u64::MAX;
        while !(keyframe && membership) {
            let f = self.next().await;
            let typed = typed(&f);
            // Replayed frames are numbered before RoleAssigned; the flush's own after it.
            let fresh = typed.sequence.is_some_and(|s| s > role_seq);
            match &typed.op {
                ServerOp::Session(SessionFrame::RoleAssigned { .. }) => role_seq = seq(&f),
                ServerOp::Session(SessionFrame::Keyframe { .. }) if fresh => keyframe = true,
                ServerOp::Session(SessionFrame::MembershipChanged { .. }) if fresh => {
                    membership = true
                }
                ServerOp::Error(e) if e.code != ErrorCode::ReplayOutOfRange => {
                    panic!("join refused: {f}")
                }
                _ => {}
            }
            frames.push(f);
        }
        frames
    }

    /// Reads frames until one of session-frame kind `k` arrives; returns it.
    pub async fn expect_kind(&mut self, k: &str) -> Value {
        loop {
            let f = self.next().await;
            if kind(&f) == k {
                return f;
            }
        }
    }

    /// Reads frames until an `op` arrives; returns it.
    pub async fn expect_op(&mut self, op: &str) -> Value {
        loop {
            let f = self.next().await;
            // Either dialect: the executor's frames name their op the same way.
            if f["op"] == op {
                return f;
            }
        }
    }

    /// Collects Output until the decoded text contains `needle`; returns all frames read.
    pub async fn output_until(&mut self, needle: &str) -> Vec<Value> {
        let mut text = String::new();
        let mut frames = Vec::new();
        while !text.contains(needle) {
            let f = self.next().await;
            if kind(&f) == "Output" {
                text.push_str(&String::from_utf8_lossy(&output_bytes(&f)));
            }
            frames.push(f);
        }
        frames
    }

    pub async fn input(&mut self, text: &str) -> String {
        self.send(
            "pty.session_input",
            json!({ "data": STANDARD.encode(text) }),
        )
        .await
    }
}

/// A frame's text as JSON, once it has decoded as a `ServerFrame` (from a server that
/// speaks the spec's shape): every frame a test reads is checked against the wire types,
/// so a renamed field fails here.
fn checked(text: &str, spec: bool) -> Value {
    let v: Value = serde_json::from_str(text).unwrap();
    // A connection that spoke first in the executor's shape is answered in it (`seq`, no
    // `id`); the spec's frames all decode.
    let executor = v.get("seq").is_some() && v.get("id").is_none();
    if let (true, false, Err(e)) = (spec, executor, ServerFrame::decode(text)) {
        panic!("not a server frame ({e}): {text}");
    }
    v
}

/// A frame a test holds, as its wire type.
pub fn typed(f: &Value) -> ServerFrame {
    serde_json::from_value(f.clone()).unwrap_or_else(|e| panic!("not a server frame ({e}): {f}"))
}

/// A frame as a test holds it: the JSON a client read, or a frame already decoded (a page of
/// stored frames).
pub trait AsFrame {
    fn frame(&self) -> ServerFrame;
}

impl AsFrame for Value {
    fn frame(&self) -> ServerFrame {
        typed(self)
    }
}

impl<F: AsFrame> AsFrame for &F {
    fn frame(&self) -> ServerFrame {
        (*self).frame()
    }
}

impl AsFrame for ServerFrame {
    fn frame(&self) -> ServerFrame {
        self.clone()
    }
}

/// The session frame a frame carries, if it is one.
pub fn session_frame(f: &impl AsFrame) -> Option<SessionFrame> {
    match f.frame().op {
        ServerOp::Session(frame) => Some(frame),
        _ => None,
    }
}

/// The `payload.kind` of a session frame, or "" for other frames.
pub fn kind(f: &impl AsFrame) -> &'static str {
    session_frame(f).map_or("", |s| s.kind())
}

pub fn seq(f: &impl AsFrame) -> u64 {
    f.frame().sequence.expect("a sequence")
}

pub fn output_bytes(f: &Value) -> Vec<u8> {
    match session_frame(f) {
        Some(SessionFrame::Output { data, .. }) => data.0,
        _ => panic!("not an Output frame: {f}"),
    }
}

/// The text of every Output frame among `frames`, in order.
pub fn output_text(frames: &[Value]) -> String {
    frames
        .iter()
        .filter_map(|f| match session_frame(f) {
            Some(SessionFrame::Output { data, .. }) => {
                Some(String::from_utf8_lossy(&data.0).into_owned())
            }
            _ => None,
        })
        .collect()
}

pub fn snapshot(f: &Value) -> Vec<u8> {
    match session_frame(f) {
        Some(SessionFrame::Keyframe { snapshot, .. }) => snapshot.0,
        _ => panic!("not a Keyframe: {f}"),
    }
}

/// An `Error` frame's payload.
pub fn error_of(f: &Value) -> ErrorPayload {
    match typed(f).op {
        ServerOp::Error(e) => *e,
        _ => panic!("not an Error frame: {f}"),
    }
}

/// The task a frame carries: a SendMessage, GetTask or CancelTask answer, or an update.
pub fn task_of(f: &Value) -> Task {
    match typed(f).op {
        ServerOp::SendMessage(sent) => match *sent {
            Sent::Task(task) => task,
            Sent::Message(m) => panic!("a message, not a task: {m:?}"),
        },
        ServerOp::GetTask(a) | ServerOp::CancelTask(a) => a.task,
        ServerOp::TaskUpdate(u) => u.task,
        _ => panic!("no task in {f}"),
    }
}

/// A frame's `op`.
pub fn op_of(f: &Value) -> &'static str {
    typed(f).op.name()
}

/// The `trace_id` service parameter a frame carries.
pub fn trace_id(f: &Value) -> Option<String> {
    let params = typed(f).service_parameters?;
    params.get("trace_id")?.as_str().map(str::to_owned)
}

/// Why a `binding_goodbye` frame says the server closes.
pub fn goodbye_reason(f: &Value) -> String {
    match typed(f).op {
        ServerOp::Goodbye(g) => g.reason,
        _ => panic!("not a goodbye: {f}"),
    }
}

/// Whether `f` is the session's `PTY_OUTPUT_LAGGED` error.
pub fn is_lagged(f: &Value) -> bool {
    matches!(
        session_frame(f),
        Some(SessionFrame::Error {
            code: PtyErrorCode::PtyOutputLagged,
            ..
        })
    )
}

/// The role a `RoleAssigned` frame gives: the role, the client, and whether it was less
/// than asked for.
pub fn role_of(f: &Value) -> (Role, String, bool) {
    match session_frame(f) {
        Some(SessionFrame::RoleAssigned {
            role,
            client_id,
            downgraded,
            ..
        }) => (role, client_id, downgraded == Some(true)),
        _ => panic!("not a RoleAssigned frame: {f}"),
    }
}

/// A `Closed` frame's exit code and reason.
pub fn closed_of(f: &Value) -> (Option<i32>, CloseReason) {
    match session_frame(f) {
        Some(SessionFrame::Closed {
            exit_code, reason, ..
        }) => (exit_code, reason),
        _ => panic!("not a Closed frame: {f}"),
    }
}

/// The session a `binding_hello` frame names.
pub fn hello_session(f: &Value) -> String {
    match typed(f).op {
        ServerOp::Hello(h) => h.session.session_id,
        _ => panic!("not a hello: {f}"),
    }
}

/// The request id a frame answers (or its own id).
pub fn id_of(f: &Value) -> String {
    typed(f).id
}

/// Runs `cat` in a fresh session: whatever a controller types comes back as output.
pub async fn cat_session(server: &TestServer) -> String {
    let s = server
        .create_session(json!({ "argv": ["cat"], "cols": 80, "rows": 24 }))
        .await;
    s.session_id
}
