//! Tasks of the conformance executor: the TCK scenarios' scripts, played step by step.

use super::*;

impl TaskService {
    /// The conformance executor: a scripted scenario chosen by messageId (no session).
    pub(super) async fn start_scripted(
        &self,
        who: &Principal,
        mut message: Message,
        task_id: String,
        push: Option<Target>,
        streaming: bool,
    ) -> Result<Started, A2aError> {
        let (task, steps) = match message.task_id.clone() {
            Some(id) => {
                let mut task = self.get(who, &id, None).await?;
                if task.status.state != TaskState::InputRequired {
                    return Err(A2aError::UnsupportedOperation(format!(
                        "task {id} is {}: only a task that asks for input takes a follow-up",
                        task.status.state.name()
                    )));
                }
                message.context_id = Some(task.context_id.clone());
                task.history.push(message);
                // Working before anyone waits on it: the answer was taken.
                task.status = status(TaskState::Working, None, None);
                (task, conformance::answered())
            }
            None => {
                let steps = match conformance::script(&message.message_id) {
                    Script::Message(text) if !streaming => {
                        let mut reply = agent_message(text.to_owned(), None);
                        reply.context_id = message.context_id.clone();
                        return Ok(Started::Message(reply));
                    }
                    Script::Message(text) => vec![Step::Status(TaskState::Completed, Some(text))],
                    Script::Task(steps) => steps,
                };
                let context_id = bind(&mut message, &task_id);
                let task = Task {
                    id: task_id,
                    context_id,
                    status: status(TaskState::Submitted, None, None),
                    artifacts: Some(Vec::new()),
                    history: vec![message],
                    metadata: None,
                };
                (task, steps)
            }
        };
        let service = self.clone();
        let follow = self
            .launch(&task.clone(), push, move |feed, cancel| {
                service.play(task, steps, feed, cancel)
            })
            .await?;
        Ok(Started::Feed(follow))
    }

    /// Plays a script's steps; a cancel ends it at once with CANCELED.
    pub(super) async fn play(
        self,
        mut task: Task,
        steps: Vec<Step>,
        feed: Arc<Feed>,
        mut cancel: watch::Receiver<bool>,
    ) {
        for step in steps {
            if *cancel.borrow() {
                break;
            }
            match step {
                Step::Status(state, text) => {
                    task.status = status(state, text.map(str::to_owned), None);
                    self.announce(&task, &feed).await;
                }
                Step::Artifact {
                    part,
                    append,
                    last_chunk,
                } => {
                    let chunk = Artifact {
                        artifact_id: "artifact-1".into(),
                        name: Some("result".into()),
                        description: None,
                        parts: vec![part],
                        metadata: None,
                    };
                    let artifacts = task.artifacts.get_or_insert_with(Vec::new);
                    match artifacts.first_mut() {
                        Some(a) if append => a.parts.extend(chunk.parts.iter().cloned()),
                        _ => *artifacts = vec![chunk.clone()],
                    }
                    self.persist_quietly(&task).await;
                    feed.publish_artifact(&task, chunk, append, last_chunk);
                }
                Step::Wait(d) => {
                    let _ = tokio::time::timeout(d, cancel.wait_for(|c| *c)).await;
                }
            }
        }
        if *cancel.borrow() && !task.status.state.is_terminal() {
            task.status = status(TaskState::Canceled, Some("canceled".into()), None);
            self.announce(&task, &feed).await;
        }
        self.inner.live.lock().unwrap().remove(&task.id);
    }
}
