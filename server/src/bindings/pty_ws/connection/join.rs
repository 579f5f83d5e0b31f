//! Joining a session (fresh, resumed with `replay_from`, or a closed session served from
//! the store) and leaving it.

use std::time::Duration;
use wire::server::ErrorPayload;

use tokio_tungstenite::tungstenite::Message;
use wire::{Envelope, ErrorCode, JoinSession, Role};

use super::send::close;
use super::{Connection, Ended, LeaveOnDrop, Membership, Next, Sink};
use crate::auth::Scope;
use crate::bindings::pty_ws::executor::Dialect;
use crate::bindings::pty_ws::{error_frame_of, executor};
use crate::sessions::{
    ClientId, JoinRequest, Joined, OutputEncoding, Replay, SessionCommand, SessionRefusal,
    envelope, is_task_update,
};
use crate::{audit, sessions};

impl Connection {
    /// Asks the session on behalf of the joined member, after the binding's scope check.
    pub(super) async fn ask_member(
        &self,
        needed: Scope,
        what: &str,
        make: impl FnOnce(
            ClientId,
            tokio::sync::oneshot::Sender<Result<(), SessionRefusal>>,
        ) -> SessionCommand,
    ) -> Result<(), SessionRefusal> {
        let member = self.member.as_ref().ok_or_else(|| {
            SessionRefusal::new(ErrorCode::InvalidRequest, "join the session first")
        })?;
        let result = if self.principal.scope < needed {
            Err(SessionRefusal::new(
                ErrorCode::PermissionDenied,
                format!(
                    "{what} needs {needed}; this token has {}",
                    self.principal.scope
                ),
            ))
        } else {
            member
                .guard
                .handle
                .ask(|reply| make(ClientId(member.client_id.clone()), reply))
                .await
                .unwrap_or_else(|| {
                    Err(SessionRefusal::new(
                        ErrorCode::Internal,
                        "the session has ended",
                    ))
                })
        };
        if let Err(refusal) = &result
            && refusal.code == ErrorCode::PermissionDenied
        {
            self.state.audit.record(
                audit::Record::new(audit::Event::WriteDenied, &self.session_id)
                    .by(&self.principal.token_id)
                    .client(&member.client_id)
                    .detail(audit::Detail::Refused {
                        what: what.to_owned(),
                        reason: refusal.message.clone(),
                    }),
            );
        }
        result
    }

    /// The executor's resume (a `replay_from` in the attach URL), right after the hello:
    /// `replay.out_of_range` if the frames after it are gone, then a keyframe of the screen
    /// now; what follows it comes once the client joins. A session that has ended is
    /// replayed from the store, and the connection closes.
    pub(super) async fn resume_after_hello(&mut self, sink: &mut Sink) -> Next {
        let Some(after) = self.resume else {
            return Next::Continue;
        };
        let live = self.state.sessions.live(&self.session_id);
        let keyframe = match &live {
            Some(handle) => match handle.ask(|r| SessionCommand::Replay(after, r)).await {
                Some(Replay::OutOfRange { floor, current }) => {
                    if self
                        .send(sink, out_of_range(None, floor, current))
                        .await
                        .is_err()
                    {
                        return Next::Stop;
                    }
                    handle.ask(SessionCommand::Keyframe).await
                }
                Some(_) => handle.ask(SessionCommand::Keyframe).await,
                None => None,
            },
            None => None,
        };
        match keyframe {
            Some(frame) => self.next(self.send_bytes(sink, frame).await),
            None => self.replay_closed(sink, None, Some(after)).await,
        }
    }

    pub(super) async fn join(&mut self, sink: &mut Sink, env: Envelope, join: JoinSession) -> Next {
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
            return self.join_closed(sink, id, env.replay_from).await;
        };
        let (out_tx, out) = sessions::viewer_queue();
        let request = JoinRequest {
            role,
            scope: self.principal.scope,
            label: join.client_label.or_else(|| self.principal.label.clone()),
            replay_from: env.replay_from,
            size,
            out: out_tx,
            output: match (self.binary, self.dialect) {
                (true, _) => OutputEncoding::Binary,
                (false, Dialect::Spec) => OutputEncoding::Json,
                (false, Dialect::Executor) => OutputEncoding::Executor,
            },
        };
        let joined = match handle.ask(|r| SessionCommand::Join(request, r)).await {
            None => return self.join_closed(sink, id, env.replay_from).await,
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
            guard: LeaveOnDrop {
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
        self.next(flushed)
    }

    /// The joiner's first frames: `RoleAssigned`, any replay, then keyframe and membership.
    async fn initial_flush(
        &self,
        sink: &mut Sink,
        id: Option<String>,
        joined: Joined,
    ) -> Result<(), Ended> {
        self.send_bytes(sink, joined.first).await?;
        match joined.replay {
            Replay::None => {}
            Replay::OutOfRange { floor, current } => {
                self.send(sink, out_of_range(id, floor, current)).await?;
            }
            Replay::Range { store, ring } => {
                if let Some((after, before)) = store {
                    let frames = self
                        .state
                        .store
                        .frames()
                        .between(&self.session_id, after, before)
                        .await
                        .map_err(|e| {
                            tracing::error!(error = %e, "reading replay failed");
                            Ended
                        })?;
                    // Task updates replay to their task's subscribers (`SubscribeToTask`).
                    for f in frames.iter().filter(|f| !is_task_update(f)) {
                        self.send_bytes(sink, envelope(f)).await?;
                    }
                }
                for f in ring.iter().filter(|f| !is_task_update(f)) {
                    self.send_bytes(sink, envelope(f)).await?;
                }
            }
        }
        for json in joined.rest {
            self.send_bytes(sink, json).await?;
        }
        Ok(())
    }

    /// A join of a session that has ended: the executor's clients are told `session.closed`
    /// first; then its frames from the store.
    async fn join_closed(
        &self,
        sink: &mut Sink,
        id: Option<String>,
        replay_from: Option<u64>,
    ) -> Next {
        if self.dialect == Dialect::Executor {
            let m = "the session has ended; its retained frames follow";
            let frame = executor::session_closed(m);
            if self
                .send_message(sink, Message::Text(frame.into()))
                .await
                .is_err()
            {
                return Next::Stop;
            }
        }
        self.replay_closed(sink, id, replay_from).await
    }

    /// A session that has ended is served from the store: its replay (or its final
    /// keyframe and `Closed`), then goodbye.
    async fn replay_closed(
        &self,
        sink: &mut Sink,
        id: Option<String>,
        replay_from: Option<u64>,
    ) -> Next {
        let store = &self.state.store;
        let sid = &self.session_id;
        let result: anyhow::Result<()> = async {
            let (last, floor) = store
                .sessions()
                .get(sid)
                .await?
                .map_or((0, 0), |r| (r.last_sequence, r.replay_floor));
            let frames = match replay_from {
                Some(after) if sessions::replay::replayable(after, floor, last) => {
                    store.frames().between(sid, after, last + 1).await?
                }
                Some(_) => {
                    let _ = self.send(sink, out_of_range(id.clone(), floor, last)).await;
                    store.frames().from_last_keyframe(sid).await?
                }
                None => store.frames().from_last_keyframe(sid).await?,
            };
            for f in frames.iter().filter(|f| !is_task_update(f)) {
                self.send_bytes(sink, envelope(f))
                    .await
                    .map_err(|Ended| anyhow::anyhow!("send failed"))?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            tracing::info!(error = %e, "replaying a closed session stopped");
            return Next::Stop;
        }
        self.goodbye(sink, "session_closed").await;
        Next::Stop
    }

    pub(super) async fn leave(&mut self, sink: &mut Sink) -> Next {
        if let Some(mut member) = self.member.take() {
            let client_id = member.guard.client_id.take().unwrap_or_default();
            let last = member
                .guard
                .handle
                .ask(|r| SessionCommand::Leave(ClientId(client_id), Some(r)))
                .await;
            if let Some(frame) = last {
                let _ = self.send_bytes(sink, frame).await;
            }
            tracing::info!(role = ?member.role, "left");
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), close(sink, 1000, "left")).await;
        Next::Stop
    }
}

/// `REPLAY_OUT_OF_RANGE`, with the oldest sequence still retained.
pub(super) fn out_of_range(id: Option<String>, floor: u64, current: u64) -> String {
    let message = format!(
        "replay_from is outside the retained window: frames after sequence {floor} are retained, up to {current}"
    );
    let mut error = ErrorPayload::new(ErrorCode::ReplayOutOfRange, &message);
    error.oldest = Some(floor + 1);
    error_frame_of(id, error)
}
