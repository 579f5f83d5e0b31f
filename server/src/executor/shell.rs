//! The shell executor: a message's command is typed into a session's shell, so everyone
//! watching sees it run. `contextId` names the session; a message without one gets a new
//! session running the default shell. The session's owner task follows the command by its
//! OSC 133 marks and reports `Progress`; the task service turns that into task states.

use serde_json::Value;
use tokio::sync::mpsc;
use wire::a2a::{Content, Message};

use crate::auth::Principal;
use crate::commerce;
pub use crate::sessions::TaskEvent as Progress;
use crate::sessions::{Command, SessionHandle, Sessions, SpecRequest, TaskRun};

/// Why the executor would not take a message, in the words of the A2A error it becomes.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

#[derive(Clone)]
pub struct Shell {
    sessions: Sessions,
}

impl Shell {
    pub fn new(sessions: Sessions) -> Shell {
        Shell { sessions }
    }

    /// The session a message runs in: the running shell session its `contextId` names
    /// (visible to `who`), or a new one with the default shell.
    pub async fn session(
        &self,
        who: &Principal,
        context_id: Option<&str>,
    ) -> Result<SessionHandle, Refused> {
        let handle = match context_id {
            Some(sid) => self
                .sessions
                .live(sid)
                .filter(|_| who.sees_session(sid))
                .ok_or_else(|| {
                    Refused::InvalidParams(format!("contextId {sid} names no running session"))
                })?,
            None => {
                if who.session_id.is_some() {
                    return Err(Refused::PermissionDenied(
                        "a session-bound token can only send to its session (set contextId)".into(),
                    ));
                }
                let spec = SpecRequest::default()
                    .into_spec(self.sessions.settings())
                    .map_err(|e| Refused::InvalidParams(e.to_string()))?;
                let row = self.sessions.create(spec).await?;
                self.sessions
                    .live(&row.id)
                    .ok_or_else(|| Refused::Unsupported("the new session failed to start".into()))?
            }
        };
        if !handle.shell {
            return Err(Refused::Unsupported(format!(
                "session {} runs a program, not a shell with integration; tasks need a shell session",
                handle.id
            )));
        }
        Ok(handle)
    }

    /// Queues `line` as task `task_id` in the session; it runs after the tasks before it,
    /// and its progress goes to `progress` (which closes if the session refuses it: the task
    /// then ends as "the session ended").
    pub async fn queue(
        &self,
        session: &SessionHandle,
        task_id: &str,
        line: String,
        progress: mpsc::UnboundedSender<Progress>,
    ) {
        let run = TaskRun {
            task_id: task_id.to_owned(),
            line,
            events: progress,
        };
        if let Some(Err(refusal)) = session.ask(|reply| Command::RunTask(run, reply)).await {
            tracing::warn!(task_id, reason = %refusal.message, "the session refused the task");
        }
    }

    /// Types `answer` for the task that waits for input in session `context_id`; false when
    /// it no longer waits (or the session is gone).
    pub async fn answer(&self, context_id: &str, task_id: &str, answer: Message) -> bool {
        let Some(session) = self.sessions.live(context_id) else {
            return false;
        };
        let task_id = task_id.to_owned();
        session
            .ask(|reply| Command::AnswerTask(task_id, answer, reply))
            .await
            .unwrap_or(false)
    }

    /// Whether session `context_id` still runs (a task waiting there can be answered).
    pub fn runs(&self, context_id: &str) -> bool {
        self.sessions.live(context_id).is_some()
    }

    /// Ctrl-C to the task's command (or takes it out of the queue), then SIGKILL to its
    /// foreground job after the grace period.
    pub async fn cancel(&self, context_id: &str, task_id: &str) {
        if let Some(session) = self.sessions.live(context_id) {
            session.tell(Command::CancelTask(task_id.to_owned())).await;
        }
    }
}

/// The command line a message asks for: a data part `{argv, cwd, env, timeout_secs}`, or
/// its text parts as one line.
pub fn command_line(message: &Message) -> Result<String, Refused> {
    let invalid = |m: &str| Err(Refused::InvalidParams(m.into()));
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
    if text.is_empty() {
        return invalid("the message carries no command: give text parts or a data part with argv");
    }
    if text.contains(['\n', '\r']) || text.chars().any(|c| c.is_control() && c != '\t') {
        return invalid("the command must be one line without control characters");
    }
    Ok(text)
}

/// The first data part that is not an A202 object's reader view.
pub fn command_data(message: &Message) -> Option<&Value> {
    message.parts.iter().find_map(|p| match &p.content {
        Content::Data(d) if p.media_type.as_deref() != Some(commerce::MEDIA_TYPE) => Some(d),
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
                Err(Refused::InvalidParams(_))
            ));
        }
    }
}
