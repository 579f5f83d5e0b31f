//! One pty-ws connection: the frame loop, admission (rate limits, sizes), heartbeats and
//! the membership it holds.

mod join;
mod send;
use send::{close, finish};
use tracing::Instrument;
use wire::server::{
    BindingHello, Done, FlowControl, HelloSession, PayloadMode, ServerInfo, ServerOp, SessionHost,
};

mod inbound;
mod tasks;
#[cfg(test)]
mod tests;

use std::pin::Pin;

use super::executor::Dialect;
use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Map;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::Utf8Bytes;
use tokio_util::task::AbortOnDropHandle;
use wire::ErrorCode;
use wire::Role;
use wire::SUBPROTOCOL_BINARY;
use wire::SUBPROTOCOL_JSON;
use wire::TaskOp;

use super::server_frame;
use crate::auth::Principal;
use crate::limits::SessionSlot;
use crate::revocation::Lease;
use crate::sessions::SessionCommand;
use crate::sessions::SessionHandle;
use crate::sessions::host;
use crate::sessions::{ClientId, Outbound, SessionId};
use crate::state::AppState;
use crate::websocket::Socket;
use tasks::TaskContext;
use tokio_tungstenite::tungstenite::Error as WsError;

/// Where frames to the client go, and where its frames come from: a WebSocket's halves,
/// or channels in the unit tests.
type Sink = Pin<Box<dyn futures_util::Sink<Message, Error = WsError> + Send>>;
type Stream = Pin<Box<dyn futures_util::Stream<Item = Result<Message, WsError>> + Send>>;

/// Whether the connection goes on after a frame.
enum Next {
    Continue,
    Stop,
}

/// The connection cannot go on: the peer did not take a frame within the heartbeat
/// timeout, the socket failed, or the replay it asked for could not be read.
struct Ended;

/// What to do with a client frame before reading it.
enum Admit {
    Take,
    Skip,
    Stop,
}

/// Output queued longer than this is stale: the connection skips it and the session sends
/// `PTY_OUTPUT_LAGGED` and a fresh keyframe instead.
const MAX_LAG: Duration = Duration::from_secs(2);

/// Frames dropped by the rate limit, without a second's pause, before the connection closes.
const SUSTAINED_THROTTLING: u32 = 500;

/// A joined member: its session, id, live queue, and the guard that leaves on drop.
struct Membership {
    client_id: String,
    role: Role,
    out: mpsc::Receiver<Outbound>,
    guard: LeaveOnDrop,
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

pub(super) struct Connection {
    state: AppState,
    principal: Principal,
    session_id: SessionId,
    service_parameters: Map<String, Value>,
    seen_first_frame: bool,
    member: Option<Membership>,
    /// `pty-ws.v1.binary`: output as `PW1O`, input also as `PW1I`.
    binary: bool,
    /// The shape of its frames: the spec's, or the agentic-sandbox executor's.
    dialect: Dialect,
    /// The executor's resume: the `replay_from` of the attach URL.
    resume: Option<u64>,
    _slot: SessionSlot,
    /// Cut when the token that authenticated the connection is revoked or expires.
    lease: Lease,
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
    pub(super) fn new(
        state: AppState,
        principal: Principal,
        session_id: SessionId,
        binary: bool,
        slot: SessionSlot,
    ) -> Connection {
        let span = tracing::info_span!(
            "pty_ws", session_id = %session_id, token_id = %principal.token_id,
            scope = %principal.scope, client_id = tracing::field::Empty,
            trace_id = tracing::field::Empty,
        );
        let (task_frames, task_frames_rx) = mpsc::channel(TASK_FRAME_QUEUE);
        let lease = (state.revocations).lease(&principal, "pty-ws", Some(&session_id));
        Connection {
            state,
            principal,
            session_id,
            service_parameters: Map::new(),
            seen_first_frame: false,
            member: None,
            binary,
            dialect: Dialect::Spec,
            resume: None,
            _slot: slot,
            lease,
            throttled: 0,
            last_throttled: None,
            span,
            task_frames,
            task_frames_rx,
            follows: HashMap::new(),
        }
    }

    /// A connection whose URL asks to resume after `replay_from` (the executor's clients
    /// do; it speaks their shape from its first frame).
    pub(super) fn resuming(mut self, replay_from: Option<u64>) -> Connection {
        if replay_from.is_some() {
            self.dialect = Dialect::Executor;
        }
        self.resume = replay_from;
        self
    }

    pub(super) async fn run(self, socket: Socket) {
        let (sink, stream) = socket.split();
        self.over(Box::pin(sink), Box::pin(stream)).await
    }

    /// The connection over any sink and stream of WebSocket messages.
    async fn over(mut self, mut sink: Sink, mut stream: Stream) {
        let span = self.span.clone();
        async move {
            tracing::info!("attached");
            if self.send(&mut sink, self.hello().await).await.is_ok()
                && let Next::Continue = self.resume_after_hello(&mut sink).await
            {
                self.serve(&mut sink, &mut stream).await;
            }
            // Roles, the session slot and task streams are let go before the socket's close
            // handshake, which may wait for a slow client.
            drop(self);
            finish(&mut sink, &mut stream).await;
            drop((sink, stream));
            crate::sys::release_memory_soon();
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
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        let hello = BindingHello {
            binding_uri: wire::BINDING_URI.into(),
            binding_version: wire::BINDING_VERSION.into(),
            supported_operations: strings(&wire::CORE_OPERATIONS),
            activated_extensions: Vec::new(),
            session: HelloSession {
                session_id: self.session_id.to_string(),
                current_sequence: current,
            },
            session_host: SessionHost {
                supported_backends: strings(&host::backends()),
                default_backend: host::NATIVE.into(),
                supported_classes: strings(&host::classes()),
                default_class: host::DIRECT.into(),
                observe_supported: true,
                drive_supported: true,
                reattach_supported: true,
            },
            flow_control: FlowControl {
                extension: wire::FLOW_CONTROL_URI.into(),
                ack_op: wire::OP_ACK.into(),
                window_bytes: wire::FLOW_WINDOW_BYTES as u64,
                min_window_bytes: wire::MIN_WINDOW_BYTES as u64,
                resume_bytes: wire::FLOW_RESUME_BYTES as u64,
            },
            payload_mode: PayloadMode {
                binary: self.binary,
                binary_subprotocol: SUBPROTOCOL_BINARY.into(),
                json_subprotocol: SUBPROTOCOL_JSON.into(),
            },
            server_info: ServerInfo {
                name: "ptyhost".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        };
        server_frame(None, Some(0), ServerOp::Hello(Box::new(hello)))
    }

    async fn serve(&mut self, sink: &mut Sink, stream: &mut Stream) {
        let (interval, timeout) = (self.state.heartbeat_interval, self.state.heartbeat_timeout);
        let mut heartbeat = tokio::time::interval_at(Instant::now() + interval, interval);
        let mut last_pong = Instant::now();
        let mut last_sent = Instant::now();
        let shutdown = self.state.shutdown.clone();
        loop {
            tokio::select! {
                biased;
                out = next_outbound(&mut self.member) => {
                    let reason = match out {
                        Some(stale @ Outbound::Output { queued, .. }) if queued.elapsed() > MAX_LAG => {
                            match self.skip_stale(sink, stale).await {
                                Ok(None) => continue,
                                Ok(Some(reason)) => reason,
                                Err(Ended) => return,
                            }
                        }
                        Some(Outbound::Goodbye(reason)) => reason,
                        None => "session_closed",
                        Some(out) => {
                            if self.deliver(sink, out).await.is_err() {
                                return;
                            }
                            last_sent = Instant::now();
                            continue;
                        }
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
                    if let Next::Stop = self.on_message(sink, msg, &mut last_pong).await {
                        return;
                    }
                }
                _ = heartbeat.tick() => {
                    // Alive is a Pong, or a frame the socket took: a slow reader's Pongs wait
                    // behind what it has not read yet.
                    if last_pong.elapsed() > timeout && last_sent.elapsed() > timeout {
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
                cut = self.lease.cut() => {
                    tracing::info!(reason = cut.message(), "cutting the connection");
                    self.fatal(sink, ErrorCode::Unauthenticated, cut.message(), 4401).await;
                    return;
                }
                _ = shutdown.cancelled() => {
                    self.goodbye(sink, "server_shutdown").await;
                    return;
                }
            }
        }
    }

    /// Runs an A2A operation beside the connection loop (a blocking SendMessage must not
    /// hold up the terminal); its answer, and a stream's updates, come back as frames.
    fn task_op(&mut self, request_id: String, replay_from: Option<u64>, op: TaskOp) {
        let ctx = TaskContext {
            state: self.state.clone(),
            principal: self.principal.clone(),
            session_id: self.session_id.clone(),
            member: self.member.as_ref().map(|m| m.client_id.clone()),
            service_parameters: self.service_parameters.clone(),
            frames: self.task_frames.clone(),
            request_id: request_id.clone(),
            replay_from,
        };
        let follow_key = match &op {
            TaskOp::Unsubscribe(r) => {
                self.follows.remove(&r.task_id);
                let frame = server_frame(Some(request_id), None, ServerOp::Unsubscribed(Done {}));
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

    /// Sends one queued frame: output as this connection takes it (`OutputEncoding`), a
    /// session frame, or the newest membership list.
    async fn deliver(&self, sink: &mut Sink, out: Outbound) -> Result<(), Ended> {
        match out {
            Outbound::Frame(json) => self.send_bytes(sink, json).await,
            Outbound::Output {
                frame,
                binary: true,
                ..
            } => self.send_message(sink, Message::Binary(frame)).await,
            Outbound::Output { frame, .. } => {
                let text = Utf8Bytes::try_from(frame).map_err(|_| Ended)?;
                self.send_message(sink, Message::Text(text)).await
            }
            Outbound::Membership(slot) => {
                let json = slot.lock().unwrap().take();
                match json {
                    Some(json) => self.send_bytes(sink, json).await,
                    None => Ok(()),
                }
            }
            Outbound::Goodbye(_) => Ok(()),
        }
    }

    /// Drops `stale` output and the output queued behind it, sends the frames among it
    /// that are not output (membership, roles, sizes) in order, then asks the session for
    /// `PTY_OUTPUT_LAGGED` and a keyframe. When the session has ended meanwhile (its
    /// goodbye is queued), there is no live screen to catch up with and no session to ask:
    /// the viewer gets everything it was behind on, every byte, then the goodbye, whose
    /// reason this returns.
    async fn skip_stale(
        &mut self,
        sink: &mut Sink,
        stale: Outbound,
    ) -> Result<Option<&'static str>, Ended> {
        let Some(member) = self.member.as_mut() else {
            return Ok(None);
        };
        let mut queued = vec![stale];
        let mut goodbye = None;
        while let Ok(out) = member.out.try_recv() {
            if let Outbound::Goodbye(reason) = out {
                goodbye = Some(reason);
                break;
            }
            queued.push(out);
        }
        let (client_id, handle) = (member.client_id.clone(), member.guard.handle.clone());
        if goodbye.is_some() {
            for out in queued {
                self.deliver(sink, out).await?;
            }
            return Ok(goodbye);
        }
        let (skipped, kept): (Vec<_>, Vec<_>) =
            (queued.into_iter()).partition(|out| matches!(out, Outbound::Output { .. }));
        tracing::debug!(skipped = skipped.len(), "a slow viewer skips stale output");
        for out in kept {
            self.deliver(sink, out).await?;
        }
        handle
            .tell(SessionCommand::Resync(ClientId(client_id)))
            .await;
        Ok(None)
    }

    fn next(&self, sent: Result<(), Ended>) -> Next {
        if sent.is_ok() {
            Next::Continue
        } else {
            Next::Stop
        }
    }

    fn set_service_parameters(&mut self, params: Map<String, Value>) {
        if let Some(trace) = params.get("trace_id").and_then(Value::as_str) {
            self.span.record("trace_id", trace);
        }
        self.service_parameters = params;
    }
}

async fn next_outbound(member: &mut Option<Membership>) -> Option<Outbound> {
    match member {
        Some(m) => m.out.recv().await,
        None => std::future::pending().await,
    }
}
