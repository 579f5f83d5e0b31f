//! The task service every binding calls: a message becomes a task that the executor plans
//! and runs (for the shell executor, a command typed into a session's shell); the task
//! service persists every update the executor reports before it announces it.

mod execute;
mod feed;
mod finished;
mod list;
mod push_configs;
mod receipts;
mod remote;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
pub use wire::server::Sent;

use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};
use wire::a2a::{
    Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskIdRequest, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};

use super::push::{Push, Target};
use super::{A2aError, Version, Via};
use crate::a202::{self, A202};
use crate::agentic::{self, Agentic, Stamp};
use crate::auth::{Principal, Scope};
use crate::clock;
use crate::executor::{Executor, shell};
use crate::store::{Store, TasksOf};
use feed::{Feed, Follow, STREAM_BUFFER};
pub use feed::{Place, TaskStream};
use finished::Finished;
use list::parse_ms;
pub use remote::Cluster;

/// How long a cancel waits for the task to end before answering with what it has.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct TaskService {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    executor: Arc<dyn Executor>,
    push: Push,
    a202: A202,
    /// The agentic-sandbox executor's extensions.
    agentic: Agentic,
    /// The other nodes, which run the tasks of their sessions.
    cluster: Arc<dyn Cluster>,
    /// Tasks still running in this process: their latest snapshot, and cancel requests.
    live: Mutex<HashMap<String, Live>>,
    /// Tasks that ended lately.
    finished: Finished,
}

struct Live {
    feed: Arc<Feed>,
    cancel: watch::Sender<bool>,
}

/// A message that starts a task, the task's id and the push config sent with it.
struct NewTask {
    message: Message,
    task_id: String,
    push: Option<Target>,
}

/// A started send: a task to follow, or a direct answer.
enum Started {
    Feed(Box<Follow>),
    Message(Message),
}

impl TaskService {
    pub fn new(
        store: Store,
        executor: Arc<dyn Executor>,
        push: Push,
        a202: A202,
        agentic: Agentic,
        cluster: Arc<dyn Cluster>,
    ) -> TaskService {
        TaskService {
            inner: Arc::new(Inner {
                store,
                executor,
                push,
                a202,
                agentic,
                cluster,
                live: Mutex::new(HashMap::new()),
                finished: Finished::default(),
            }),
        }
    }

    /// The A202 extension messages may carry objects for.
    pub fn a202(&self) -> &A202 {
        &self.inner.a202
    }

    /// The agentic-sandbox executor's extensions.
    pub fn agentic(&self) -> &Agentic {
        &self.inner.agentic
    }

    pub fn live_count(&self) -> usize {
        self.inner.live.lock().unwrap().len()
    }

    /// Fails the tasks a previous process of node `node_id` left unfinished (their shells
    /// died with it) and tells their push configs.
    pub async fn recover(&self, node_id: &str) -> anyhow::Result<()> {
        self.fail_unfinished(
            TasksOf::Node(node_id),
            "ptyhost stopped while the task was running",
        )
        .await
    }

    /// Fails unfinished tasks whose process is gone, saying `why`, and tells their push
    /// configs.
    pub async fn fail_unfinished(&self, of: TasksOf<'_>, why: &str) -> anyhow::Result<()> {
        for json in self.inner.store.tasks().unfinished(of).await? {
            let mut task: Task = serde_json::from_str(&json)?;
            task.status = status(TaskState::Failed, Some(why.into()), None);
            self.persist(&task).await?;
            self.inner.push.resume(&task, &status_event(&task)).await?;
        }
        Ok(())
    }

    async fn persist(&self, task: &Task) -> anyhow::Result<()> {
        let at = task
            .status
            .timestamp
            .as_deref()
            .and_then(parse_ms)
            .unwrap_or_else(clock::now_ms);
        let json = serde_json::to_string(task)?;
        let state = task.status.state;
        (self.inner.store)
            .tasks()
            .put(&task.id, &task.context_id, state.name(), at, &json)
            .await?;
        if state.is_terminal() {
            self.inner.finished.keep(task, json.len());
        }
        Ok(())
    }

    /// SendMessage: starts a task for the message and, unless `returnImmediately`, waits
    /// until it is terminal or interrupted.
    pub async fn send(
        &self,
        who: &Principal,
        req: SendMessageRequest,
        via: Via<'_>,
    ) -> Result<Sent, A2aError> {
        if let Some(node) = self.node_of_message(&req.message).await? {
            return self.send_remote(&node, who, &req, via).await;
        }
        let config = req.configuration.clone().unwrap_or_default();
        let feed = match self.start(who, req, false, via).await? {
            Started::Feed(follow) => follow.feed,
            Started::Message(m) => return Ok(Sent::Message(m)),
        };
        let mut snapshot = feed.snapshot.subscribe();
        if !config.return_immediately {
            let _ = snapshot.wait_for(|t| t.status.state.ends_stream()).await;
        }
        let current = snapshot.borrow().clone();
        Ok(Sent::Task(current.view(config.history_length, true)))
    }

    /// SendStreamingMessage: starts a task and streams it from its first snapshot.
    pub async fn send_stream(
        &self,
        who: &Principal,
        req: SendMessageRequest,
        via: Via<'_>,
    ) -> Result<TaskStream, A2aError> {
        if let Some(node) = self.node_of_message(&req.message).await? {
            let params = serde_json::to_value(&req).map_err(anyhow::Error::from)?;
            let subject = req.message.context_id.as_deref().unwrap_or("");
            let method = "SendStreamingMessage";
            return (self.stream_remote(&node, who, method, params, via, subject)).await;
        }
        match self.start(who, req, true, via).await? {
            Started::Feed(follow) => Ok(follow.stream),
            Started::Message(_) => Err(A2aError::Internal),
        }
    }

    /// SubscribeToTask: the task now, then its events. A finished task has nothing to follow.
    pub async fn subscribe(&self, who: &Principal, id: &str) -> Result<TaskStream, A2aError> {
        let task = self.get(who, id, None).await?;
        if let Some(node) = self.node_of_task(&task).await? {
            let via = Via {
                version: Version::V1,
                extensions: &[],
            };
            let params = wire::to_json(TaskIdRequest::of(id));
            return (self.stream_remote(&node, who, "SubscribeToTask", params, via, id)).await;
        }
        match self.feed(id) {
            Some(feed) if !task.status.state.is_terminal() => {
                Ok(TaskStream::of(&feed).to_terminal())
            }
            _ => Err(A2aError::UnsupportedOperation(format!(
                "task {id} is {}: there is nothing left to subscribe to",
                task.status.state.name()
            ))),
        }
    }

    /// A running task's feed.
    fn feed(&self, id: &str) -> Option<Arc<Feed>> {
        let live = self.inner.live.lock().unwrap();
        live.get(id).map(|l| l.feed.clone())
    }

    /// Validates the message (and its inline push config) and starts its task with the
    /// configured executor. A202 objects in it are verified first and appended to their
    /// streams only once the rest of the message is known to be acceptable; a message that
    /// carries objects and no command is answered by a completed receipt task.
    async fn start(
        &self,
        who: &Principal,
        req: SendMessageRequest,
        streaming: bool,
        via: Via<'_>,
    ) -> Result<Started, A2aError> {
        require(who, Scope::Control)?;
        let message = req.message;
        if message.role != Role::User {
            return Err(A2aError::InvalidParams(
                "the message role must be ROLE_USER".into(),
            ));
        }
        agentic::tenant::of(&message).map_err(A2aError::InvalidParams)?;
        let objects = self
            .inner
            .a202
            .inbound(&message, via.extensions.contains(&a202::URI))?;
        let task_id = message
            .task_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let push = match req
            .configuration
            .and_then(|c| c.task_push_notification_config)
        {
            Some(config) => Some(
                self.inner
                    .push
                    .prepare(&task_id, config, via.version)
                    .await?,
            ),
            None => None,
        };
        if let Some(objects) = objects {
            if message.task_id.is_some() {
                return Err(A2aError::InvalidParams(
                    "A202 objects start a task of their own: send them without a taskId".into(),
                ));
            }
            if !carries_command(&message) {
                let stamp = self.inner.agentic.stamp(&message, via.extensions, None);
                let new = NewTask {
                    message,
                    task_id,
                    push,
                };
                return self.start_receipt(new, objects, stamp).await;
            }
            let new = NewTask {
                message,
                task_id,
                push,
            };
            return self.execute(who, new, objects, streaming, via).await;
        }
        if message.task_id.is_some() {
            return self
                .answer(who, message, push)
                .await
                .map(|f| Started::Feed(Box::new(f)));
        }
        let new = NewTask {
            message,
            task_id,
            push,
        };
        self.execute(who, new, Vec::new(), streaming, via).await
    }

    /// Persists a new task and starts its feed and follower, with its push config attached
    /// first. `cancel` is the cancel request its work watches.
    async fn launch<F>(
        &self,
        task: &Task,
        push: Option<Target>,
        cancel: watch::Sender<bool>,
        follower: impl FnOnce(Arc<Feed>) -> F,
    ) -> Result<Follow, A2aError>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.persist(task).await?;
        let feed = self.track(task, cancel);
        let follow = Follow::of(feed.clone());
        if let Some(target) = push {
            self.attach(target).await?;
        }
        tokio::spawn(follower(feed));
        Ok(follow)
    }

    /// Registers a running task: its feed, and the cancel request its work watches.
    fn track(&self, task: &Task, cancel: watch::Sender<bool>) -> Arc<Feed> {
        let feed = Arc::new(Feed {
            gate: Mutex::new(0),
            snapshot: watch::channel(task.clone()).0,
            events: broadcast::channel(STREAM_BUFFER).0,
            push: self.inner.push.clone(),
        });
        self.inner.live.lock().unwrap().insert(
            task.id.clone(),
            Live {
                feed: feed.clone(),
                cancel,
            },
        );
        feed
    }

    /// Persists a transition (retrying until the store takes it), then announces it: a
    /// client never hears of a state the store could lose.
    async fn announce(&self, task: &Task, feed: &Feed) {
        let what = format!("persisting task {}", task.id);
        self.inner
            .store
            .until_written(&what, || self.persist(task))
            .await;
        feed.publish(task, status_event(task));
    }

    /// The snapshot of a task running in this process.
    fn live_snapshot(&self, id: &str) -> Option<Task> {
        let live = self.inner.live.lock().unwrap();
        live.get(id).map(|l| l.feed.snapshot.borrow().clone())
    }

    /// The latest view of a task: live in this process, ended lately, or from the store.
    async fn current(&self, id: &str) -> Result<Option<Task>, A2aError> {
        if let Some(t) = self
            .live_snapshot(id)
            .or_else(|| self.inner.finished.get(id))
        {
            return Ok(Some(t));
        }
        let Some(json) = self.inner.store.tasks().get(id).await? else {
            return Ok(None);
        };
        let task: Task = serde_json::from_str(&json).map_err(anyhow::Error::from)?;
        if task.status.state.is_terminal() {
            self.inner.finished.keep(&task, json.len());
        }
        Ok(Some(task))
    }

    /// GetTask. A task outside the caller's sessions is "not found", never "forbidden".
    pub async fn get(
        &self,
        who: &Principal,
        id: &str,
        history_length: Option<u32>,
    ) -> Result<Task, A2aError> {
        require(who, Scope::Observe)?;
        match self.current(id).await? {
            Some(t) if who.sees_session(&t.context_id) => match self.node_of_task(&t).await? {
                Some(node) => {
                    let params = wire::to_json(TaskIdRequest {
                        history_length,
                        ..TaskIdRequest::of(id)
                    });
                    self.call_remote(&node, who, "GetTask", params, id).await
                }
                None => Ok(t.view(history_length, true)),
            },
            _ => Err(A2aError::TaskNotFound(id.to_owned())),
        }
    }

    /// CancelTask: Ctrl-C to the command (SIGKILL after a grace period); answers once the
    /// task ended, or with its state after a bounded wait.
    pub async fn cancel(&self, who: &Principal, id: &str) -> Result<Task, A2aError> {
        require(who, Scope::Control)?;
        let task = self.get(who, id, None).await?;
        if task.status.state == TaskState::Canceled {
            return Ok(task);
        }
        if task.status.state.is_terminal() {
            return Err(A2aError::TaskNotCancelable(id.to_owned()));
        }
        if let Some(node) = self.node_of_task(&task).await? {
            let params = wire::to_json(TaskIdRequest::of(id));
            return self.call_remote(&node, who, "CancelTask", params, id).await;
        }
        let snapshot = {
            let live = self.inner.live.lock().unwrap();
            live.get(id).map(|l| {
                l.cancel.send_replace(true);
                l.feed.snapshot.subscribe()
            })
        };
        let Some(mut snapshot) = snapshot else {
            return Err(A2aError::TaskNotCancelable(id.to_owned()));
        };
        self.inner.executor.cancel(&task).await;
        let _ = tokio::time::timeout(
            CANCEL_WAIT,
            snapshot.wait_for(|t| t.status.state.is_terminal()),
        )
        .await;
        let task = snapshot.borrow().clone();
        Ok(task)
    }
}

fn require(who: &Principal, needed: Scope) -> Result<(), A2aError> {
    if who.scope < needed {
        return Err(A2aError::PermissionDenied(format!(
            "this needs {needed}; the token has {}",
            who.scope
        )));
    }
    Ok(())
}

fn agent_message(text: String, exit_code: Option<i32>) -> Message {
    Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: None,
        task_id: None,
        role: Role::Agent,
        parts: vec![Part::text(text)],
        metadata: exit_code.map(|c| {
            let mut m = Map::new();
            m.insert("exit_code".into(), Value::from(c));
            m
        }),
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    }
}

/// The status update that announces a task's current status.
fn status_event(task: &Task) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: task.status.clone(),
        metadata: task.metadata.clone(),
    })
}

fn status(state: TaskState, text: Option<String>, exit_code: Option<i32>) -> TaskStatus {
    TaskStatus {
        state,
        message: text.map(|t| agent_message(t, exit_code)),
        timestamp: Some(clock::now_rfc3339()),
    }
}

/// Binds a message that starts a task without a session to it: the task id, and its
/// context (the message's own, else a new one), which is returned.
fn bind(message: &mut Message, task_id: &str) -> String {
    let context_id = message
        .context_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    message.task_id = Some(task_id.to_owned());
    message.context_id = Some(context_id.clone());
    context_id
}

/// A task's metadata with what the extensions stamp on it.
fn stamped(mut metadata: Map<String, Value>, stamp: &Stamp) -> Map<String, Value> {
    metadata.extend(stamp.metadata.clone());
    metadata
}

/// Whether a message asks for a command: non-empty text, or a data part.
fn carries_command(message: &Message) -> bool {
    shell::command_data(message).is_some() || !message.text().trim().is_empty()
}
