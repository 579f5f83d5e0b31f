//! Sessions and commands: `session_create`, `session_list`, `session_close`, and `run`,
//! `task_status`, `task_cancel`. A command is an A2A task of the task service, typed into the
//! session's shell and followed by its OSC 133 marks, so a person watching sees it run and the
//! recording marks it.

use crate::sessions::SessionId;
use std::time::Duration;

use futures_util::StreamExt;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wire::a2a::{
    Message, Part, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task,
    TaskState,
};

use super::text;
use super::{Terminal, ToolError};
use crate::a2a::service::TaskStream;
use crate::a2a::{Version, Via};
use crate::auth::{Principal, Scope};
use crate::sessions::SpecRequest;

/// How long `run` waits before it answers `running` (the command goes on).
const DEFAULT_YIELD: Duration = Duration::from_secs(10);
/// Progress notifications of a long `run` come at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateParams {
    /// A program to run instead of the default shell (a shell command line). Without it the
    /// session runs a shell that `run` can type commands into.
    pub command: Option<String>,
    /// The working directory. Without it a sandboxed session gets a fresh workspace.
    pub cwd: Option<String>,
    /// A name shown in the UI and in `session_list`.
    pub label: Option<String>,
    /// The session's own sandbox limits: `{network?: "none"|"host", memory?: "512MiB",
    /// pids?: 128, cpus?: 1.5}`. Lowering is open to anyone who may create a session;
    /// raising needs an admin token.
    pub sandbox: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Created {
    pub session_id: String,
    pub label: Option<String>,
    /// The browser link where a person can watch the session and take it over.
    pub ui_url: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionSummary {
    pub session_id: String,
    pub label: Option<String>,
    /// `running` or `closed`.
    pub state: String,
    pub argv: Vec<String>,
    pub workspace: Option<String>,
    pub ui_url: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionParams {
    pub session_id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Closed {
    pub session_id: String,
    pub state: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunParams {
    /// The session whose shell runs it. Without it, a fresh shell from the pool, kept for
    /// this token's next `run` without a session_id.
    pub session_id: Option<String>,
    /// The command line, as typed at the shell's prompt.
    pub command: String,
    /// Interrupt the command (Ctrl-C, then SIGKILL) after this many milliseconds.
    pub timeout_ms: Option<u64>,
    /// Answer `running` after this many milliseconds (default 10000, at most 600000) and
    /// let the command go on; follow it with `task_status`.
    pub yield_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatusParams {
    pub task_id: String,
    /// Wait up to this many milliseconds (at most 600000) for a running command to end or
    /// ask for input.
    pub wait_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CancelParams {
    pub task_id: String,
}

/// A command's state: what `run`, `task_status` and `task_cancel` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CommandResult {
    /// `completed`, `running`, `input_required`, `failed` or `canceled`.
    pub status: &'static str,
    /// The command's exit status, once it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The command's output as plain text (no terminal escapes), its middle cut with a
    /// marker when it is long.
    pub output: String,
    /// What the program asks for, when `status` is `input_required` (answer with `send_keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub task_id: String,
    pub session_id: String,
    /// Where the session's output stands now: `read_output` or `wait_for` after it see only
    /// what comes next.
    pub cursor: u64,
}

fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Completed => "completed",
        TaskState::Failed | TaskState::Rejected => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired | TaskState::AuthRequired => "input_required",
        _ => "running",
    }
}

#[tool_router(router = session_tools, vis = "pub(super)")]
impl Terminal {
    /// Starts a terminal session (a sandboxed shell unless `command` names a program) that a
    /// person can watch at `ui_url`.
    #[tool(annotations(read_only_hint = false, destructive_hint = false))]
    async fn session_create(
        &self,
        Parameters(p): Parameters<CreateParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Created>, ToolError> {
        let who = self.allowed(&ctx, Scope::Control, "creating a session")?;
        if who.session_id.is_some() {
            return Err(ToolError::new(
                "PERMISSION_DENIED",
                "a session-bound token cannot create sessions",
            ));
        }
        let sandbox = (p.sandbox.map(serde_json::from_value).transpose())
            .map_err(|e| ToolError::invalid(format!("sandbox: {e}")))?;
        let sessions = &self.terminals.sessions;
        let spec = SpecRequest {
            argv: None,
            command: p.command,
            cwd: p.cwd,
            env: None,
            session_backend: None,
            session_class: None,
            cols: None,
            rows: None,
            label: p.label,
            sandbox,
            admin: who.scope >= Scope::Admin,
            ..Default::default()
        }
        .into_spec(sessions.settings())
        .map_err(|e| match e {
            crate::sessions::SpecError::Forbidden(m) => ToolError::new("PERMISSION_DENIED", m),
            e => ToolError::invalid(e.to_string()),
        })?;
        let row = sessions.create(spec).await.map_err(ToolError::internal)?;
        if let Some(h) = sessions.live(&SessionId::from(&row.id)).filter(|h| h.shell) {
            let _ = tokio::time::timeout(crate::sessions::READY_WAIT, h.prompted()).await;
        }
        Ok(Json(Created {
            ui_url: self.terminals.ui_url(&row.id),
            session_id: row.id,
            label: row.label,
        }))
    }

    /// Lists the sessions this token may see, running and closed.
    #[tool(annotations(read_only_hint = true))]
    async fn session_list(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SessionList>, ToolError> {
        let who = self.who(&ctx)?;
        let views = self
            .terminals
            .sessions
            .list()
            .await
            .map_err(ToolError::internal)?;
        let sessions = views
            .into_iter()
            .filter(|v| who.sees_session(&v.row.id))
            .map(|v| SessionSummary {
                ui_url: self.terminals.ui_url(&v.row.id),
                session_id: v.row.id,
                label: v.row.label,
                state: v.row.state,
                argv: v.row.argv,
                workspace: v.row.workspace,
            })
            .collect();
        Ok(Json(SessionList { sessions }))
    }

    /// Ends a session: its programs are hung up, then killed.
    #[tool(annotations(read_only_hint = false, destructive_hint = true))]
    async fn session_close(
        &self,
        Parameters(p): Parameters<SessionParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Closed>, ToolError> {
        let who = self.allowed(&ctx, Scope::Control, "closing a session")?;
        let sessions = &self.terminals.sessions;
        self.terminals.live(&who, &p.session_id)?;
        sessions
            .terminate(&SessionId::from(&p.session_id), wire::CloseReason::Killed)
            .await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while sessions.live(&SessionId::from(&p.session_id)).is_some()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let state = match sessions.live(&SessionId::from(&p.session_id)) {
            Some(_) => "closing",
            None => "closed",
        };
        Ok(Json(Closed {
            session_id: p.session_id,
            state: state.into(),
        }))
    }

    /// Runs a command line in a session's shell, exactly as an A2A task does, and returns
    /// its output and exit code. A command still going after `yield_ms` comes back as
    /// `running` and keeps going: follow it with `task_status`. Cancelling the call
    /// interrupts the command (Ctrl-C).
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = true
    ))]
    async fn run(
        &self,
        Parameters(p): Parameters<RunParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<CommandResult>, ToolError> {
        let who = self.allowed(&ctx, Scope::Control, "running a command")?;
        if p.command.trim().is_empty() {
            return Err(ToolError::invalid("command is empty"));
        }
        let pooled = p.session_id.is_none();
        let session_id = match p.session_id {
            Some(sid) => Some(self.known(&who, &sid).await.map(|()| sid)?),
            None => self.idle_shell(&who).await,
        };
        let message = Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            context_id: session_id,
            task_id: None,
            role: Role::User,
            parts: vec![Part::text(p.command)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        };
        let req = SendMessageRequest {
            tenant: None,
            message,
            configuration: Some(SendMessageConfiguration::default()),
            metadata: None,
        };
        let via = Via {
            version: Version::V1,
            extensions: &[],
        };
        let stream = self.terminals.tasks.send_stream(&who, req, via).await?;
        let (task_id, sid) = (stream.first.id.clone(), stream.first.context_id.clone());
        if pooled {
            let mut shells = self.terminals.shells.lock().unwrap();
            shells.insert(who.token_id.clone(), (sid.clone(), task_id.clone()));
        }
        if let Some(limit) = p.timeout_ms.map(Duration::from_millis) {
            let (tasks, who, id) = (self.terminals.tasks.clone(), who.clone(), task_id.clone());
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                let _ = tasks.cancel(&who, &id).await;
            });
        }
        let progress = Progress::of(&ctx);
        tokio::select! {
            _ = follow(stream, super::wait(p.yield_ms, DEFAULT_YIELD), progress) => {}
            _ = ctx.ct.cancelled() => {
                let _ = self.terminals.tasks.cancel(&who, &task_id).await;
            }
        }
        self.result(&who, &task_id).await.map(Json)
    }

    /// The state of a command `run` left running: the same shape as `run`'s, waiting up to
    /// `wait_ms` for it to end or ask for input.
    #[tool(annotations(read_only_hint = true))]
    async fn task_status(
        &self,
        Parameters(p): Parameters<StatusParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<CommandResult>, ToolError> {
        let who = self.who(&ctx)?;
        let task = self.terminals.tasks.get(&who, &p.task_id, Some(0)).await?;
        let wait = super::wait(p.wait_ms, Duration::ZERO);
        if !wait.is_zero()
            && !task.status.state.is_terminal()
            && !task.status.state.is_interrupted()
            && let Ok(stream) = self.terminals.tasks.subscribe(&who, &p.task_id).await
        {
            tokio::select! {
                _ = follow(stream, wait, Progress::of(&ctx)) => {}
                _ = ctx.ct.cancelled() => {}
            }
        }
        self.result(&who, &p.task_id).await.map(Json)
    }

    /// Interrupts a command (Ctrl-C, then SIGKILL of its job), or takes it out of the
    /// session's queue, and returns its final state.
    #[tool(annotations(read_only_hint = false, destructive_hint = true))]
    async fn task_cancel(
        &self,
        Parameters(p): Parameters<CancelParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<CommandResult>, ToolError> {
        let who = self.allowed(&ctx, Scope::Control, "cancelling a command")?;
        self.terminals.tasks.cancel(&who, &p.task_id).await?;
        self.result(&who, &p.task_id).await.map(Json)
    }
}

impl Terminal {
    /// `sid`, when it names a session (of any node) that `who` may see.
    pub(super) async fn known(&self, who: &Principal, sid: &str) -> Result<(), ToolError> {
        let view = (self.terminals.sessions.view(&SessionId::from(sid)).await)
            .map_err(ToolError::internal)?;
        match view.filter(|_| who.sees_session(sid)) {
            Some(_) => Ok(()),
            None => Err(ToolError::new("NOT_FOUND", format!("no session {sid}"))),
        }
    }

    /// This token's pooled shell from an earlier `run`, when it still runs and is idle.
    async fn idle_shell(&self, who: &Principal) -> Option<String> {
        let kept = self
            .terminals
            .shells
            .lock()
            .unwrap()
            .get(&who.token_id)
            .cloned();
        let (sid, last_task) = kept?;
        self.terminals.sessions.live(&SessionId::from(&sid))?;
        let task = self
            .terminals
            .tasks
            .get(who, &last_task, Some(0))
            .await
            .ok()?;
        task.status.state.is_terminal().then_some(sid)
    }

    /// The task's state as a tool answers it.
    async fn result(&self, who: &Principal, task_id: &str) -> Result<CommandResult, ToolError> {
        let task = self.terminals.tasks.get(who, task_id, Some(0)).await?;
        let cursor = match self
            .terminals
            .sessions
            .live(&SessionId::from(&task.context_id))
        {
            Some(h) => h.current_sequence(),
            None => (self
                .terminals
                .sessions
                .view(&SessionId::from(&task.context_id))
                .await)
                .map_err(ToolError::internal)?
                .map_or(0, |v| v.row.last_sequence),
        };
        Ok(command_result(task, cursor))
    }
}

fn command_result(task: Task, cursor: u64) -> CommandResult {
    let state = task.status.state;
    let status_message = task.status.message.as_ref();
    let exit_code = (status_message.and_then(|m| m.metadata.as_ref()))
        .and_then(|m| m.get("exit_code")?.as_i64())
        .and_then(|c| i32::try_from(c).ok());
    let raw: String = (task.artifacts.iter().flatten())
        .filter(|a| a.artifact_id == crate::executor::shell::OUTPUT_ARTIFACT)
        .flat_map(|a| a.parts.iter().map(part_text))
        .collect();
    CommandResult {
        status: state_name(state),
        exit_code,
        output: text::bounded(text::plain(raw.as_bytes())),
        prompt: (state == TaskState::InputRequired)
            .then(|| status_message.map(|m| text::plain(m.text().as_bytes())))
            .flatten(),
        task_id: task.id,
        session_id: task.context_id,
        cursor,
    }
}

fn part_text(p: &Part) -> &str {
    match &p.content {
        wire::a2a::Content::Text(t) => t,
        _ => "",
    }
}

/// Where a long call reports progress: the client's token for this request, if it sent one.
struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

impl Progress {
    fn of(ctx: &RequestContext<RoleServer>) -> Option<Progress> {
        Some(Progress {
            peer: ctx.peer.clone(),
            token: ctx.meta.get_progress_token()?,
        })
    }
}

/// Follows a task's stream until it ends or is interrupted, or `wait` passes; reports its
/// output as progress (bytes so far, with the latest line) at most every `PROGRESS_EVERY`.
async fn follow(stream: TaskStream, wait: Duration, progress: Option<Progress>) {
    let deadline = tokio::time::Instant::now() + wait;
    let events = stream.into_events();
    let mut events = std::pin::pin!(events);
    let (mut bytes, mut last_sent) = (0usize, None::<tokio::time::Instant>);
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            _ = tokio::time::sleep_until(deadline) => return,
        };
        let Some(Ok(StreamResponse::ArtifactUpdate(update))) = event else {
            match event {
                Some(Ok(_)) => continue,
                _ => return,
            }
        };
        let Some(p) = &progress else { continue };
        let chunk: String = update.artifact.parts.iter().map(part_text).collect();
        bytes += chunk.len();
        if last_sent.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            continue;
        }
        last_sent = Some(tokio::time::Instant::now());
        let plain = text::plain(chunk.as_bytes());
        let line = plain
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let params = ProgressNotificationParam::new(p.token.clone(), bytes as f64)
            .with_message(text::tail(line, 200).to_owned());
        let _ = p.peer.notify_progress(params).await;
    }
}
