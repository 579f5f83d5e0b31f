//! Reading A2A 1.0 answers and stream events (from HTTP, the CLI or pty-ws) as wire types.

use serde_json::Value;
use wire::a2a::{Content, Part, StreamResponse, Task, TaskState};

/// The task an A2A 1.0 answer carries (`{"task": …}`, or the task itself).
pub fn task_in(body: &Value) -> Task {
    let task = body.get("task").unwrap_or(body);
    serde_json::from_value(task.clone()).unwrap_or_else(|e| panic!("not a task ({e}): {body}"))
}

/// The text of a task's artifacts, in order.
pub fn artifact_text(task: &Task) -> String {
    task.artifacts
        .iter()
        .flatten()
        .map(|a| parts_text(&a.parts))
        .collect()
}

/// One 1.0 stream event (`{"task": …}`, `{"statusUpdate": …}`, …).
pub fn event_of(v: &Value) -> StreamResponse {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("not a stream event ({e}): {v}"))
}

/// The task state an event reports: a task's, or a status update's.
pub fn state_of(v: &Value) -> Option<TaskState> {
    match event_of(v) {
        StreamResponse::Task(t) => Some(t.status.state),
        StreamResponse::StatusUpdate(u) => Some(u.status.state),
        _ => None,
    }
}

/// The artifact text an event carries: an artifact update's, or a task's.
pub fn text_of(v: &Value) -> String {
    match event_of(v) {
        StreamResponse::Task(t) => artifact_text(&t),
        event => update_text(&event),
    }
}

/// The text an artifact update carries (none for other events).
pub fn update_text(event: &StreamResponse) -> String {
    match event {
        StreamResponse::ArtifactUpdate(u) => parts_text(&u.artifact.parts),
        _ => String::new(),
    }
}

fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match &p.content {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}
