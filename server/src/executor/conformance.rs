//! The conformance executor: plays the scripted behaviours of the A2A TCK agent scenarios
//! (`specs/a2a/tck-sut/*.feature`), chosen by messageId prefix.

use std::time::Duration;

use serde_json::json;
use wire::a2a::{Content, Part, TaskState};

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

/// A follow-up to a task that asked for input (now working) finishes it.
pub fn answered() -> Vec<Step> {
    vec![Step::Status(TaskState::Completed, Some("Hello from TCK"))]
}

#[cfg(test)]
mod tests {
    use super::*;

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
