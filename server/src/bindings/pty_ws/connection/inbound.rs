//! What the client sends: each message admitted (its size, the member's rate), then
//! decoded by kind (binary input, JSON operations) and handed to the session or the task
//! service.

use std::time::Duration;
use wire::server::{Done, ErrorPayload, ServerOp};

use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message;
use wire::{ClientOp, DecodeError, ErrorCode, Pong, Role};

use super::send::close_for;
use super::{Admit, Connection, Ended, Next, SUSTAINED_THROTTLING, Sink};
use crate::auth::Scope;
use crate::bindings::pty_ws::executor::Dialect;
use crate::bindings::pty_ws::{
    MAX_FRAME_BYTES, error_frame, error_frame_of, executor, server_frame,
};
use crate::clock;
use crate::sessions::SessionCommand;

impl Connection {
    /// One message from the client: admitted (size, rate), then handled by kind.
    pub(super) async fn on_message(
        &mut self,
        sink: &mut Sink,
        msg: Option<Result<Message, WsError>>,
        last_pong: &mut Instant,
    ) -> Next {
        let size = match &msg {
            Some(Ok(Message::Text(t))) => Some(t.len()),
            Some(Ok(Message::Binary(b))) => Some(b.len()),
            _ => None,
        };
        if let Some(size) = size {
            match self.admit(sink, size).await {
                Admit::Take => {}
                Admit::Skip => return Next::Continue,
                Admit::Stop => return Next::Stop,
            }
        }
        match msg {
            Some(Ok(Message::Text(text))) => self.on_text(sink, text.as_str()).await,
            Some(Ok(Message::Binary(frame))) => self.on_binary(sink, &frame).await,
            Some(Ok(Message::Pong(_))) => {
                *last_pong = Instant::now();
                Next::Continue
            }
            // Reading never yields raw frames: the library joins fragments into messages.
            Some(Ok(Message::Ping(_) | Message::Frame(_))) => Next::Continue,
            Some(Ok(Message::Close(_))) | None => Next::Stop,
            Some(Err(e)) => {
                tracing::info!(error = %e, "socket error");
                if let Some((close_code, message)) = close_for(&e) {
                    self.fatal(sink, ErrorCode::InvalidRequest, &message, close_code)
                        .await;
                }
                Next::Stop
            }
        }
    }

    /// Whether to act on a client frame of `size` bytes: an oversized one ends the
    /// connection (1009); one over the rate limit is dropped with `RATE_LIMITED` (at most
    /// once a second), and a client that keeps sending past it is closed with 4429.
    pub(super) async fn admit(&mut self, sink: &mut Sink, size: usize) -> Admit {
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
            let mut error = ErrorPayload::new(ErrorCode::RateLimited, &refused.message);
            error.retry_after_ms = Some(refused.retry_after.as_millis() as u64);
            let frame = error_frame_of(None, error);
            if self.send(sink, frame).await.is_err() {
                return Admit::Stop;
            }
        }
        Admit::Skip
    }

    pub(super) async fn refuse(
        &self,
        sink: &mut Sink,
        id: Option<String>,
        code: ErrorCode,
        message: &str,
    ) -> Next {
        tracing::debug!(code = code.as_str(), message, "refused a client frame");
        match self.send(sink, error_frame(id, code, message)).await {
            Ok(()) => Next::Continue,
            Err(Ended) => Next::Stop,
        }
    }

    /// A binary frame: `PW1I` input under `pty-ws.v1.binary`, held to the same scope and
    /// role checks as `pty.session_input`.
    pub(super) async fn on_binary(&mut self, sink: &mut Sink, frame: &[u8]) -> Next {
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
            .ask_member(Scope::Control, "input", |c, r| {
                SessionCommand::Input(c, input, r)
            })
            .await
        {
            Ok(()) => Next::Continue,
            Err(refusal) => {
                self.refuse(sink, None, refusal.code, &refusal.message)
                    .await
            }
        }
    }

    pub(super) async fn on_text(&mut self, sink: &mut Sink, text: &str) -> Next {
        if !self.seen_first_frame && self.dialect == Dialect::Spec {
            self.dialect = Dialect::of_first_frame(text);
        }
        let decoded = match self.dialect {
            Dialect::Spec => ClientOp::decode(text),
            Dialect::Executor => {
                let role = match self.principal.scope >= Scope::Control {
                    true => Role::Controller,
                    false => Role::Observer,
                };
                executor::decode(text, role)
            }
        };
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
        if session_ref
            .as_deref()
            .is_some_and(|s| s != self.session_id.as_str())
        {
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
                self.task_op(env.id, env.replay_from, op);
                return Next::Continue;
            }
            ClientOp::Join(join) => return self.join(sink, env, join).await,
            ClientOp::Leave => return self.leave(sink).await,
            ClientOp::Ping(ping) => {
                let pong = Pong {
                    client_ts: ping.client_ts,
                    server_ts: clock::now_rfc3339(),
                };
                let frame = server_frame(Some(id), None, ServerOp::Pong(pong));
                return self.next(self.send(sink, frame).await);
            }
            ClientOp::UpdateServiceParameters(u) => {
                self.set_service_parameters(u.service_parameters);
                let frame =
                    server_frame(Some(id), None, ServerOp::ServiceParametersUpdated(Done {}));
                return self.next(self.send(sink, frame).await);
            }
            ClientOp::Input(data) => {
                self.ask_member(Scope::Control, "input", |c, r| {
                    SessionCommand::Input(c, data, r)
                })
                .await
            }
            ClientOp::Resize(size) => {
                self.ask_member(Scope::Control, "resize", |c, r| {
                    SessionCommand::Resize(c, size.cols.0, size.rows.0, r)
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
                    SessionCommand::RequestRole(c, role, r)
                })
                .await
            }
            ClientOp::ReleaseRole => {
                self.ask_member(Scope::Observe, "", |c, r| {
                    SessionCommand::RequestRole(c, Role::Observer, r)
                })
                .await
            }
            ClientOp::RequestKeyframe => {
                self.ask_member(Scope::Observe, "", SessionCommand::RequestKeyframe)
                    .await
            }
            ClientOp::Ack(ack) => {
                self.ask_member(Scope::Observe, "", |c, r| SessionCommand::Ack(c, ack, r))
                    .await
            }
        };
        match result {
            Ok(()) => Next::Continue,
            Err(refusal) => {
                self.refuse(sink, Some(id), refusal.code, &refusal.message)
                    .await
            }
        }
    }
}
