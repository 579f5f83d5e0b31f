//! The task service every binding calls: a message becomes a command typed into a session's
//! shell (the shell executor); its output streams into an artifact and its exit status ends
//! the task. Every transition is persisted before it is announced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use wire::a2a::{
    Artifact, Content, ListTasksRequest, Message, Part, Role, SendMessageRequest, StreamResponse,
    Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};

use super::push::{Push, Target};
use super::{A2aError, Version, Via};
use crate::auth::{Principal, Scope};
use crate::clock;
use crate::commerce::{self, Carrier, Commerce, Receipt};
use crate::executor::Executor;
use crate::executor::conformance::{self, Script, Step};
use crate::executor::shell::{self, Progress, Shell};
use crate::store::{Store, TaskFilter};

/// Output kept in a task's artifact; beyond it the artifact says it was cut.
const MAX_OUTPUT: usize = 1024 * 1024;
const OUTPUT_ARTIFACT: &str = "output";
/// How long a cancel waits for the task to end before answering with what it has.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct TaskService {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    shell: Shell,
    executor: Executor,
    push: Push,
    commerce: Commerce,
    /// Tasks still running in this process: their latest snapshot, and cancel requests.
    live: Mutex<HashMap<String, Live>>,
}

struct Live {
    feed: Arc<Feed>,
    cancel: watch::Sender<bool>,
    context_id: String,
}

/// Events a stream subscriber may fall behind by before its stream ends with an error.
const STREAM_BUFFER: usize = 1024;

/// A running task's latest snapshot and its event stream, always changed together, so a
/// subscriber gets a snapshot and exactly the events after it.
struct Feed {
    gate: Mutex<()>,
    snapshot: watch::Sender<Task>,
    events: broadcast::Sender<StreamResponse>,
    push: Push,
}

impl Feed {
    fn publish(&self, task: &Task, event: StreamResponse) {
        let _gate = self.gate.lock().unwrap();
        self.push.notify(task, &event);
        self.snapshot.send_replace(task.clone());
        let _ = self.events.send(event);
    }

    /// Announces an artifact chunk of `task` (which already includes it).
    fn publish_artifact(&self, task: &Task, artifact: Artifact, append: bool, last_chunk: bool) {
        self.publish(
            task,
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact,
                append,
                last_chunk,
                metadata: None,
            }),
        );
    }

    fn subscribe(&self) -> (Task, broadcast::Receiver<StreamResponse>) {
        let _gate = self.gate.lock().unwrap();
        (self.snapshot.borrow().clone(), self.events.subscribe())
    }
}

/// What SendMessage answers: the task, or (for some conformance scenarios) a message.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Sent {
    Task(Task),
    Message(Message),
}

/// A started send: a task to follow, or a direct answer.
enum Started {
    Feed(Follow),
    Message(Message),
}

/// A started task's feed, and a subscription to it taken before its runner could announce
/// anything: a stream of a new task starts from its first state.
struct Follow {
    feed: Arc<Feed>,
    first: Task,
    events: broadcast::Receiver<StreamResponse>,
}

impl Follow {
    fn of(feed: Arc<Feed>) -> Follow {
        let (first, events) = feed.subscribe();
        Follow {
            feed,
            first,
            events,
        }
    }
}

/// A task's stream: its snapshot first, then its events until it is terminal or interrupted.
pub struct TaskStream {
    pub first: Task,
    pub events: broadcast::Receiver<StreamResponse>,
}

impl TaskStream {
    /// The stream as A2A sends it: the Task, then status and artifact updates, ending after
    /// the first terminal or interrupted state. A subscriber that fell behind gets an error.
    pub fn into_events(
        self,
    ) -> impl futures_util::Stream<Item = Result<StreamResponse, A2aError>> + Send {
        let ends = |state: TaskState| state.is_terminal() || state.is_interrupted();
        let start = (Some(self.first), self.events, false);
        futures_util::stream::unfold(start, move |(first, mut events, done)| async move {
            if done {
                return None;
            }
            if let Some(task) = first {
                let over = ends(task.status.state);
                return Some((Ok(StreamResponse::Task(task)), (None, events, over)));
            }
            match events.recv().await {
                Ok(event) => {
                    let over =
                        matches!(&event, StreamResponse::StatusUpdate(u) if ends(u.status.state));
                    Some((Ok(event), (None, events, over)))
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    Some((Err(A2aError::StreamLagged(missed)), (None, events, true)))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
    }
}

pub struct ListPage {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub page_size: u32,
    pub total_size: i64,
}

impl TaskService {
    pub fn new(
        store: Store,
        shell: Shell,
        executor: Executor,
        push: Push,
        commerce: Commerce,
    ) -> TaskService {
        TaskService {
            inner: Arc::new(Inner {
                store,
                shell,
                executor,
                push,
                commerce,
                live: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The A202 extension messages may carry objects for.
    pub fn commerce(&self) -> &Commerce {
        &self.inner.commerce
    }

    pub fn live_count(&self) -> usize {
        self.inner.live.lock().unwrap().len()
    }

    /// Fails the tasks a previous process left unfinished (their shells died with it) and
    /// tells their push configs.
    pub async fn recover(&self) -> anyhow::Result<()> {
        for json in self.inner.store.unfinished_tasks().await? {
            let mut task: Task = serde_json::from_str(&json)?;
            task.status = status(
                TaskState::Failed,
                Some("ptyhost stopped while the task was running".into()),
                None,
            );
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
        self.inner
            .store
            .put_task(
                &task.id,
                &task.context_id,
                task.status.state.name(),
                at,
                &serde_json::to_string(task)?,
            )
            .await
    }

    /// SendMessage: starts a task for the message and, unless `returnImmediately`, waits
    /// until it is terminal or interrupted.
    pub async fn send(
        &self,
        who: &Principal,
        req: SendMessageRequest,
        via: Via<'_>,
    ) -> Result<Sent, A2aError> {
        let config = req.configuration.clone().unwrap_or_default();
        let feed = match self.start(who, req, false, via).await? {
            Started::Feed(follow) => follow.feed,
            Started::Message(m) => return Ok(Sent::Message(m)),
        };
        let mut snapshot = feed.snapshot.subscribe();
        if !config.return_immediately {
            let _ = snapshot
                .wait_for(|t| t.status.state.is_terminal() || t.status.state.is_interrupted())
                .await;
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
        match self.start(who, req, true, via).await? {
            Started::Feed(Follow { first, events, .. }) => Ok(TaskStream { first, events }),
            Started::Message(_) => Err(A2aError::Internal),
        }
    }

    /// SubscribeToTask: the task now, then its events. A finished task has nothing to follow.
    pub async fn subscribe(&self, who: &Principal, id: &str) -> Result<TaskStream, A2aError> {
        let task = self.get(who, id, None).await?;
        match self.feed(id) {
            Some(feed) if !task.status.state.is_terminal() => {
                let (first, events) = feed.subscribe();
                Ok(TaskStream { first, events })
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
        let objects = self
            .inner
            .commerce
            .inbound(&message, via.extensions.contains(&commerce::URI))?;
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
            return match (self.inner.executor, carries_command(&message)) {
                (_, false) => self.start_receipt(message, task_id, push, objects).await,
                (Executor::Shell, true) => self
                    .start_shell(who, message, task_id, push, objects)
                    .await
                    .map(Started::Feed),
                (Executor::Conformance, true) => Err(A2aError::UnsupportedOperation(
                    "the conformance executor takes A202 objects only in a message without a command".into(),
                )),
            };
        }
        match self.inner.executor {
            Executor::Conformance => {
                self.start_scripted(who, message, task_id, push, streaming)
                    .await
            }
            Executor::Shell if message.task_id.is_some() => {
                self.answer(who, message, push).await.map(Started::Feed)
            }
            Executor::Shell => self
                .start_shell(who, message, task_id, push, Vec::new())
                .await
                .map(Started::Feed),
        }
    }

    /// Appends a message's A202 objects (the carrier is A2A) and returns their receipts.
    async fn receive(
        &self,
        objects: Vec<commerce::object::Verified>,
    ) -> Result<Vec<Receipt>, A2aError> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.inner.commerce.append(objects, Carrier::A2a).await?)
    }

    /// A message that only carries A202 objects: they are appended and the task that
    /// carried them completes with their receipts as its artifact.
    async fn start_receipt(
        &self,
        mut message: Message,
        task_id: String,
        push: Option<Target>,
        objects: Vec<commerce::object::Verified>,
    ) -> Result<Started, A2aError> {
        let receipts = self.receive(objects).await?;
        let context_id = bind(&mut message, &task_id);
        let part = Part {
            content: Content::Data(json!({ "receipts": receipts })),
            media_type: Some("application/json".into()),
            filename: None,
            metadata: None,
        };
        let task = Task {
            id: task_id,
            context_id,
            status: status(
                TaskState::Completed,
                Some(format!("received {} A202 object(s)", receipts.len())),
                None,
            ),
            artifacts: Some(vec![Artifact {
                artifact_id: "a202-receipt".into(),
                name: Some("A202 receipt".into()),
                description: Some("Where each A202 object the message carried now stands in its transaction stream.".into()),
                parts: vec![part],
                metadata: None,
            }]),
            history: vec![message],
            metadata: Some(receipt_metadata(&receipts)),
        };
        let service = self.clone();
        let id = task.id.clone();
        let follow = self
            .launch(&task, push, move |_, _| async move {
                service.inner.live.lock().unwrap().remove(&id);
            })
            .await?;
        Ok(Started::Feed(follow))
    }

    /// Stores a push config and, while its task runs here, delivers the task's next events
    /// to it (decided under the feed's gate, so no event falls in between).
    async fn attach(&self, target: Target) -> Result<(), A2aError> {
        self.inner.push.store(&target).await?;
        if let Some(feed) = self.feed(&target.config.task_id) {
            let _gate = feed.gate.lock().unwrap();
            if !feed.snapshot.borrow().status.state.is_terminal() {
                self.inner.push.open(target);
            }
        }
        Ok(())
    }

    /// Starts a new task's feed and runner, with its push config attached first.
    async fn launch<F>(
        &self,
        task: &Task,
        push: Option<Target>,
        runner: impl FnOnce(Arc<Feed>, watch::Receiver<bool>) -> F,
    ) -> Result<Follow, A2aError>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.persist(task).await?;
        let (feed, cancel) = self.track(task);
        let follow = Follow::of(feed.clone());
        if let Some(target) = push {
            self.attach(target).await?;
        }
        tokio::spawn(runner(feed, cancel));
        Ok(follow)
    }

    /// CreateTaskPushNotificationConfig: the config as stored (with its id and token).
    pub async fn create_push(
        &self,
        who: &Principal,
        version: Version,
        task_id: &str,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        let target = self.inner.push.prepare(task_id, config, version).await?;
        let config = target.config.clone();
        self.attach(target).await?;
        Ok(config)
    }

    /// GetTaskPushNotificationConfig. Configs hold credentials: reading them needs control.
    pub async fn get_push(
        &self,
        who: &Principal,
        task_id: &str,
        id: &str,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        Ok(self.inner.push.get(task_id, id).await?.config)
    }

    /// ListTaskPushNotificationConfigs: a page of configs and the next page's token.
    pub async fn list_push(
        &self,
        who: &Principal,
        task_id: &str,
        page_size: Option<u32>,
        page_token: Option<&str>,
    ) -> Result<(Vec<TaskPushNotificationConfig>, String), A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        let (targets, next) = self.inner.push.list(task_id, page_size, page_token).await?;
        Ok((targets.into_iter().map(|t| t.config).collect(), next))
    }

    /// DeleteTaskPushNotificationConfig (idempotent).
    pub async fn delete_push(
        &self,
        who: &Principal,
        task_id: &str,
        id: &str,
    ) -> Result<(), A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        self.inner.push.delete(task_id, id).await
    }

    /// The conformance executor: a scripted scenario chosen by messageId (no session).
    async fn start_scripted(
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

    /// Registers a running task: its feed, and the cancel signal its runner watches.
    fn track(&self, task: &Task) -> (Arc<Feed>, watch::Receiver<bool>) {
        let feed = Arc::new(Feed {
            gate: Mutex::new(()),
            snapshot: watch::channel(task.clone()).0,
            events: broadcast::channel(STREAM_BUFFER).0,
            push: self.inner.push.clone(),
        });
        let (cancel, cancel_rx) = watch::channel(false);
        self.inner.live.lock().unwrap().insert(
            task.id.clone(),
            Live {
                feed: feed.clone(),
                cancel,
                context_id: task.context_id.clone(),
            },
        );
        (feed, cancel_rx)
    }

    /// Plays a script's steps; a cancel ends it at once with CANCELED.
    async fn play(
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

    async fn persist_quietly(&self, task: &Task) {
        if let Err(e) = self.persist(task).await {
            tracing::error!(task_id = %task.id, error = %format!("{e:#}"), "persisting a task failed");
        }
    }

    /// The shell executor: resolves or starts the session, persists the SUBMITTED task and
    /// queues its command; returns the task's feed.
    async fn start_shell(
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
        let queued = self.inner.shell.queue(&session, &task_id, line).await;
        let service = self.clone();
        let follow = self
            .launch(&task.clone(), push, move |feed, cancel| {
                service.run(task, queued.progress, feed, cancel)
            })
            .await?;
        Ok(follow)
    }

    /// A follow-up message for a task waiting for input: its text is typed as the answer.
    /// Returns once the answer is recorded in the task's history.
    async fn answer(
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
    async fn run(
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

    /// Persists a transition, then announces it.
    async fn announce(&self, task: &Task, feed: &Feed) {
        self.persist_quietly(task).await;
        feed.publish(task, status_event(task));
    }

    /// The snapshot of a task running in this process.
    fn live_snapshot(&self, id: &str) -> Option<Task> {
        let live = self.inner.live.lock().unwrap();
        live.get(id).map(|l| l.feed.snapshot.borrow().clone())
    }

    /// The latest view of a task: live in this process, or from the store.
    async fn current(&self, id: &str) -> Result<Option<Task>, A2aError> {
        if let Some(t) = self.live_snapshot(id) {
            return Ok(Some(t));
        }
        match self.inner.store.task(id).await? {
            Some(json) => Ok(Some(
                serde_json::from_str(&json).map_err(anyhow::Error::from)?,
            )),
            None => Ok(None),
        }
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
            Some(t) if who.sees_session(&t.context_id) => Ok(t.view(history_length, true)),
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
        let live = {
            let live = self.inner.live.lock().unwrap();
            live.get(id).map(|l| {
                l.cancel.send_replace(true);
                (l.feed.snapshot.subscribe(), l.context_id.clone())
            })
        };
        let Some((mut snapshot, context_id)) = live else {
            return Err(A2aError::TaskNotCancelable(id.to_owned()));
        };
        if self.inner.executor == Executor::Shell {
            self.inner.shell.cancel(&context_id, id).await;
        }
        let _ = tokio::time::timeout(
            CANCEL_WAIT,
            snapshot.wait_for(|t| t.status.state.is_terminal()),
        )
        .await;
        let task = snapshot.borrow().clone();
        Ok(task)
    }

    /// ListTasks, newest status first, with a cursor.
    pub async fn list(&self, who: &Principal, q: ListTasksRequest) -> Result<ListPage, A2aError> {
        require(who, Scope::Observe)?;
        let status_after_ms = match &q.status_timestamp_after {
            Some(t) => Some(parse_ms(t).ok_or_else(|| {
                A2aError::InvalidParams(format!("statusTimestampAfter {t:?} is not RFC 3339"))
            })?),
            None => None,
        };
        let page_size = q.page_size.unwrap_or(50);
        if !(1..=100).contains(&page_size) {
            return Err(A2aError::InvalidParams(
                "pageSize must be between 1 and 100".into(),
            ));
        }
        if let (Some(bound), Some(asked)) = (&who.session_id, &q.context_id)
            && bound != asked
        {
            return Ok(ListPage {
                tasks: Vec::new(),
                next_page_token: String::new(),
                page_size,
                total_size: 0,
            });
        }
        let cursor =
            match q.page_token.as_deref().filter(|t| !t.is_empty()) {
                Some(t) => Some(decode_cursor(t).ok_or_else(|| {
                    A2aError::InvalidParams("pageToken is not one of ours".into())
                })?),
                None => None,
            };
        let context = q.context_id.as_deref().or(who.session_id.as_deref());
        let (rows, total) = self
            .inner
            .store
            .list_tasks(&TaskFilter {
                context_id: context,
                state: q.status.map(TaskState::name),
                status_after_ms,
                after: cursor.as_ref().map(|(t, id)| (*t, id.as_str())),
                limit: page_size + 1,
            })
            .await?;
        let more = rows.len() > page_size as usize;
        let rows = &rows[..rows.len().min(page_size as usize)];
        let next_page_token = match (more, rows.last()) {
            (true, Some((at, id, _))) => encode_cursor(*at, id),
            _ => String::new(),
        };
        let mut tasks = Vec::with_capacity(rows.len());
        for (_, id, json) in rows {
            // A running task's stored row may lag its live snapshot: show the live one.
            let task = match self.live_snapshot(id) {
                Some(t) => t,
                None => serde_json::from_str(json).map_err(anyhow::Error::from)?,
            };
            tasks.push(task.view(q.history_length, q.include_artifacts));
        }
        Ok(ListPage {
            tasks,
            next_page_token,
            page_size,
            total_size: total,
        })
    }
}

/// How a task's command ended, as the session reported it.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Exited(Option<i32>),
    Dequeued,
    SessionEnded,
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
            m.insert("exit_code".into(), json!(c));
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

fn output_artifact(output: &[u8], cut: bool) -> Artifact {
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

/// Whether a message asks for a command: non-empty text, or a data part.
fn carries_command(message: &Message) -> bool {
    shell::command_data(message).is_some() || !message.text().trim().is_empty()
}

/// A task's metadata for the A202 objects its message carried.
fn receipt_metadata(receipts: &[Receipt]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(commerce::URI.into(), json!({ "receipts": receipts }));
    m
}

fn parse_ms(ts: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

fn encode_cursor(at: i64, id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{at}:{id}"))
}

fn decode_cursor(token: &str) -> Option<(i64, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (at, id) = text.split_once(':')?;
    Some((at.parse().ok()?, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_cursors_round_trip_and_foreign_tokens_are_refused() {
        let token = encode_cursor(1700000000123, "0190-abc");
        assert_eq!(
            decode_cursor(&token),
            Some((1700000000123, "0190-abc".into()))
        );
        assert_eq!(decode_cursor("!!"), None);
    }
}
