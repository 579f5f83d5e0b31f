//! Tasks the executor runs: a new message planned by it, persisted as SUBMITTED, then
//! followed from its updates to a terminal state; an answer to a task that waits for input.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use wire::a2a::{Message, Part, Task, TaskState};

use super::feed::{Feed, Follow};
use super::receipts::receipt_metadata;
use super::{CANCEL_WAIT, NewTask, Started, TaskService, agent_message, stamped, status};
use crate::a2a::push::Target;
use crate::a2a::{A2aError, Via};
use crate::agentic::Stamp;
use crate::auth::Principal;
use crate::executor::{Plan, Update, Work};
use crate::{a202, agentic};

impl TaskService {
    /// Plans the message with the executor; a task is persisted as SUBMITTED and followed
    /// before its work starts. The message's A202 objects are appended once the executor
    /// took it.
    pub(super) async fn execute(
        &self,
        who: &Principal,
        new: NewTask,
        objects: Vec<a202::object::Verified>,
        streaming: bool,
        via: Via<'_>,
    ) -> Result<Started, A2aError> {
        let NewTask {
            mut message,
            task_id,
            push,
        } = new;
        let (updates, updates_rx) = mpsc::unbounded_channel();
        let (cancel, cancel_rx) = watch::channel(false);
        let work = Work {
            task_id: task_id.clone(),
            updates,
            cancel: cancel_rx.clone(),
        };
        let plan = (self.inner.executor)
            .plan(who, &mut message, !objects.is_empty(), streaming, work)
            .await?;
        let (context_id, confined, start) = match plan {
            Plan::Reply(text) => {
                let mut reply = agent_message(text, None);
                reply.context_id = message.context_id.clone();
                let stamp = self.inner.agentic.stamp(&message, via.extensions, None);
                stamp.message(&mut reply);
                return Ok(Started::Message(reply));
            }
            Plan::Task {
                context_id,
                confined,
                start,
            } => (context_id, confined, start),
        };
        let stamp = self
            .inner
            .agentic
            .stamp(&message, via.extensions, Some(confined));
        let receipts = self.receive(objects).await?;
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());
        let task = Task {
            id: task_id,
            context_id,
            status: status(TaskState::Submitted, None, None),
            artifacts: Some(Vec::new()),
            history: vec![message],
            metadata: Some(stamped(
                match receipts.is_empty() {
                    true => Map::new(),
                    false => receipt_metadata(&receipts),
                },
                &stamp,
            )),
        };
        let service = self.clone();
        let follow = self
            .launch(&task.clone(), push, cancel, move |feed| {
                service.follow(task, updates_rx, feed, cancel_rx, stamp)
            })
            .await?;
        tokio::spawn(start.await);
        Ok(Started::Feed(Box::new(follow)))
    }

    /// A follow-up message for a task waiting for input: the executor takes it as the
    /// answer. Returns once the answer is recorded in the task's history.
    pub(super) async fn answer(
        &self,
        who: &Principal,
        mut message: Message,
        push: Option<Target>,
    ) -> Result<Follow, A2aError> {
        let task_id = message.task_id.clone().unwrap_or_default();
        let task = self.get(who, &task_id, None).await?;
        // A hitl-prompt/v1 answer is typed as the text of its payload.
        if let Some(text) = agentic::hitl::answer(&task, &message)? {
            message.parts = vec![Part::text(text)];
        }
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
        message.context_id = Some(task.context_id.clone());
        let Some(feed) = self.feed(&task_id) else {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {task_id} no longer runs"
            )));
        };
        if let Some(target) = push {
            self.attach(target).await?;
        }
        let message_id = message.message_id.clone();
        self.inner.executor.answer(&task, message).await?;
        let mut snapshot = feed.snapshot.subscribe();
        let _ = tokio::time::timeout(
            CANCEL_WAIT,
            snapshot.wait_for(|t| t.history.iter().any(|m| m.message_id == message_id)),
        )
        .await;
        Ok(Follow::of(feed))
    }

    /// Follows one task from the executor's updates to a terminal state. Updates that stop
    /// before one end the task: CANCELED if it was canceled, else FAILED.
    async fn follow(
        self,
        mut task: Task,
        mut updates: mpsc::UnboundedReceiver<Update>,
        feed: Arc<Feed>,
        cancel: watch::Receiver<bool>,
        stamp: Stamp,
    ) {
        while let Some(update) = updates.recv().await {
            match update {
                Update::Status {
                    state,
                    text,
                    exit_code,
                } => {
                    task.status = status(state, text, exit_code);
                    stamp.status(&mut task.status);
                    if let Some(code) = exit_code {
                        task.metadata
                            .get_or_insert_with(Map::new)
                            .insert("exit_code".into(), Value::from(code));
                    }
                    self.announce(&task, &feed).await;
                    if state.is_terminal() {
                        break;
                    }
                }
                Update::Artifact {
                    whole,
                    chunk,
                    append,
                    last_chunk,
                } => {
                    let artifacts = task.artifacts.get_or_insert_with(Vec::new);
                    match artifacts
                        .iter_mut()
                        .find(|a| a.artifact_id == whole.artifact_id)
                    {
                        Some(a) => *a = whole,
                        None => artifacts.push(whole),
                    }
                    feed.publish_artifact(&task, chunk, append, last_chunk);
                }
                Update::Answered(answer) => {
                    task.history.push(answer);
                    task.status = status(TaskState::Working, None, None);
                    self.announce(&task, &feed).await;
                }
            }
        }
        if !task.status.state.is_terminal() {
            task.status = if *cancel.borrow() {
                status(TaskState::Canceled, Some("canceled".into()), None)
            } else {
                status(TaskState::Failed, Some("the executor stopped".into()), None)
            };
            stamp.status(&mut task.status);
            self.announce(&task, &feed).await;
        }
        self.inner.live.lock().unwrap().remove(&task.id);
    }
}
