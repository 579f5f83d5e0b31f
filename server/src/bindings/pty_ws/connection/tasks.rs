//! The six A2A operations on a pty-ws connection; they run beside the frame loop, so a
//! blocking send never holds up the terminal stream.

use crate::sessions::SessionId;
use futures_util::StreamExt;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use wire::a2a::{StreamResponse, Task};
use wire::server::{
    ErrorPayload, ServerFrame, ServerOp, StreamAccepted, SubscribeAccepted, TaskAnswer, TaskPage,
    TaskUpdate as UpdatePayload,
};
use wire::{ErrorCode, TaskOp};

use crate::a2a::service::TaskStream;
use crate::a2a::{A2aError, Version, Via};
use crate::auth::Principal;
use crate::bindings::pty_ws::{error_frame_of, frame_now, server_frame};
use crate::sessions::{
    Replay, SessionCommand, SessionHandle, TASK_UPDATE, TaskUpdate, is_task_update,
};
use crate::state::AppState;
use crate::store::Frame;

/// Task updates read from the store per page when a subscriber replays.
const UPDATE_PAGE: u32 = 256;

/// What an A2A operation on this connection needs, apart from the connection.
pub(super) struct TaskContext {
    pub(super) state: AppState,
    pub(super) principal: Principal,
    pub(super) session_id: SessionId,
    /// The connection's client id in the session, when it has joined: its task updates
    /// then come in order with its session frames.
    pub(super) member: Option<String>,
    pub(super) service_parameters: Map<String, Value>,
    pub(super) frames: mpsc::Sender<String>,
    pub(super) request_id: String,
    /// A `SubscribeToTask` after a reconnect: the updates after this sequence come first.
    pub(super) replay_from: Option<u64>,
}

impl TaskContext {
    pub(super) async fn run(self, op: TaskOp) {
        let tasks = &self.state.tasks;
        let extensions = match crate::bindings::activate_parameters(tasks, &self.service_parameters)
        {
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
                    .map(|sent| ServerOp::SendMessage(Box::new(sent))),
                Err(e) => Err(e),
            },
            TaskOp::GetTask(r) => self
                .task(&r.task_id, r.history_length)
                .await
                .map(|task| ServerOp::GetTask(Box::new(TaskAnswer { task }))),
            TaskOp::CancelTask(r) => match self.task(&r.task_id, None).await {
                Ok(_) => tasks
                    .cancel(&self.principal, &r.task_id)
                    .await
                    .map(|task| ServerOp::CancelTask(Box::new(TaskAnswer { task }))),
                Err(e) => Err(e),
            },
            TaskOp::ListTasks(p) => {
                let mut req = p.filter.unwrap_or_default();
                req.context_id = Some(self.session_id.to_string());
                req.page_size = p.page_size.or(req.page_size);
                req.page_token = p.page_token.or(req.page_token);
                tasks.list(&self.principal, req).await.map(|page| {
                    ServerOp::ListTasks(TaskPage {
                        tasks: page.tasks,
                        next_page_token: page.next_page_token,
                    })
                })
            }
            TaskOp::SendStreamingMessage(mut req) => {
                let started = match self.bind(&mut req.message) {
                    Ok(()) => tasks.send_stream(&self.principal, *req, via).await,
                    Err(e) => Err(e),
                };
                return self.follow(started, false).await;
            }
            TaskOp::SubscribeToTask(r) => {
                let started = match self.task(&r.task_id, None).await {
                    // A subscriber that comes back after its task ended still gets the
                    // updates it missed.
                    Ok(t) if t.status.state.is_terminal() && self.replay_from.is_some() => {
                        return self.replay_ended(&t.id).await;
                    }
                    Ok(_) => tasks.subscribe(&self.principal, &r.task_id).await,
                    Err(e) => Err(e),
                };
                return self.follow(started, true).await;
            }
            TaskOp::Unsubscribe(_) => return,
        };
        let frame = match answer {
            Ok(op) => server_frame(Some(self.request_id.clone()), None, op),
            Err(e) => a2a_error_frame(&self.request_id, &e),
        };
        let _ = self.frames.send(frame).await;
    }

    /// A message on this connection belongs to its session: no contextId means this one,
    /// another one is refused.
    fn bind(&self, message: &mut wire::a2a::Message) -> Result<(), A2aError> {
        match &message.context_id {
            Some(c) if c != self.session_id.as_str() => Err(A2aError::PermissionDenied(
                "this connection is bound to another session".into(),
            )),
            _ => {
                message.context_id = Some(self.session_id.to_string());
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
        if task.context_id != self.session_id.as_str() {
            return Err(A2aError::TaskNotFound(id.to_owned()));
        }
        Ok(task)
    }

    /// Acknowledges a stream, then forwards each update as a `TaskStatusUpdate` frame
    /// carrying the task as it now is, the event, and the connection's service parameters.
    async fn follow(&self, started: Result<TaskStream, A2aError>, subscribe: bool) {
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
        let ack = if subscribe {
            self.subscribed()
        } else {
            ServerOp::StreamAccepted(StreamAccepted {
                task_id: stream.first.id.clone(),
            })
        };
        if self.accept(ack).await.is_err() {
            return;
        }
        let mut task = stream.first.clone();
        let handle = self.state.sessions.live(&self.session_id);
        let sent_upto = match self.replay_from {
            Some(after) => match self.replay(handle.as_ref(), &task.id, after).await {
                Ok(upto) => upto,
                Err(()) => return,
            },
            None => 0,
        };
        let mut events = std::pin::pin!(stream.into_placed_events());
        while let Some((place, event)) = events.next().await {
            let frame = match event {
                Ok(event) => {
                    apply(&mut task, &event);
                    let update = UpdatePayload {
                        task: task.clone(),
                        delta: event,
                        task_id: task.id.clone(),
                    };
                    let payload = Box::new(update);
                    match &handle {
                        Some(h) => {
                            match self.numbered(h, &task.id, place, payload, sent_upto).await {
                                Some(frame) => frame,
                                None => continue,
                            }
                        }
                        None => self.unnumbered(payload),
                    }
                }
                Err(e) => a2a_error_frame(&self.request_id, &e),
            };
            if self.frames.send(frame).await.is_err() {
                return;
            }
        }
    }

    /// What `SubscribeToTask.Accepted` says: the session's current sequence.
    fn subscribed(&self) -> ServerOp {
        let sessions = &self.state.sessions;
        let current = sessions
            .live(&self.session_id)
            .map_or(0, |h| h.current_sequence());
        ServerOp::SubscribeAccepted(SubscribeAccepted {
            current_sequence: current,
        })
    }

    async fn accept(&self, ack: ServerOp) -> Result<(), ()> {
        let frame = server_frame(Some(self.request_id.clone()), None, ack);
        self.frames.send(frame).await.map_err(drop)
    }

    /// A resubscribe to a task that has ended: the updates after `replay_from`, and no more.
    async fn replay_ended(&self, task_id: &str) {
        if self.accept(self.subscribed()).await.is_ok() {
            let handle = self.state.sessions.live(&self.session_id);
            let after = self.replay_from.unwrap_or(0);
            let _ = self.replay(handle.as_ref(), task_id, after).await;
        }
    }

    fn service_parameters(&self) -> Option<Map<String, Value>> {
        Some(self.service_parameters.clone()).filter(|p| !p.is_empty())
    }

    /// A task event numbered by the session, as every follower of the task gets it; `None`
    /// when it went into this connection's session queue, or was replayed already.
    async fn numbered(
        &self,
        handle: &SessionHandle,
        task_id: &str,
        place: crate::a2a::service::Place,
        payload: Box<UpdatePayload>,
        sent_upto: u64,
    ) -> Option<String> {
        let update = |reply| {
            SessionCommand::TaskUpdate(TaskUpdate {
                task_id: task_id.to_owned(),
                place: (place.n, place.snapshot),
                payload: payload.clone(),
                member: self.member.clone(),
                service_parameters: self.service_parameters(),
                sent_upto,
                reply,
            })
        };
        match handle.ask(update).await {
            Some(numbered) => numbered.map(|b| String::from_utf8_lossy(&b).into_owned()),
            // The session ended meanwhile: the event goes out without a number.
            None => Some(self.unnumbered(payload)),
        }
    }

    fn unnumbered(&self, payload: Box<UpdatePayload>) -> String {
        ServerFrame {
            service_parameters: self.service_parameters(),
            ..frame_now(None, None, ServerOp::TaskUpdate(payload))
        }
        .to_text()
    }

    /// Sends the retained updates of task `task_id` after sequence `after`, in order (or
    /// `REPLAY_OUT_OF_RANGE`); the last sequence sent. A session that has ended replays
    /// from the store.
    async fn replay(
        &self,
        handle: Option<&SessionHandle>,
        task_id: &str,
        after: u64,
    ) -> Result<u64, ()> {
        let plan = match handle {
            Some(h) => h.ask(|r| SessionCommand::Replay(after, r)).await,
            None => None,
        };
        let plan = match plan {
            Some(plan) => plan,
            None => Replay::Range {
                store: Some((after, u64::MAX)),
                ring: Vec::new(),
            },
        };
        let (store, ring) = match plan {
            Replay::Range { store, ring } => (store, ring),
            Replay::OutOfRange { floor, current } => {
                let refused =
                    super::join::out_of_range(Some(self.request_id.clone()), floor, current);
                return self.frames.send(refused).await.map(|_| after).map_err(drop);
            }
            Replay::None => return Ok(after),
        };
        let mut upto = after;
        if let Some((from, before)) = store {
            // Only the session's task updates, a page at a time from the kind index: a
            // replay after a flood reads none of its output.
            let mut start = from + 1;
            while start < before {
                let page = (self.state.store)
                    .frames()
                    .of_kinds(&self.session_id, &[TASK_UPDATE], start, UPDATE_PAGE)
                    .await;
                let page = match page {
                    Ok(page) => page,
                    Err(e) => {
                        tracing::error!(error = %e, "reading task updates to replay failed");
                        break;
                    }
                };
                for f in page.iter().take_while(|f| f.sequence < before) {
                    self.send_update(f, task_id, &mut upto).await?;
                }
                match page.last() {
                    Some(last) if page.len() == UPDATE_PAGE as usize => start = last.sequence + 1,
                    _ => break,
                }
            }
        }
        for f in ring.iter().filter(|f| is_task_update(f)) {
            self.send_update(f, task_id, &mut upto).await?;
        }
        Ok(upto)
    }

    /// Sends retained task update `f` if it is task `task_id`'s, noting its sequence.
    async fn send_update(&self, f: &Frame, task_id: &str, upto: &mut u64) -> Result<(), ()> {
        let crate::store::FrameBody::Envelope { text, .. } = &f.body else {
            return Ok(());
        };
        let Ok(mut frame) = serde_json::from_slice::<ServerFrame>(text) else {
            return Ok(());
        };
        if !matches!(&frame.op, ServerOp::TaskUpdate(u) if u.task_id == task_id) {
            return Ok(());
        }
        frame.service_parameters = self.service_parameters();
        self.frames.send(frame.to_text()).await.map_err(drop)?;
        *upto = f.sequence;
        Ok(())
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
        A2aError::InvalidRequest(_)
        | A2aError::RequestTooLarge(_)
        | A2aError::InvalidParams(_)
        | A2aError::A202(_)
        | A2aError::Extension(_) => ErrorCode::InvalidRequest,
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
    let mut error = ErrorPayload::new(code, &e.to_string());
    error.a2a_error = e.status_body().error;
    error_frame_of(Some(request_id.to_owned()), error)
}
