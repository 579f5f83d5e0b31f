//! The `pty-ws/v1` binding: upgrade checks (subprotocol, bearer, session), then one task
//! per connection that maps frames to session commands and session frames to the socket.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;
use wire::a2a::{StreamResponse, Task};
use wire::{
    self, ClientOp, DecodeError, Envelope, ErrorCode, JoinSession, Pong, Role, SUBPROTOCOL_BINARY,
    SUBPROTOCOL_JSON, TaskOp,
};

use crate::a2a::service::TaskStream;
use crate::a2a::{A2aError, Version, Via};

use crate::audit;
use crate::auth::{self, Principal, Scope};
use crate::clock;
use crate::limits::SessionSlot;
use crate::plumbing::{ApiError, AppState, auth_error, header_bearer, refuse_query_token};
use crate::sessions::host;
use crate::sessions::{
    self, Command, JoinRequest, Joined, Outbound, Refusal, Replay, SessionHandle, envelope,
};

/// Largest client frame accepted.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

#[derive(Debug, Deserialize)]
pub struct AttachPath {
    sid: String,
}

/// `GET B/sessions/{sid}/attach`: everything that can fail is refused before the upgrade.
pub async fn attach(
    State(state): State<AppState>,
    Path(AttachPath { sid }): Path<AttachPath>,
    uri: Uri,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    match check_attach(&state, &sid, &uri, &headers).await {
        Err(e) => e.into_response(),
        Ok((principal, subprotocol, slot)) => {
            match upgrade {
                Err(rejection) => rejection.into_response(),
                Ok(ws) => {
                    let tracker = state.connections.clone();
                    let binary = subprotocol == SUBPROTOCOL_BINARY;
                    let attach = audit::Record::new(audit::Event::Attach, &sid)
                    .by(&principal.token_id)
                    .detail(json!({ "scope": principal.scope.as_str(), "subprotocol": subprotocol }));
                    state.audit.record(attach);
                    if principal.share_link {
                        let used = audit::Record::new(audit::Event::ShareLinkUsed, &sid)
                            .by(&principal.token_id)
                            .detail(json!({ "to": "attach" }));
                        state.audit.record(used);
                    }
                    // Frames up to four times the limit are read and refused with 1009; beyond
                    // that the socket layer drops the connection.
                    ws.protocols([subprotocol])
                        .max_message_size(MAX_FRAME_BYTES * 4)
                        .max_frame_size(MAX_FRAME_BYTES * 4)
                        .on_upgrade(move |socket| {
                            let connection = Connection::new(state, principal, sid, binary, slot);
                            tracker.track_future(connection.run(socket))
                        })
                }
            }
        }
    }
}

async fn check_attach(
    state: &AppState,
    sid: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<(Principal, &'static str, SessionSlot), ApiError> {
    refuse_query_token(uri.query())?;
    if state.refuse_plain_ws {
        return Err(ApiError::forbidden(
            "plain ws:// is refused on a non-loopback address: put TLS in front or pass --allow-insecure-ws",
        ));
    }
    // A browser says where the page came from: only ours may attach (no cross-site
    // WebSocket hijacking). Other clients send no Origin.
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok())
        && !state.origin_allowed(origin)
    {
        tracing::warn!(origin, "refused a WebSocket upgrade from a foreign origin");
        return Err(ApiError::forbidden(format!(
            "pages from {origin} may not attach (see --allowed-origin)"
        )));
    }
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    // The first of ours the client offers is the one it prefers.
    let Some(subprotocol) = offered.iter().find_map(|p| {
        [SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON]
            .into_iter()
            .find(|o| o == p)
    }) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the Sec-WebSocket-Protocol header must include pty-ws.v1 or pty-ws.v1.binary",
        ));
    };
    let token = header_bearer(headers)
        .map(str::to_owned)
        .or_else(|| auth::bearer_from_subprotocols(offered.iter().copied()));
    let principal = auth::authenticate(&state.store, token.as_deref())
        .await
        .map_err(auth_error)?;
    let known = principal.sees_session(sid) && state.sessions.view(sid).await?.is_some();
    if !known {
        return Err(ApiError::not_found(format!("no session {sid}")));
    }
    state
        .limits
        .connection(&principal.token_id)
        .map_err(ApiError::rate_limited)?;
    let slot = state
        .limits
        .session_slot(sid)
        .map_err(ApiError::rate_limited)?;
    Ok((principal, subprotocol, slot))
}

type Sink = SplitSink<WebSocket, Message>;

/// Whether the connection goes on after a frame.
enum Flow {
    Continue,
    Stop,
}

/// What to do with a client frame before reading it.
enum Admit {
    Take,
    Skip,
    Stop,
}

/// Frames dropped by the rate limit, without a second's pause, before the connection closes.
const SUSTAINED_THROTTLING: u32 = 500;

/// A joined member: its session, id, live queue, and the guard that leaves on drop.
struct Membership {
    client_id: String,
    role: Role,
    out: mpsc::Receiver<Outbound>,
    _guard: LeaveOnDrop,
}

/// Leaves the session when the connection ends for any reason (RAII), so roles held by a
/// dropped, reaped or failed connection are always released.
struct LeaveOnDrop {
    handle: SessionHandle,
    client_id: Option<String>,
}

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.client_id.take() {
            self.handle.leave_now(id);
        }
    }
}

struct Connection {
    state: AppState,
    principal: Principal,
    session_id: String,
    service_parameters: Map<String, Value>,
    seen_first_frame: bool,
    member: Option<Membership>,
    /// `pty-ws.v1.binary`: output as `PW1O`, input also as `PW1I`.
    binary: bool,
    _slot: SessionSlot,
    /// Frames refused by the rate limit since the last second without a refusal.
    throttled: u32,
    last_throttled: Option<Instant>,
    span: tracing::Span,
    /// Answers and updates of A2A operations, which run beside the connection loop.
    task_frames: mpsc::Sender<String>,
    task_frames_rx: mpsc::Receiver<String>,
    /// Task streams this connection follows, by task id (or request id for a send); they
    /// stop when removed or when the connection ends.
    follows: HashMap<String, AbortOnDropHandle<()>>,
}

/// Task frames waiting for the socket before a stream follower waits too.
const TASK_FRAME_QUEUE: usize = 256;

impl Connection {
    fn new(
        state: AppState,
        principal: Principal,
        session_id: String,
        binary: bool,
        slot: SessionSlot,
    ) -> Connection {
        let span = tracing::info_span!(
            "pty_ws", session_id = %session_id, token_id = %principal.token_id,
            scope = %principal.scope, client_id = tracing::field::Empty,
            trace_id = tracing::field::Empty,
        );
        let (task_frames, task_frames_rx) = mpsc::channel(TASK_FRAME_QUEUE);
        Connection {
            state,
            principal,
            session_id,
            service_parameters: Map::new(),
            seen_first_frame: false,
            member: None,
            binary,
            _slot: slot,
            throttled: 0,
            last_throttled: None,
            span,
            task_frames,
            task_frames_rx,
            follows: HashMap::new(),
        }
    }

    async fn run(mut self, socket: WebSocket) {
        let span = self.span.clone();
        async move {
            let (mut sink, stream) = socket.split();
            tracing::info!("attached");
            if self.send(&mut sink, self.hello().await).await.is_ok() {
                self.serve(&mut sink, stream).await;
            }
            tracing::info!("detached");
        }
        .instrument(span)
        .await
    }

    async fn hello(&self) -> String {
        let current = match self.state.sessions.live(&self.session_id) {
            Some(h) => h.current_sequence(),
            None => self
                .state
                .sessions
                .view(&self.session_id)
                .await
                .ok()
                .flatten()
                .map_or(0, |v| v.row.last_sequence),
        };
        server_frame(
            "binding_hello",
            None,
            Some(0),
            json!({
                "binding_uri": wire::BINDING_URI,
                "binding_version": wire::BINDING_VERSION,
                "supported_operations": wire::CORE_OPERATIONS,
                "activated_extensions": [],
                "session": { "session_id": self.session_id, "current_sequence": current },
                "session_host": {
                    "supported_backends": host::backends(),
                    "default_backend": host::NATIVE,
                    "supported_classes": host::classes(),
                    "default_class": host::DIRECT,
                    "observe_supported": true,
                    "drive_supported": true,
                    "reattach_supported": true,
                },
                "flow_control": {
                    "extension": wire::FLOW_CONTROL_URI,
                    "ack_op": wire::OP_ACK,
                    "window_bytes": wire::FLOW_WINDOW_BYTES,
                    "resume_bytes": wire::FLOW_RESUME_BYTES,
                },
                "payload_mode": {
                    "binary": self.binary,
                    "binary_subprotocol": SUBPROTOCOL_BINARY,
                    "json_subprotocol": SUBPROTOCOL_JSON,
                },
            }),
        )
    }

    async fn serve(&mut self, sink: &mut Sink, mut stream: SplitStream<WebSocket>) {
        let (interval, timeout) = (self.state.heartbeat_interval, self.state.heartbeat_timeout);
        let mut heartbeat = tokio::time::interval_at(Instant::now() + interval, interval);
        let mut last_pong = Instant::now();
        let shutdown = self.state.shutdown.clone();
        loop {
            tokio::select! {
                biased;
                out = next_outbound(&mut self.member) => {
                    let reason = match out {
                        Some(Outbound::Frame(json)) => {
                            if self.send_bytes(sink, json).await.is_err() {
                                return;
                            }
                            continue;
                        }
                        Some(Outbound::Binary(frame)) => {
                            if self.send_message(sink, Message::Binary(frame)).await.is_err() {
                                return;
                            }
                            continue;
                        }
                        Some(Outbound::Goodbye(reason)) => reason,
                        None => "session_closed",
                    };
                    self.goodbye(sink, reason).await;
                    return;
                }
                Some(frame) = self.task_frames_rx.recv() => {
                    if self.send(sink, frame).await.is_err() {
                        return;
                    }
                }
                msg = stream.next() => {
                    if let Flow::Stop = self.on_message(sink, msg, &mut last_pong).await {
                        return;
                    }
                }
                _ = heartbeat.tick() => {
                    if last_pong.elapsed() > timeout {
                        tracing::info!(silent_secs = last_pong.elapsed().as_secs_f64(),
                            "no Pong within the heartbeat timeout; reaping the connection");
                        let _ = tokio::time::timeout(Duration::from_secs(1),
                            close(sink, 1011, "heartbeat timeout")).await;
                        return;
                    }
                    if self.send_message(sink, Message::Ping(Bytes::new())).await.is_err() {
                        return;
                    }
                }
                _ = shutdown.cancelled() => {
                    self.goodbye(sink, "server_shutdown").await;
                    return;
                }
            }
        }
    }

    /// One message from the client: admitted (size, rate), then handled by kind.
    async fn on_message(
        &mut self,
        sink: &mut Sink,
        msg: Option<Result<Message, axum::Error>>,
        last_pong: &mut Instant,
    ) -> Flow {
        let size = match &msg {
            Some(Ok(Message::Text(t))) => Some(t.len()),
            Some(Ok(Message::Binary(b))) => Some(b.len()),
            _ => None,
        };
        if let Some(size) = size {
            match self.admit(sink, size).await {
                Admit::Take => {}
                Admit::Skip => return Flow::Continue,
                Admit::Stop => return Flow::Stop,
            }
        }
        match msg {
            Some(Ok(Message::Text(text))) => self.on_text(sink, text.as_str()).await,
            Some(Ok(Message::Binary(frame))) => self.on_binary(sink, &frame).await,
            Some(Ok(Message::Pong(_))) => {
                *last_pong = Instant::now();
                Flow::Continue
            }
            Some(Ok(Message::Ping(_))) => Flow::Continue,
            Some(Ok(Message::Close(_))) | None => Flow::Stop,
            Some(Err(e)) => {
                tracing::info!(error = %e, "socket error");
                Flow::Stop
            }
        }
    }

    /// Whether to act on a client frame of `size` bytes: an oversized one ends the
    /// connection (1009); one over the rate limit is dropped with `RATE_LIMITED` (at most
    /// once a second), and a client that keeps sending past it is closed with 4429.
    async fn admit(&mut self, sink: &mut Sink, size: usize) -> Admit {
        if size > MAX_FRAME_BYTES {
            let m = format!("frames are limited to {MAX_FRAME_BYTES} bytes; this one has {size}");
            return self.fatal(sink, ErrorCode::InvalidRequest, &m, 1009).await;
        }
        let now = Instant::now();
        if self
            .last_throttled
            .is_some_and(|t| now.duration_since(t) > Duration::from_secs(1))
        {
            self.throttled = 0;
        }
        let Err(refused) = self.state.limits.frame(&self.principal.token_id) else {
            return Admit::Take;
        };
        self.throttled += 1;
        if self.throttled > SUSTAINED_THROTTLING {
            tracing::warn!("closing a connection that kept sending past its rate limit");
            return self
                .fatal(sink, ErrorCode::RateLimited, &refused.message, 4429)
                .await;
        }
        let notice_due = self
            .last_throttled
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1));
        self.last_throttled = Some(now);
        if notice_due {
            let mut payload = wire::error_payload(ErrorCode::RateLimited, &refused.message);
            payload["retry_after_ms"] = json!(refused.retry_after.as_millis() as u64);
            let frame = server_frame("Error", None, None, payload);
            if self.send(sink, frame).await.is_err() {
                return Admit::Stop;
            }
        }
        Admit::Skip
    }

    /// A final `Error` frame, then the close code.
    async fn fatal(
        &self,
        sink: &mut Sink,
        code: ErrorCode,
        message: &str,
        close_code: u16,
    ) -> Admit {
        if self
            .send(sink, error_frame(None, code, message))
            .await
            .is_ok()
        {
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                close(sink, close_code, code.as_str()),
            )
            .await;
        }
        Admit::Stop
    }

    /// Sends with a deadline: a peer that takes longer than the heartbeat timeout to take
    /// one frame is treated as gone.
    async fn send_message(&self, sink: &mut Sink, msg: Message) -> Result<(), ()> {
        match tokio::time::timeout(self.state.heartbeat_timeout, sink.send(msg)).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(()),
        }
    }

    async fn send(&self, sink: &mut Sink, text: String) -> Result<(), ()> {
        self.send_message(sink, Message::Text(text.into())).await
    }

    async fn send_bytes(&self, sink: &mut Sink, json: Bytes) -> Result<(), ()> {
        let text = Utf8Bytes::try_from(json).map_err(|_| ())?;
        self.send_message(sink, Message::Text(text)).await
    }

    async fn goodbye(&self, sink: &mut Sink, reason: &str) {
        let frame = server_frame("binding_goodbye", None, None, json!({ "reason": reason }));
        if self.send(sink, frame).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(2), close(sink, 1000, reason)).await;
        }
    }

    async fn refuse(
        &self,
        sink: &mut Sink,
        id: Option<String>,
        code: ErrorCode,
        message: &str,
    ) -> Flow {
        tracing::debug!(code = code.as_str(), message, "refused a client frame");
        match self.send(sink, error_frame(id, code, message)).await {
            Ok(()) => Flow::Continue,
            Err(()) => Flow::Stop,
        }
    }

    /// A binary frame: `PW1I` input under `pty-ws.v1.binary`, held to the same scope and
    /// role checks as `pty.session_input`.
    async fn on_binary(&mut self, sink: &mut Sink, frame: &[u8]) -> Flow {
        let input = match frame.strip_prefix(wire::BINARY_INPUT_MAGIC) {
            Some(data) if self.binary => data.to_vec(),
            _ => {
                let m = if self.binary {
                    "a binary frame must be PW1I input"
                } else {
                    "binary frames need the pty-ws.v1.binary subprotocol"
                };
                return self.refuse(sink, None, ErrorCode::InvalidRequest, m).await;
            }
        };
        match self
            .ask_member(Scope::Control, "input", |c, r| Command::Input(c, input, r))
            .await
        {
            Ok(()) => Flow::Continue,
            Err(refusal) => {
                self.refuse(sink, None, refusal.code, &refusal.message)
                    .await
            }
        }
    }

    async fn on_text(&mut self, sink: &mut Sink, text: &str) -> Flow {
        let decoded = ClientOp::decode(text);
        let (env, op, session_ref) = match decoded {
            Ok(d) => (d.envelope, d.op, d.session_id),
            Err((id, DecodeError::Invalid(m))) => {
                return self.refuse(sink, id, ErrorCode::InvalidRequest, &m).await;
            }
            Err((id, DecodeError::Unsupported(op))) => {
                // Binding §4.7: push configs are control-plane operations, served elsewhere.
                let m = if op.contains("PushNotificationConfig") {
                    format!(
                        "{op} is not carried on pty-ws/v1: use the HTTP+JSON or JSON-RPC interface of the AgentCard"
                    )
                } else {
                    format!("unknown op {op:?}")
                };
                return self
                    .refuse(sink, id, ErrorCode::UnsupportedOperation, &m)
                    .await;
            }
        };
        if !self.seen_first_frame {
            self.seen_first_frame = true;
            if let Some(p) = env.service_parameters.clone() {
                self.set_service_parameters(p);
            }
        }
        if session_ref.as_deref().is_some_and(|s| s != self.session_id) {
            return self
                .refuse(
                    sink,
                    Some(env.id),
                    ErrorCode::PermissionDenied,
                    "this connection is bound to another session",
                )
                .await;
        }
        let id = env.id.clone();
        let result = match op {
            ClientOp::Task(op) => {
                self.task_op(env.id, op);
                return Flow::Continue;
            }
            ClientOp::Join(join) => return self.join(sink, env, join).await,
            ClientOp::Leave => return self.leave(sink).await,
            ClientOp::Ping(ping) => {
                let pong = Pong {
                    client_ts: ping.client_ts,
                    server_ts: clock::now_rfc3339(),
                };
                let frame = server_frame(
                    "pong",
                    Some(id),
                    None,
                    serde_json::to_value(pong).unwrap_or_default(),
                );
                return self.flow(self.send(sink, frame).await);
            }
            ClientOp::UpdateServiceParameters(u) => {
                self.set_service_parameters(u.service_parameters);
                let frame = server_frame(
                    "UpdateServiceParameters.Response",
                    Some(id),
                    None,
                    json!({}),
                );
                return self.flow(self.send(sink, frame).await);
            }
            ClientOp::Input(data) => {
                self.ask_member(Scope::Control, "input", |c, r| Command::Input(c, data, r))
                    .await
            }
            ClientOp::Resize(size) => {
                self.ask_member(Scope::Control, "resize", |c, r| {
                    Command::Resize(c, size.cols.0, size.rows.0, r)
                })
                .await
            }
            ClientOp::RequestRole(role) => {
                let needed = if role == Role::Controller {
                    Scope::Control
                } else {
                    Scope::Observe
                };
                self.ask_member(needed, "the controller role", |c, r| {
                    Command::RequestRole(c, role, r)
                })
                .await
            }
            ClientOp::ReleaseRole => {
                self.ask_member(Scope::Observe, "", |c, r| {
                    Command::RequestRole(c, Role::Observer, r)
                })
                .await
            }
            ClientOp::RequestKeyframe => {
                self.ask_member(Scope::Observe, "", Command::RequestKeyframe)
                    .await
            }
            ClientOp::Ack(ack) => {
                self.ask_member(Scope::Observe, "", |c, r| Command::Ack(c, ack.sequence, r))
                    .await
            }
        };
        match result {
            Ok(()) => Flow::Continue,
            Err(refusal) => {
                self.refuse(sink, Some(id), refusal.code, &refusal.message)
                    .await
            }
        }
    }

    /// Runs an A2A operation beside the connection loop (a blocking SendMessage must not
    /// hold up the terminal); its answer, and a stream's updates, come back as frames.
    fn task_op(&mut self, request_id: String, op: TaskOp) {
        let ctx = TaskContext {
            state: self.state.clone(),
            principal: self.principal.clone(),
            session_id: self.session_id.clone(),
            service_parameters: self.service_parameters.clone(),
            frames: self.task_frames.clone(),
            request_id: request_id.clone(),
        };
        let follow_key = match &op {
            TaskOp::Unsubscribe(r) => {
                self.follows.remove(&r.task_id);
                let frame = server_frame("Unsubscribe.Response", Some(request_id), None, json!({}));
                let _ = self.task_frames.try_send(frame);
                return;
            }
            TaskOp::SubscribeToTask(r) => Some(r.task_id.clone()),
            TaskOp::SendStreamingMessage(_) => Some(request_id),
            _ => None,
        };
        let work = tokio::spawn(ctx.run(op).instrument(self.span.clone()));
        if let Some(key) = follow_key {
            self.follows.insert(key, AbortOnDropHandle::new(work));
        }
    }

    fn flow(&self, sent: Result<(), ()>) -> Flow {
        if sent.is_ok() {
            Flow::Continue
        } else {
            Flow::Stop
        }
    }

    fn set_service_parameters(&mut self, params: Map<String, Value>) {
        if let Some(trace) = params.get("trace_id").and_then(Value::as_str) {
            self.span.record("trace_id", trace);
        }
        self.service_parameters = params;
    }

    /// Asks the session on behalf of the joined member, after the binding's scope check.
    async fn ask_member(
        &self,
        needed: Scope,
        what: &str,
        make: impl FnOnce(String, tokio::sync::oneshot::Sender<Result<(), Refusal>>) -> Command,
    ) -> Result<(), Refusal> {
        let member = self
            .member
            .as_ref()
            .ok_or_else(|| Refusal::new(ErrorCode::InvalidRequest, "join the session first"))?;
        let result = if self.principal.scope < needed {
            Err(Refusal::new(
                ErrorCode::PermissionDenied,
                format!(
                    "{what} needs {needed}; this token has {}",
                    self.principal.scope
                ),
            ))
        } else {
            member
                ._guard
                .handle
                .ask(|reply| make(member.client_id.clone(), reply))
                .await
                .unwrap_or_else(|| Err(Refusal::new(ErrorCode::Internal, "the session has ended")))
        };
        if let Err(refusal) = &result
            && refusal.code == ErrorCode::PermissionDenied
        {
            self.state.audit.record(
                audit::Record::new(audit::Event::WriteDenied, &self.session_id)
                    .by(&self.principal.token_id)
                    .client(&member.client_id)
                    .detail(json!({ "what": what, "reason": refusal.message })),
            );
        }
        result
    }

    async fn join(&mut self, sink: &mut Sink, env: Envelope, join: JoinSession) -> Flow {
        let id = Some(env.id.clone());
        if self.member.is_some() {
            return self
                .refuse(sink, id, ErrorCode::InvalidRequest, "already joined")
                .await;
        }
        if let Err(e) = sessions::check_host(
            join.session_backend.as_deref(),
            join.session_class.as_deref(),
            self.state.sessions.settings(),
        ) {
            return self
                .refuse(sink, id, ErrorCode::UnsupportedOperation, &e.to_string())
                .await;
        }
        let Some(role) = join.role else {
            return self
                .refuse(
                    sink,
                    id,
                    ErrorCode::InvalidRequest,
                    "pty.join_session: role is required",
                )
                .await;
        };
        let size = match (join.terminal_size, join.cols, join.rows) {
            (Some(t), _, _) => Some((t.cols.0, t.rows.0)),
            (None, Some(c), Some(r)) => Some((c.0, r.0)),
            (None, None, None) => None,
            _ => {
                return self
                    .refuse(
                        sink,
                        id,
                        ErrorCode::InvalidRequest,
                        "give both cols and rows",
                    )
                    .await;
            }
        };
        if join
            .client_label
            .as_ref()
            .is_some_and(|l| l.chars().count() > 128)
        {
            return self
                .refuse(
                    sink,
                    id,
                    ErrorCode::InvalidRequest,
                    "client_label is longer than 128 characters",
                )
                .await;
        }
        let Some(handle) = self.state.sessions.live(&self.session_id) else {
            return self.replay_closed(sink, id, env.replay_from).await;
        };
        let (out_tx, out) = sessions::viewer_queue();
        let request = JoinRequest {
            role,
            scope: self.principal.scope,
            label: join.client_label.or_else(|| self.principal.label.clone()),
            replay_from: env.replay_from,
            size,
            out: out_tx,
            binary: self.binary,
        };
        let joined = match handle.ask(|r| Command::Join(request, r)).await {
            None => return self.replay_closed(sink, id, env.replay_from).await,
            Some(Err(refusal)) => {
                return self.refuse(sink, id, refusal.code, &refusal.message).await;
            }
            Some(Ok(joined)) => joined,
        };
        self.span.record("client_id", joined.client_id.as_str());
        self.member = Some(Membership {
            client_id: joined.client_id.clone(),
            role: joined.role,
            out,
            _guard: LeaveOnDrop {
                handle,
                client_id: Some(joined.client_id.clone()),
            },
        });
        tracing::info!(role = ?joined.role, "joined");
        if joined.role == Role::Observer {
            self.state.audit.record(
                audit::Record::new(audit::Event::ObserverJoined, &self.session_id)
                    .by(&self.principal.token_id)
                    .client(&joined.client_id),
            );
        }
        let flushed = self.initial_flush(sink, id, joined).await;
        self.flow(flushed)
    }

    /// The joiner's first frames: `RoleAssigned`, any replay, then keyframe and membership.
    async fn initial_flush(
        &self,
        sink: &mut Sink,
        id: Option<String>,
        joined: Joined,
    ) -> Result<(), ()> {
        self.send_bytes(sink, joined.first).await?;
        match joined.replay {
            Replay::None => {}
            Replay::OutOfRange { floor, current } => {
                let m = replay_out_of_range(floor, current);
                self.send(sink, error_frame(id, ErrorCode::ReplayOutOfRange, &m))
                    .await?;
            }
            Replay::Range { store, ring } => {
                if let Some((after, before)) = store {
                    let frames = self
                        .state
                        .store
                        .frames_between(&self.session_id, after, before)
                        .await
                        .map_err(|e| tracing::error!(error = %e, "reading replay failed"))?;
                    for f in frames {
                        self.send_bytes(sink, envelope(&f)).await?;
                    }
                }
                for f in ring {
                    self.send_bytes(sink, envelope(&f)).await?;
                }
            }
        }
        for json in joined.rest {
            self.send_bytes(sink, json).await?;
        }
        Ok(())
    }

    /// A session that has ended is served from the store: its replay (or its final
    /// keyframe and `Closed`), then goodbye.
    async fn replay_closed(
        &self,
        sink: &mut Sink,
        id: Option<String>,
        replay_from: Option<u64>,
    ) -> Flow {
        let store = &self.state.store;
        let sid = &self.session_id;
        let result: anyhow::Result<()> = async {
            let (last, floor) = store
                .session(sid)
                .await?
                .map_or((0, 0), |r| (r.last_sequence, r.replay_floor));
            let frames = match replay_from {
                Some(after) if after <= last && after >= floor => {
                    store.frames_between(sid, after, last + 1).await?
                }
                Some(_) => {
                    let m = replay_out_of_range(floor, last);
                    let _ = self
                        .send(
                            sink,
                            error_frame(id.clone(), ErrorCode::ReplayOutOfRange, &m),
                        )
                        .await;
                    store.frames_from_last_keyframe(sid).await?
                }
                None => store.frames_from_last_keyframe(sid).await?,
            };
            for f in frames {
                self.send_bytes(sink, envelope(&f))
                    .await
                    .map_err(|()| anyhow::anyhow!("send failed"))?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::info!(error = %e, "replaying a closed session stopped");
            return Flow::Stop;
        }
        self.goodbye(sink, "session_closed").await;
        Flow::Stop
    }

    async fn leave(&mut self, sink: &mut Sink) -> Flow {
        if let Some(mut member) = self.member.take() {
            let client_id = member._guard.client_id.take().unwrap_or_default();
            let last = member
                ._guard
                .handle
                .ask(|r| Command::Leave(client_id, Some(r)))
                .await;
            if let Some(frame) = last {
                let _ = self.send_bytes(sink, frame).await;
            }
            tracing::info!(role = ?member.role, "left");
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), close(sink, 1000, "left")).await;
        Flow::Stop
    }
}

/// What an A2A operation on this connection needs, apart from the connection.
struct TaskContext {
    state: AppState,
    principal: Principal,
    session_id: String,
    service_parameters: Map<String, Value>,
    frames: mpsc::Sender<String>,
    request_id: String,
}

impl TaskContext {
    async fn run(self, op: TaskOp) {
        let tasks = &self.state.tasks;
        let extensions = match super::activate_parameters(tasks, &self.service_parameters) {
            Ok(uris) => uris,
            Err(e) => {
                if !matches!(op, TaskOp::Unsubscribe(_)) {
                    let _ = self
                        .frames
                        .send(a2a_error_frame(&self.request_id, &e))
                        .await;
                }
                return;
            }
        };
        let via = Via {
            version: Version::V1,
            extensions: &extensions,
        };
        let answer = match op {
            TaskOp::SendMessage(mut req) => match self.bind(&mut req.message) {
                Ok(()) => tasks
                    .send(&self.principal, *req, via)
                    .await
                    .map(|sent| ("SendMessage.Response", json!(sent))),
                Err(e) => Err(e),
            },
            TaskOp::GetTask(r) => self
                .task(&r.task_id, r.history_length)
                .await
                .map(|t| ("GetTask.Response", json!({ "task": t }))),
            TaskOp::CancelTask(r) => match self.task(&r.task_id, None).await {
                Ok(_) => tasks
                    .cancel(&self.principal, &r.task_id)
                    .await
                    .map(|t| ("CancelTask.Response", json!({ "task": t }))),
                Err(e) => Err(e),
            },
            TaskOp::ListTasks(p) => {
                let mut req = p.filter.unwrap_or_default();
                req.context_id = Some(self.session_id.clone());
                req.page_size = p.page_size.or(req.page_size);
                req.page_token = p.page_token.or(req.page_token);
                tasks.list(&self.principal, req).await.map(|page| {
                    let body =
                        json!({ "tasks": page.tasks, "next_page_token": page.next_page_token });
                    ("ListTasks.Response", body)
                })
            }
            TaskOp::SendStreamingMessage(mut req) => {
                let started = match self.bind(&mut req.message) {
                    Ok(()) => tasks.send_stream(&self.principal, *req, via).await,
                    Err(e) => Err(e),
                };
                return self.follow(started, "SendStreamingMessage.Accepted").await;
            }
            TaskOp::SubscribeToTask(r) => {
                let started = match self.task(&r.task_id, None).await {
                    Ok(_) => tasks.subscribe(&self.principal, &r.task_id).await,
                    Err(e) => Err(e),
                };
                return self.follow(started, "SubscribeToTask.Accepted").await;
            }
            TaskOp::Unsubscribe(_) => return,
        };
        let frame = match answer {
            Ok((op, payload)) => server_frame(op, Some(self.request_id.clone()), None, payload),
            Err(e) => a2a_error_frame(&self.request_id, &e),
        };
        let _ = self.frames.send(frame).await;
    }

    /// A message on this connection belongs to its session: no contextId means this one,
    /// another one is refused.
    fn bind(&self, message: &mut wire::a2a::Message) -> Result<(), A2aError> {
        match &message.context_id {
            Some(c) if *c != self.session_id => Err(A2aError::PermissionDenied(
                "this connection is bound to another session".into(),
            )),
            _ => {
                message.context_id = Some(self.session_id.clone());
                Ok(())
            }
        }
    }

    /// A task of this connection's session; any other is "not found".
    async fn task(&self, id: &str, history_length: Option<u32>) -> Result<Task, A2aError> {
        let task = self
            .state
            .tasks
            .get(&self.principal, id, history_length)
            .await?;
        if task.context_id != self.session_id {
            return Err(A2aError::TaskNotFound(id.to_owned()));
        }
        Ok(task)
    }

    /// Acknowledges a stream, then forwards each update as a `TaskStatusUpdate` frame
    /// carrying the task as it now is, the event, and the connection's service parameters.
    async fn follow(&self, started: Result<TaskStream, A2aError>, accepted: &str) {
        let stream = match started {
            Ok(s) => s,
            Err(e) => {
                let _ = self
                    .frames
                    .send(a2a_error_frame(&self.request_id, &e))
                    .await;
                return;
            }
        };
        let ack = if accepted == "SubscribeToTask.Accepted" {
            let current = self
                .state
                .sessions
                .live(&self.session_id)
                .map_or(0, |h| h.current_sequence());
            json!({ "current_sequence": current })
        } else {
            json!({ "task_id": stream.first.id })
        };
        if self
            .frames
            .send(server_frame(
                accepted,
                Some(self.request_id.clone()),
                None,
                ack,
            ))
            .await
            .is_err()
        {
            return;
        }
        let mut task = stream.first.clone();
        let mut events = std::pin::pin!(stream.into_events());
        while let Some(event) = events.next().await {
            let frame = match event {
                Ok(event) => {
                    apply(&mut task, &event);
                    let mut env = Envelope::new(
                        "TaskStatusUpdate",
                        uuid::Uuid::now_v7().to_string(),
                        clock::now_rfc3339(),
                        json!({ "task": task, "delta": event, "task_id": task.id }),
                    );
                    env.service_parameters =
                        Some(self.service_parameters.clone()).filter(|p| !p.is_empty());
                    env.to_text()
                }
                Err(e) => a2a_error_frame(&self.request_id, &e),
            };
            if self.frames.send(frame).await.is_err() {
                return;
            }
        }
    }
}

/// Keeps a stream's task current: its status, and the artifact chunks appended.
fn apply(task: &mut Task, event: &StreamResponse) {
    match event {
        StreamResponse::Task(t) => *task = t.clone(),
        StreamResponse::StatusUpdate(u) => task.status = u.status.clone(),
        StreamResponse::ArtifactUpdate(u) => {
            let artifacts = task.artifacts.get_or_insert_with(Vec::new);
            match artifacts
                .iter_mut()
                .find(|a| a.artifact_id == u.artifact.artifact_id)
            {
                Some(a) if u.append => a.parts.extend(u.artifact.parts.iter().cloned()),
                Some(a) => *a = u.artifact.clone(),
                None => artifacts.push(u.artifact.clone()),
            }
        }
        StreamResponse::Message(_) => {}
    }
}

/// An A2A error as a binding `Error` frame: the binding code, and the canonical error
/// (google.rpc.Status with its ErrorInfo) in `a2a_error`.
fn a2a_error_frame(request_id: &str, e: &A2aError) -> String {
    let code = match e {
        A2aError::TaskNotFound(_) | A2aError::PushConfigNotFound { .. } => ErrorCode::TaskNotFound,
        A2aError::TaskNotCancelable(_) => ErrorCode::TaskNotCancelable,
        A2aError::InvalidRequest(_) | A2aError::InvalidParams(_) | A2aError::Commerce(_) => {
            ErrorCode::InvalidRequest
        }
        A2aError::Unauthenticated(_) => ErrorCode::Unauthenticated,
        A2aError::PermissionDenied(_) => ErrorCode::PermissionDenied,
        A2aError::StreamLagged(_) | A2aError::Internal => ErrorCode::Internal,
        A2aError::UnsupportedOperation(_)
        | A2aError::ExtendedCardNotConfigured
        | A2aError::MethodNotFound(_)
        | A2aError::VersionNotSupported(_)
        | A2aError::ExtensionSupportRequired(_)
        | A2aError::ContentTypeNotSupported(_) => ErrorCode::UnsupportedOperation,
    };
    let mut payload = wire::error_payload(code, &e.to_string());
    payload["a2a_error"] = e.status_body()["error"].clone();
    server_frame("Error", Some(request_id.to_owned()), None, payload)
}

async fn next_outbound(member: &mut Option<Membership>) -> Option<Outbound> {
    match member {
        Some(m) => m.out.recv().await,
        None => std::future::pending().await,
    }
}

async fn close(sink: &mut Sink, code: u16, reason: &str) -> Result<(), axum::Error> {
    sink.send(Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    })))
    .await
}

fn replay_out_of_range(floor: u64, current: u64) -> String {
    format!(
        "replay_from is outside the retained window: frames after sequence {floor} are retained, up to {current}"
    )
}

/// A binding-level frame (not a session frame): hello, goodbye, responses, errors.
fn server_frame(op: &str, id: Option<String>, sequence: Option<u64>, payload: Value) -> String {
    let mut env = Envelope::new(
        op,
        id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        clock::now_rfc3339(),
        payload,
    );
    env.sequence = sequence;
    env.to_text()
}

fn error_frame(id: Option<String>, code: ErrorCode, message: &str) -> String {
    server_frame("Error", id, None, wire::error_payload(code, message))
}
