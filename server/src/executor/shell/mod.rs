//! The shell executor: a message's command is typed into a session's shell, so everyone
//! watching sees it run. `contextId` names the session; a message without one gets a new
//! session running the default shell. The session's owner task follows the command by its
//! OSC 133 marks (`sessions::actor::shell`, where the PTY's output is read) and reports
//! `TaskEvent`s; this executor turns them into updates: output into the artifact, prompts
//! into INPUT_REQUIRED, the exit status into the terminal state. A message's files go in
//! before its command and named outputs come back after it (`files`).

mod files;

use crate::sessions::SessionId;
use serde_json::Value;
use tokio::sync::mpsc;
use wire::a2a::{Artifact, Content, Message, Part, Task, TaskState};

pub use self::files::FileAccess;
use super::{Executor, ExecutorRefusal, Plan, Run, Update, Work};
use crate::a202;
use crate::auth::Principal;
use crate::files::RelPath;
use crate::sessions::{
    SessionCommand, SessionHandle, Sessions, SpecRequest, TaskEvent, TaskId, TaskRun,
};

/// Output kept in a task's artifact; beyond it the artifact says it was cut.
pub const MAX_OUTPUT: usize = 1024 * 1024;

pub const OUTPUT_ARTIFACT: &str = "output";

#[derive(Clone)]
pub struct Shell {
    sessions: Sessions,
    files: FileAccess,
}

#[async_trait::async_trait]
impl Executor for Shell {
    async fn plan(
        &self,
        who: &Principal,
        message: &mut Message,
        _with_objects: bool,
        _streaming: bool,
        work: Work,
    ) -> Result<Plan, ExecutorRefusal> {
        let line = command_line(message)?;
        let outputs = files::requested_outputs(message)?;
        files::check_inputs(&self.files, message)?;
        let session = self.session(who, message).await?;
        files::take_inputs(&self.files, &session, self.sessions.audit(), message).await?;
        let run = CommandRun {
            session,
            line,
            outputs,
            shell: self.clone(),
        };
        Ok(Plan::Task {
            context_id: run.session.id.to_string(),
            confined: run.session.is_sandboxed(),
            start: Box::pin(start(run, work)),
        })
    }

    async fn answer(&self, task: &Task, answer: Message) -> Result<(), ExecutorRefusal> {
        if answer.text().contains(['\n', '\r']) {
            return Err(ExecutorRefusal::InvalidParams(
                "an answer is one line".into(),
            ));
        }
        let Some(session) = self.sessions.live(&SessionId::from(&task.context_id)) else {
            return Err(ExecutorRefusal::Unsupported(format!(
                "task {} no longer runs",
                task.id
            )));
        };
        let task_id = TaskId(task.id.clone());
        let typed = session
            .ask(|reply| SessionCommand::AnswerTask(task_id, answer, reply))
            .await
            .unwrap_or(false);
        if !typed {
            return Err(ExecutorRefusal::Unsupported(format!(
                "task {} is no longer waiting for input",
                task.id
            )));
        }
        Ok(())
    }

    /// Ctrl-C to the task's command (or takes it out of the queue), then SIGKILL to its
    /// foreground job after the grace period.
    async fn cancel(&self, task: &Task) {
        if let Some(session) = self.sessions.live(&SessionId::from(&task.context_id)) {
            session
                .tell(SessionCommand::CancelTask(TaskId(task.id.clone())))
                .await;
        }
    }
}

impl Shell {
    pub fn new(sessions: Sessions, files: FileAccess) -> Shell {
        Shell { sessions, files }
    }

    /// The session a message runs in: the running shell session its `contextId` names
    /// (visible to `who`), or a new one with the default shell: one from the pool, unless
    /// the message's data part asks for its own cwd or env (its shell then starts there).
    async fn session(
        &self,
        who: &Principal,
        message: &Message,
    ) -> Result<SessionHandle, ExecutorRefusal> {
        let handle = match message.context_id.as_deref() {
            Some(sid) => self
                .sessions
                .live(&SessionId::from(sid))
                .filter(|_| who.sees_session(sid))
                .ok_or_else(|| {
                    ExecutorRefusal::InvalidParams(format!(
                        "contextId {sid} names no running session"
                    ))
                })?,
            None => {
                if who.session_id.is_some() {
                    return Err(ExecutorRefusal::PermissionDenied(
                        "a session-bound token can only send to its session (set contextId)".into(),
                    ));
                }
                let own = own_place(message, who)?;
                let pooled = match own {
                    None => self.sessions.take_pooled().await,
                    Some(_) => None,
                };
                match pooled {
                    Some(handle) => handle,
                    None => {
                        if let Some(id) = own.as_ref().and_then(|o| o.from_snapshot.as_deref())
                            && self.sessions.store().snapshots().get(id).await?.is_none()
                        {
                            return Err(ExecutorRefusal::InvalidParams(format!(
                                "from_snapshot {id} names no snapshot"
                            )));
                        }
                        let spec = own
                            .unwrap_or_default()
                            .into_spec(self.sessions.settings())
                            .map_err(|e| match e {
                                crate::sessions::SpecError::Forbidden(m) => {
                                    ExecutorRefusal::PermissionDenied(m)
                                }
                                e => ExecutorRefusal::InvalidParams(e.to_string()),
                            })?;
                        let row = self.sessions.create(spec).await?;
                        let handle =
                            self.sessions
                                .live(&SessionId::from(&row.id))
                                .ok_or_else(|| {
                                    ExecutorRefusal::Unsupported(
                                        "the new session failed to start".into(),
                                    )
                                })?;
                        let waited = crate::sessions::READY_WAIT;
                        if handle.shell
                            && tokio::time::timeout(waited, handle.prompted()).await != Ok(true)
                        {
                            handle
                                .tell(crate::sessions::SessionCommand::Terminate(
                                    wire::CloseReason::Error,
                                ))
                                .await;
                            return Err(ExecutorRefusal::Unsupported(format!(
                                "the new session's shell printed no prompt within {} s (do its \
                                 login files wait for something?); it was ended",
                                waited.as_secs()
                            )));
                        }
                        handle
                    }
                }
            }
        };
        if !handle.shell {
            return Err(ExecutorRefusal::Unsupported(format!(
                "session {} runs a program, not a shell with integration; tasks need a shell session",
                handle.id
            )));
        }
        Ok(handle)
    }
}

/// How a task's command ended, as the session reported it.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Exited(Option<i32>),
    Dequeued,
    SessionEnded,
}

/// A planned task's command: what it types where, and the files it returns.
struct CommandRun {
    session: SessionHandle,
    line: String,
    outputs: Vec<RelPath>,
    shell: Shell,
}

/// Queues the line in the session, where it runs after the tasks before it; then the rest
/// of the work follows it. A session that refuses the task closes its events: the task then
/// ends as "the session ended".
async fn start(run: CommandRun, work: Work) -> Run {
    let (events, progress) = mpsc::unbounded_channel();
    let queued = TaskRun {
        task_id: work.task_id.clone(),
        line: run.line.clone(),
        events,
    };
    let session = &run.session;
    if let Some(Err(refusal)) = session
        .ask(|reply| SessionCommand::RunTask(queued, reply))
        .await
    {
        tracing::warn!(task_id = work.task_id, reason = %refusal.message, "the session refused the task");
    }
    Box::pin(follow(progress, work, run))
}

/// Turns what the session reports of a task into updates, up to its terminal state; the
/// output files of a command that exited go out as artifacts before it.
async fn follow(mut progress: mpsc::UnboundedReceiver<TaskEvent>, work: Work, run: CommandRun) {
    let Work {
        updates, cancel, ..
    } = work;
    let mut output = Output::default();
    let outcome = loop {
        let update = match progress.recv().await {
            Some(TaskEvent::Started) => Update::status(TaskState::Working, None),
            Some(TaskEvent::Output(bytes)) => match output.take(&bytes) {
                Some(update) => update,
                None => continue,
            },
            Some(TaskEvent::InputRequired(prompt)) => {
                Update::status(TaskState::InputRequired, Some(prompt))
            }
            Some(TaskEvent::Resumed(answer)) => Update::Answered(answer),
            Some(TaskEvent::Finished(code)) => break Outcome::Exited(code),
            Some(TaskEvent::Dequeued) => break Outcome::Dequeued,
            Some(TaskEvent::Ended) | None => break Outcome::SessionEnded,
        };
        if updates.send(update).is_err() {
            return;
        }
    };
    let canceled = *cancel.borrow();
    let (state, text) = match (outcome, canceled) {
        (Outcome::Dequeued, _) | (Outcome::Exited(_), true) => {
            (TaskState::Canceled, "canceled".to_owned())
        }
        (Outcome::Exited(Some(0)), false) => (TaskState::Completed, "exit code 0".to_owned()),
        (Outcome::Exited(Some(code)), false) => (TaskState::Failed, format!("exit code {code}")),
        (Outcome::Exited(None), false) => (
            TaskState::Failed,
            "the shell reported no exit status".to_owned(),
        ),
        (Outcome::SessionEnded, _) => (TaskState::Failed, "the session ended".to_owned()),
    };
    let mut text = text;
    if let (Outcome::Exited(_), false) = (outcome, canceled) {
        let audit = run.shell.sessions.audit();
        let (artifacts, missing) =
            files::output_artifacts(&run.shell.files, &run.session, audit, &run.outputs).await;
        for a in artifacts {
            let update = Update::Artifact {
                whole: a.clone(),
                chunk: a,
                append: false,
                last_chunk: true,
            };
            if updates.send(update).is_err() {
                return;
            }
        }
        if !missing.is_empty() {
            text.push_str(&format!("; outputs not returned: {}", missing.join("; ")));
        }
    }
    let exit_code = match outcome {
        Outcome::Exited(code) => code,
        _ => None,
    };
    let _ = updates.send(Update::Status {
        state,
        text: Some(text),
        exit_code,
    });
}

/// A task's output so far, up to `MAX_OUTPUT`.
#[derive(Default)]
struct Output {
    kept: Vec<u8>,
    cut: bool,
}

impl Output {
    /// Takes a read of the command's output; the artifact update it makes, if any of it
    /// still fits.
    fn take(&mut self, bytes: &[u8]) -> Option<Update> {
        let room = MAX_OUTPUT.saturating_sub(self.kept.len());
        self.cut |= bytes.len() > room;
        let kept = &bytes[..bytes.len().min(room)];
        if kept.is_empty() {
            return None;
        }
        let append = !self.kept.is_empty();
        self.kept.extend_from_slice(kept);
        Some(Update::Artifact {
            whole: output_artifact(&self.kept, self.cut),
            chunk: output_artifact(kept, false),
            append,
            last_chunk: false,
        })
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

/// The command line a message asks for: a data part `{argv, cwd, env, timeout_secs}`, or
/// its text parts as one line. (A data part may also name `outputs`; see `files`.)
pub fn command_line(message: &Message) -> Result<String, ExecutorRefusal> {
    let invalid = |m: &str| Err(ExecutorRefusal::InvalidParams(m.into()));
    if let Some(data) = command_data(message) {
        let Some(argv) = data.get("argv").and_then(Value::as_array) else {
            return invalid("a data part must carry argv (an array of strings)");
        };
        let argv: Option<Vec<&str>> = argv.iter().map(Value::as_str).collect();
        let argv = match argv {
            Some(a) if !a.is_empty() => a,
            _ => return invalid("argv must be a non-empty array of strings"),
        };
        let mut line = String::new();
        if let Some(cwd) = data.get("cwd").and_then(Value::as_str) {
            line.push_str(&format!("cd {} && ", quote(cwd)));
        }
        if let Some(env) = data.get("env").and_then(Value::as_object) {
            for (k, v) in env {
                let Some(v) = v.as_str().filter(|_| is_env_name(k)) else {
                    return invalid("env must map variable names to strings");
                };
                line.push_str(&format!("{k}={} ", quote(v)));
            }
        }
        if let Some(secs) = data.get("timeout_secs").and_then(Value::as_u64) {
            line.push_str(&format!("timeout {secs} "));
        }
        line.push_str(&argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "));
        return Ok(line);
    }
    let text = message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            Content::Text(t) => Some(t.trim()),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if text.is_empty() && command_data_parts(message).next().is_some() {
        return invalid(
            "a data part must carry argv (an array of strings), or come with text parts",
        );
    }
    if text.is_empty() {
        return invalid("the message carries no command: give text parts or a data part with argv");
    }
    if text.contains(['\n', '\r']) || text.chars().any(|c| c.is_control() && c != '\t') {
        return invalid("the command must be one line without control characters");
    }
    Ok(text)
}

/// The data part keys that ask for a session of the message's own.
const OWN_PLACE: [&str; 4] = ["cwd", "env", "sandbox", "from_snapshot"];

/// The cwd, env, sandbox and snapshot a message's data part asks for, as a session
/// request (`None`: the default shell will do). `from_snapshot` branches from a snapshot
/// by message alone.
fn own_place(message: &Message, who: &Principal) -> Result<Option<SpecRequest>, ExecutorRefusal> {
    let Some(data) = command_data(message).or_else(|| {
        command_data_parts(message).find(|d| OWN_PLACE.iter().any(|k| d.get(k).is_some()))
    }) else {
        return Ok(None);
    };
    let cwd = data.get("cwd").and_then(Value::as_str).map(str::to_owned);
    let env = data.get("env").and_then(Value::as_object).map(|env| {
        env.iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect()
    });
    let sandbox = data
        .get("sandbox")
        .map(|s| serde_json::from_value::<crate::sandbox::Request>(s.clone()))
        .transpose()
        .map_err(|e| ExecutorRefusal::InvalidParams(format!("sandbox: {e}")))?;
    let from_snapshot = data
        .get("from_snapshot")
        .map(|v| v.as_str().map(str::to_owned))
        .map(|v| {
            v.ok_or_else(|| {
                ExecutorRefusal::InvalidParams("from_snapshot must be a snapshot id".into())
            })
        })
        .transpose()?;
    let own = cwd.is_some() || env.is_some() || sandbox.is_some() || from_snapshot.is_some();
    Ok(own.then(|| SpecRequest {
        cwd,
        env,
        sandbox,
        admin: who.scope >= crate::auth::Scope::Admin,
        from_snapshot,
        ..SpecRequest::default()
    }))
}

/// The first data part that gives a command (`argv`).
pub fn command_data(message: &Message) -> Option<&Value> {
    command_data_parts(message).find(|d| d.get("argv").is_some())
}

/// The data parts that are not A202 objects' reader views.
fn command_data_parts(message: &Message) -> impl Iterator<Item = &Value> {
    message.parts.iter().filter_map(|p| match &p.content {
        Content::Data(d) if p.media_type.as_deref() != Some(a202::MEDIA_TYPE) => Some(d),
        _ => None,
    })
}

fn is_env_name(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Quotes a word for bash: bare when safe, '…' otherwise, and $'…' when it holds control
/// characters, so a command always stays on one line.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        return s.to_owned();
    }
    if s.chars().any(char::is_control) {
        let mut out = String::from("$'");
        for c in s.chars() {
            match c {
                '\\' => out.push_str(r"\\"),
                '\'' => out.push_str(r"\'"),
                '\n' => out.push_str(r"\n"),
                '\t' => out.push_str(r"\t"),
                '\r' => out.push_str(r"\r"),
                c if c.is_control() => out.push_str(&format!(r"\x{:02x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('\'');
        return out;
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wire::a2a::{Part, Role};

    use super::*;

    fn message(parts: Vec<Part>) -> Message {
        Message {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    #[test]
    fn data_parts_become_a_quoted_command_line() {
        let data = Part {
            content: Content::Data(
                json!({ "argv": ["printf", "%s\n", "it's"], "cwd": "/tmp/a b", "env": { "X": "1 2" }, "timeout_secs": 5 }),
            ),
            media_type: None,
            filename: None,
            metadata: None,
        };
        assert_eq!(
            command_line(&message(vec![data])).unwrap(),
            r"cd '/tmp/a b' && X='1 2' timeout 5 printf $'%s\n' 'it'\''s'"
        );
        assert_eq!(
            command_line(&message(vec![Part::text(" ls "), Part::text("-la")])).unwrap(),
            "ls -la"
        );
        for bad in [
            vec![Part::text("a\nb")],
            vec![Part::text(" ")],
            vec![Part::text("x\u{1b}[1m")],
        ] {
            assert!(matches!(
                command_line(&message(bad)),
                Err(ExecutorRefusal::InvalidParams(_))
            ));
        }
    }
}
