//! The six A2A operations on a pty-ws connection; they run beside the frame loop, so a
//! blocking send never holds up the terminal stream.

use super::*;

/// What an A2A operation on this connection needs, apart from the connection.
pub(super) struct TaskContext {
    pub(super) state: AppState,
    pub(super) principal: Principal,
    pub(super) session_id: String,
    pub(super) service_parameters: Map<String, Value>,
    pub(super) frames: mpsc::Sender<String>,
    pub(super) request_id: String,
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
        A2aError::InvalidRequest(_)
        | A2aError::RequestTooLarge(_)
        | A2aError::InvalidParams(_)
        | A2aError::Commerce(_) => ErrorCode::InvalidRequest,
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
