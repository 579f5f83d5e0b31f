//! Tasks of the shell executor: a command queued in its session, followed by the
//! executor's progress to a terminal state; an answer to a task that waits for input.

use super::*;

/// Output kept in a task's artifact; beyond it the artifact says it was cut.
pub(super) const MAX_OUTPUT: usize = 1024 * 1024;

pub(super) const OUTPUT_ARTIFACT: &str = "output";

/// How a task's command ended, as the session reported it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Outcome {
    Exited(Option<i32>),
    Dequeued,
    SessionEnded,
}

pub(super) fn output_artifact(output: &[u8], cut: bool) -> Artifact {
    let mut part = Part::text(String::from_utf8_lossy(output).into_owned());
    part.media_type = Some("text/plain".into());
    Artifact {
        artifact_id: OUTPUT_ARTIFACT.into(),
        name: Some("output".into()),
        description: Some(if cut {
            format!("the command's terminal output (first {MAX_OUTPUT} bytes)")
        } else {
            "the command's terminal output".into()
        }),
        parts: vec![part],
        metadata: None,
    }
}

impl TaskService {
    /// The shell executor: resolves or starts the session, persists the SUBMITTED task and
    /// queues its command; returns the task's feed.
    pub(super) async fn start_shell(
        &self,
        who: &Principal,
        mut message: Message,
        task_id: String,
        push: Option<Target>,
        objects: Vec<commerce::object::Verified>,
    ) -> Result<Follow, A2aError> {
        let line = shell::command_line(&message)?;
        let session = (self.inner.shell)
            .session(who, message.context_id.as_deref())
            .await?;
        let receipts = self.receive(objects).await?;
        message.task_id = Some(task_id.clone());
        message.context_id = Some(session.id.clone());
        let task = Task {
            id: task_id.clone(),
            context_id: session.id.clone(),
            status: status(TaskState::Submitted, None, None),
            artifacts: Some(Vec::new()),
            history: vec![message],
            metadata: (!receipts.is_empty()).then(|| receipt_metadata(&receipts)),
        };
        let (progress, progress_rx) = mpsc::unbounded_channel();
        let service = self.clone();
        let follow = self
            .launch(&task.clone(), push, move |feed, cancel| {
                service.run(task, progress_rx, feed, cancel)
            })
            .await?;
        // Typed only once the SUBMITTED task is persisted and followed.
        self.inner
            .shell
            .queue(&session, &task_id, line, progress)
            .await;
        Ok(follow)
    }

    /// A follow-up message for a task waiting for input: its text is typed as the answer.
    /// Returns once the answer is recorded in the task's history.
    pub(super) async fn answer(
        &self,
        who: &Principal,
        mut message: Message,
        push: Option<Target>,
    ) -> Result<Follow, A2aError> {
        let task_id = message.task_id.clone().unwrap_or_default();
        let task = self.get(who, &task_id, None).await?;
        if task.status.state != TaskState::InputRequired {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {task_id} is {}: a follow-up message can only answer a task that asks for input",
                task.status.state.name()
            )));
        }
        if message
            .context_id
            .as_ref()
            .is_some_and(|c| *c != task.context_id)
        {
            return Err(A2aError::InvalidParams(format!(
                "contextId does not match task {task_id}'s ({})",
                task.context_id
            )));
        }
        if message.text().contains(['\n', '\r']) {
            return Err(A2aError::InvalidParams("an answer is one line".into()));
        }
        message.context_id = Some(task.context_id.clone());
        let (Some(feed), true) = (self.feed(&task_id), self.inner.shell.runs(&task.context_id))
        else {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {task_id} no longer runs"
            )));
        };
        if let Some(target) = push {
            self.attach(target).await?;
        }
        let message_id = message.message_id.clone();
        let typed = (self.inner.shell)
            .answer(&task.context_id, &task_id, message)
            .await;
        if !typed {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {task_id} is no longer waiting for input"
            )));
        }
        let mut snapshot = feed.snapshot.subscribe();
        let _ = tokio::time::timeout(
            CANCEL_WAIT,
            snapshot.wait_for(|t| t.history.iter().any(|m| m.message_id == message_id)),
        )
        .await;
        Ok(Follow::of(feed))
    }

    /// Follows one task from its session's events to a terminal state.
    pub(super) async fn run(
        self,
        mut task: Task,
        mut events: mpsc::UnboundedReceiver<Progress>,
        feed: Arc<Feed>,
        cancel: watch::Receiver<bool>,
    ) {
        let mut output: Vec<u8> = Vec::new();
        let mut cut = false;
        let outcome = loop {
            match events.recv().await {
                Some(Progress::Started) => {
                    task.status = status(TaskState::Working, None, None);
                    self.announce(&task, &feed).await;
                }
                Some(Progress::Output(bytes)) => {
                    let room = MAX_OUTPUT.saturating_sub(output.len());
                    cut |= bytes.len() > room;
                    let kept = &bytes[..bytes.len().min(room)];
                    if kept.is_empty() {
                        continue;
                    }
                    let append = !output.is_empty();
                    output.extend_from_slice(kept);
                    task.artifacts = Some(vec![output_artifact(&output, cut)]);
                    let chunk = output_artifact(kept, false);
                    feed.publish_artifact(&task, chunk, append, false);
                }
                Some(Progress::InputRequired(prompt)) => {
                    task.status = status(TaskState::InputRequired, Some(prompt), None);
                    self.announce(&task, &feed).await;
                }
                Some(Progress::Resumed(answer)) => {
                    task.history.push(answer);
                    task.status = status(TaskState::Working, None, None);
                    self.announce(&task, &feed).await;
                }
                Some(Progress::Finished(code)) => break Outcome::Exited(code),
                Some(Progress::Dequeued) => break Outcome::Dequeued,
                Some(Progress::Ended) | None => break Outcome::SessionEnded,
            }
        };
        let canceled = *cancel.borrow();
        task.status = match (outcome, canceled) {
            (Outcome::Dequeued, _) | (Outcome::Exited(_), true) => {
                status(TaskState::Canceled, Some("canceled".into()), None)
            }
            (Outcome::Exited(Some(0)), false) => {
                status(TaskState::Completed, Some("exit code 0".into()), Some(0))
            }
            (Outcome::Exited(Some(code)), false) => status(
                TaskState::Failed,
                Some(format!("exit code {code}")),
                Some(code),
            ),
            (Outcome::Exited(None), false) => status(
                TaskState::Failed,
                Some("the shell reported no exit status".into()),
                None,
            ),
            (Outcome::SessionEnded, _) => {
                status(TaskState::Failed, Some("the session ended".into()), None)
            }
        };
        if let Outcome::Exited(Some(code)) = outcome {
            task.metadata
                .get_or_insert_with(Map::new)
                .insert("exit_code".into(), json!(code));
        }
        self.announce(&task, &feed).await;
        self.inner.live.lock().unwrap().remove(&task.id);
    }
}
