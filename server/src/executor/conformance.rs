//! The conformance executor: plays the scripted behaviours of the A2A TCK agent scenarios
//! (`specs/a2a/tck-sut/*.feature`), chosen by messageId prefix.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;
use wire::a2a::{Artifact, Content, Message, Part, Task, TaskState};

use super::{Executor, ExecutorRefusal, Plan, Run, Update, Work};
use crate::auth::Principal;

/// Plays the scenario a message's id names. A task that asks for input waits for its
/// answer (or a cancel), then finishes.
#[derive(Default)]
pub struct Conformance {
    /// Tasks waiting for input, and where their answer goes.
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Message>>>>,
}

#[async_trait::async_trait]
impl Executor for Conformance {
    async fn plan(
        &self,
        _who: &Principal,
        message: &mut Message,
        with_objects: bool,
        streaming: bool,
        work: Work,
    ) -> Result<Plan, ExecutorRefusal> {
        if with_objects {
            return Err(ExecutorRefusal::Unsupported(
                "the conformance executor takes A202 objects only in a message without a command"
                    .into(),
            ));
        }
        let steps = match script(&message.message_id) {
            Script::Message(text) if !streaming => return Ok(Plan::Reply(text.to_owned())),
            Script::Message(text) => vec![Step::Status(TaskState::Completed, Some(text))],
            Script::Task(steps) => steps,
        };
        let context_id =
            (message.context_id.clone()).unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let waiting = self.waiting.clone();
        Ok(Plan::Task {
            context_id,
            confined: false,
            start: Box::pin(async move { Box::pin(play(steps, work, waiting)) as Run }),
        })
    }

    async fn answer(&self, task: &Task, answer: Message) -> Result<(), ExecutorRefusal> {
        let waiter = self.waiting.lock().unwrap().remove(&task.id);
        waiter.and_then(|w| w.send(answer).ok()).ok_or_else(|| {
            ExecutorRefusal::Unsupported(format!("task {} is no longer waiting for input", task.id))
        })
    }

    /// Nothing to stop: a playing script watches its cancel request.
    async fn cancel(&self, _task: &Task) {}
}

/// Plays a script's steps; one that ends asking for input waits for the answer and then
/// plays the answer's own scenario. A cancel stops it at once.
async fn play(
    mut steps: Vec<Step>,
    work: Work,
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Message>>>>,
) {
    let Work {
        task_id,
        updates,
        mut cancel,
    } = work;
    let mut artifact: Option<Artifact> = None;
    loop {
        let mut asks = false;
        for step in steps {
            if *cancel.borrow() {
                return;
            }
            let update = match step {
                Step::Status(state, text) => {
                    asks = state == TaskState::InputRequired;
                    Update::status(state, text.map(str::to_owned))
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
                    let whole = match artifact.take() {
                        Some(mut a) if append => {
                            a.parts.extend(chunk.parts.iter().cloned());
                            a
                        }
                        _ => chunk.clone(),
                    };
                    artifact = Some(whole.clone());
                    Update::Artifact {
                        whole,
                        chunk,
                        append,
                        last_chunk,
                    }
                }
                Step::Wait(d) => {
                    let _ = tokio::time::timeout(d, cancel.wait_for(|c| *c)).await;
                    continue;
                }
            };
            if updates.send(update).is_err() {
                return;
            }
        }
        if !asks {
            return;
        }
        let (answer, answered_rx) = oneshot::channel();
        waiting.lock().unwrap().insert(task_id.clone(), answer);
        let answer = tokio::select! {
            a = answered_rx => a.ok(),
            _ = cancel.wait_for(|c| *c) => None,
        };
        waiting.lock().unwrap().remove(&task_id);
        let Some(answer) = answer else { return };
        // The follow-up's own scenario plays on, in the same task.
        steps = match script(&answer.message_id) {
            Script::Task(steps) => steps,
            Script::Message(text) => vec![Step::Status(TaskState::Completed, Some(text))],
        };
        if updates.send(Update::Answered(answer)).is_err() {
            return;
        }
    }
}

/// One step of a scripted task.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Status(TaskState, Option<&'static str>),
    Artifact {
        part: Part,
        append: bool,
        last_chunk: bool,
    },
    Wait(Duration),
}

/// What a scripted scenario answers: a task that follows the steps, or a direct message.
#[derive(Debug, Clone, PartialEq)]
pub enum Script {
    Task(Vec<Step>),
    Message(&'static str),
}

/// How long the TCK's resubscription scenario keeps its task running ("2x streaming timeout").
const LONG_RUNNING: Duration = Duration::from_secs(4);

fn text(t: &'static str) -> Part {
    Part::text(t)
}

fn artifact(part: Part) -> Step {
    Step::Artifact {
        part,
        append: false,
        last_chunk: true,
    }
}

fn file_part(content: Content) -> Part {
    Part {
        content,
        media_type: Some("text/plain".into()),
        filename: Some("output.txt".into()),
        metadata: None,
    }
}

/// The scenario for a messageId (longest prefix wins); anything else completes.
pub fn script(message_id: &str) -> Script {
    use Step::{Status, Wait};
    use TaskState::{Completed, InputRequired, Rejected, Working};
    let working = Status(Working, None);
    let completed = Status(Completed, None);
    let streamed =
        |t: &'static str| Script::Task(vec![working.clone(), artifact(text(t)), completed.clone()]);
    const SCENARIOS: [&str; 17] = [
        "tck-artifact-file-url",
        "tck-stream-artifact-chunked",
        "tck-stream-artifact-file",
        "tck-stream-artifact-text",
        "tck-stream-ordering-001",
        "test-resubscribe-message-id",
        "tck-message-response",
        "tck-input-required",
        "tck-complete-task",
        "tck-artifact-text",
        "tck-artifact-file",
        "tck-artifact-data",
        "tck-reject-task",
        "tck-stream-001",
        "tck-stream-002",
        "tck-stream-003",
        "",
    ];
    let scenario = SCENARIOS
        .iter()
        .find(|p| message_id.starts_with(*p))
        .copied()
        .unwrap_or("");
    match scenario {
        "tck-complete-task" | "" => Script::Task(vec![Status(Completed, Some("Hello from TCK"))]),
        "tck-artifact-text" => {
            Script::Task(vec![artifact(text("Generated text content")), completed])
        }
        "tck-artifact-file" => Script::Task(vec![
            artifact(file_part(Content::Raw(b"Generated file content".to_vec()))),
            completed,
        ]),
        "tck-artifact-file-url" => Script::Task(vec![
            artifact(file_part(Content::Url(
                "https://example.com/output.txt".into(),
            ))),
            completed,
        ]),
        "tck-artifact-data" => Script::Task(vec![
            artifact(Part {
                content: Content::Data(json!({ "key": "value", "count": 42 })),
                media_type: Some("application/json".into()),
                filename: None,
                metadata: None,
            }),
            completed,
        ]),
        "tck-message-response" => Script::Message("Direct message response"),
        "tck-input-required" => {
            Script::Task(vec![Status(InputRequired, Some("Please provide input"))])
        }
        "tck-reject-task" => Script::Task(vec![Status(Rejected, Some("rejected"))]),
        "tck-stream-001" => streamed("Stream hello from TCK"),
        "tck-stream-002" => Script::Task(vec![completed]),
        "tck-stream-003" => streamed("Stream task lifecycle"),
        "tck-stream-ordering-001" => streamed("Ordered output"),
        "tck-stream-artifact-text" => streamed("Streamed text content"),
        "tck-stream-artifact-file" => Script::Task(vec![
            working,
            artifact(file_part(Content::Raw(b"Streamed file content".to_vec()))),
            completed,
        ]),
        "tck-stream-artifact-chunked" => Script::Task(vec![
            working,
            Step::Artifact {
                part: text("chunk-1 "),
                append: false,
                last_chunk: false,
            },
            Step::Artifact {
                part: text("chunk-2"),
                append: true,
                last_chunk: true,
            },
            completed,
        ]),
        "test-resubscribe-message-id" => Script::Task(vec![working, Wait(LONG_RUNNING), completed]),
        _ => unreachable!("every listed scenario has a script"),
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::{mpsc, watch};
    use wire::a2a::Role;

    use super::*;
    use crate::auth::Scope;

    fn message(id: &str) -> Message {
        Message {
            message_id: id.into(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts: vec![Part::text("hi")],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    /// Plans and starts `id`'s scenario as task "t"; its updates and its cancel request.
    async fn started(
        executor: &Conformance,
        id: &str,
    ) -> (mpsc::UnboundedReceiver<Update>, watch::Sender<bool>) {
        let (updates, updates_rx) = mpsc::unbounded_channel();
        let (cancel, cancel_rx) = watch::channel(false);
        let who = Principal {
            token_id: "t".into(),
            scope: Scope::Control,
            session_id: None,
            label: None,
            share_link: false,
        };
        let work = Work {
            task_id: "t".into(),
            updates,
            cancel: cancel_rx,
        };
        let Ok(Plan::Task { start, .. }) = executor
            .plan(&who, &mut message(id), false, false, work)
            .await
        else {
            panic!("{id} plans a task")
        };
        tokio::spawn(start.await);
        (updates_rx, cancel)
    }

    fn task(id: &str) -> Task {
        Task {
            id: id.into(),
            context_id: "c".into(),
            status: wire::a2a::TaskStatus {
                state: TaskState::InputRequired,
                message: None,
                timestamp: None,
            },
            artifacts: None,
            history: Vec::new(),
            metadata: None,
        }
    }

    #[tokio::test]
    async fn a_task_that_asks_for_input_waits_for_its_answer_then_completes() {
        let executor = Conformance::default();
        let (mut updates, _cancel) = started(&executor, "tck-input-required-1").await;
        assert_eq!(
            updates.recv().await,
            Some(Update::status(
                TaskState::InputRequired,
                Some("Please provide input".into())
            ))
        );
        executor
            .answer(&task("t"), message("answer"))
            .await
            .unwrap();
        assert!(
            matches!(updates.recv().await, Some(Update::Answered(m)) if m.message_id == "answer")
        );
        assert!(matches!(
            updates.recv().await,
            Some(Update::Status {
                state: TaskState::Completed,
                ..
            })
        ));
        assert_eq!(updates.recv().await, None);
        assert!(executor.answer(&task("t"), message("again")).await.is_err());
    }

    #[tokio::test]
    async fn an_answer_plays_its_own_scenario_on_the_waiting_task() {
        let executor = Conformance::default();
        let (mut updates, _cancel) = started(&executor, "tck-input-required-3").await;
        assert!(updates.recv().await.is_some());
        let ask_again = message("tck-input-required-again");
        executor.answer(&task("t"), ask_again).await.unwrap();
        assert!(matches!(updates.recv().await, Some(Update::Answered(_))));
        assert!(matches!(
            updates.recv().await,
            Some(Update::Status {
                state: TaskState::InputRequired,
                ..
            })
        ));
        let reject = message("tck-reject-task-then");
        executor.answer(&task("t"), reject).await.unwrap();
        assert!(matches!(updates.recv().await, Some(Update::Answered(_))));
        assert!(matches!(
            updates.recv().await,
            Some(Update::Status {
                state: TaskState::Rejected,
                ..
            })
        ));
        assert_eq!(updates.recv().await, None);
    }

    #[tokio::test]
    async fn a_cancel_stops_a_waiting_task_without_a_terminal_update() {
        let executor = Conformance::default();
        let (mut updates, cancel) = started(&executor, "tck-input-required-2").await;
        assert!(updates.recv().await.is_some());
        cancel.send_replace(true);
        assert_eq!(updates.recv().await, None);
        assert!(executor.answer(&task("t"), message("late")).await.is_err());
    }

    #[test]
    fn the_longest_prefix_picks_the_scenario() {
        assert!(
            matches!(script("tck-artifact-file-url-123"), Script::Task(s) if matches!(&s[0], Step::Artifact { part, .. } if part.content == Content::Url("https://example.com/output.txt".into())))
        );
        assert!(
            matches!(script("tck-artifact-file-9"), Script::Task(s) if matches!(&s[0], Step::Artifact { part, .. } if matches!(part.content, Content::Raw(_))))
        );
        assert_eq!(
            script("tck-message-response-1"),
            Script::Message("Direct message response")
        );
        assert_eq!(
            script("anything"),
            Script::Task(vec![Step::Status(
                TaskState::Completed,
                Some("Hello from TCK")
            )])
        );
    }

    #[test]
    fn chunked_artifacts_append_and_mark_the_last_chunk() {
        let Script::Task(steps) = script("tck-stream-artifact-chunked") else {
            panic!()
        };
        let chunks: Vec<(bool, bool)> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Artifact {
                    append, last_chunk, ..
                } => Some((*append, *last_chunk)),
                _ => None,
            })
            .collect();
        assert_eq!(chunks, [(false, false), (true, true)]);
    }
}
