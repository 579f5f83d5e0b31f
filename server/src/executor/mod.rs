//! What the agent does with a message. An `Executor` plans the work a message asks for and
//! reports its progress as `Update`s; the task service (`a2a`) persists and announces them,
//! and knows nothing of sessions or PTYs. `shell` types commands into a session's shell;
//! `conformance` plays the A2A TCK scenarios.

pub mod conformance;
pub mod shell;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use wire::a2a::{Artifact, Message, Task, TaskState};

use crate::auth::Principal;
use crate::sessions::Sessions;

/// The executor `--executor` chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Shell,
    Conformance,
}

impl Kind {
    /// Its name, as `--executor` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Shell => "shell",
            Kind::Conformance => "conformance",
        }
    }

    pub fn build(self, sessions: Sessions, files: shell::FileAccess) -> Arc<dyn Executor> {
        match self {
            Kind::Shell => Arc::new(shell::Shell::new(sessions, files)),
            Kind::Conformance => Arc::new(conformance::Conformance::default()),
        }
    }
}

/// What an executor reports about a task, in order. The channel closing before a terminal
/// state ends the task (CANCELED if it was canceled, else FAILED).
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// The task's state now; `exit_code` goes into the status message and the task.
    Status {
        state: TaskState,
        text: Option<String>,
        exit_code: Option<i32>,
    },
    /// The task's artifact as it now is, and the chunk that made it so.
    Artifact {
        whole: Artifact,
        chunk: Artifact,
        append: bool,
        last_chunk: bool,
    },
    /// The answer to an input request was taken: it joins the history and the task works.
    Answered(Message),
}

impl Update {
    pub fn status(state: TaskState, text: Option<String>) -> Update {
        Update::Status {
            state,
            text,
            exit_code: None,
        }
    }
}

/// Where a planned task reports, and the cancel request it watches.
pub struct Work {
    pub task_id: String,
    pub updates: mpsc::UnboundedSender<Update>,
    pub cancel: watch::Receiver<bool>,
}

/// What an executor makes of a message that starts something.
pub enum Plan {
    /// A direct answer; no task.
    Reply(String),
    /// A task in `context_id`. `start` begins the work once the task service has persisted
    /// the SUBMITTED task and follows it (a shell command is then queued in its session),
    /// and resolves to the rest of the work, which runs on its own.
    Task {
        context_id: String,
        /// The work runs in a sandboxed session (`runtime/v1` tells so on the task).
        confined: bool,
        start: BoxFuture<'static, Run>,
    },
}

/// The work of a task once it has started.
pub type Run = BoxFuture<'static, ()>;

/// Why an executor would not take a message, in the words of the A2A error it becomes.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorRefusal {
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

#[async_trait::async_trait]
pub trait Executor: Send + Sync {
    /// Plans the task a new message asks for. `with_objects`: the message also carries
    /// A202 objects; `streaming`: the sender streams the answer. What the executor takes
    /// out of the message (a file part's bytes) it may replace with a reference: the
    /// message as it leaves `plan` is the one the task's history keeps.
    async fn plan(
        &self,
        who: &Principal,
        message: &mut Message,
        with_objects: bool,
        streaming: bool,
        work: Work,
    ) -> Result<Plan, ExecutorRefusal>;

    /// Hands `answer` to `task`, which waits for input; its run then reports `Answered`.
    async fn answer(&self, task: &Task, answer: Message) -> Result<(), ExecutorRefusal>;

    /// Asks a running task to stop (its `Work::cancel` is already set).
    async fn cancel(&self, task: &Task);
}
