//! The session's A2A tasks on the terminal page: each command with its state, exit code and
//! duration, kept current; choosing one shows its output artifact.

use leptos::prelude::*;
use serde::Deserialize;

use crate::api::Auth;
use wire::a2a::{Task, TaskState};

/// How often the list (and a running task's output) refreshes.
#[cfg(feature = "hydrate")]
const REFRESH_MS: u32 = 1000;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
struct TaskPage {
    tasks: Vec<Task>,
}

/// A task as a row shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) command: String,
    pub(crate) state: TaskState,
    pub(crate) exit_code: Option<i64>,
    /// Milliseconds from creation to the last status change (to now while it runs).
    duration_ms: Option<f64>,
}

#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
impl Row {
    pub(crate) fn of(task: &Task, now_ms: f64) -> Row {
        let created = uuid_v7_ms(&task.id);
        let ended = task.status.timestamp.as_deref().and_then(timestamp_ms);
        let end = if task.status.state.is_terminal() {
            ended
        } else {
            Some(now_ms)
        };
        Row {
            id: task.id.clone(),
            command: task.history.first().map(|m| m.text()).unwrap_or_default(),
            state: task.status.state,
            exit_code: task
                .metadata
                .as_ref()
                .and_then(|m| m.get("exit_code"))
                .and_then(|c| c.as_i64()),
            duration_ms: created.zip(end).map(|(c, e)| (e - c).max(0.0)),
        }
    }
}

/// The creation time of a UUIDv7 (the ids ptyhost gives tasks): its first 48 bits.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub(crate) fn uuid_v7_ms(id: &str) -> Option<f64> {
    let hex: String = id.chars().filter(|c| *c != '-').take(12).collect();
    (hex.len() == 12 && id.as_bytes().get(14) == Some(&b'7'))
        .then(|| u64::from_str_radix(&hex, 16).ok().map(|ms| ms as f64))
        .flatten()
}

#[cfg(feature = "hydrate")]
fn timestamp_ms(ts: &str) -> Option<f64> {
    Some(js_sys::Date::parse(ts)).filter(|t| t.is_finite())
}

#[cfg(not(feature = "hydrate"))]
#[allow(dead_code)]
fn timestamp_ms(_: &str) -> Option<f64> {
    None
}

/// `completed`, `input-required`, …
pub(crate) fn state_label(state: TaskState) -> String {
    state
        .name()
        .trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-")
}

fn duration_label(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if ms < 60_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!(
            "{}m {:02}s",
            (ms / 60_000.0) as u64,
            ((ms % 60_000.0) / 1000.0) as u64
        )
    }
}

/// The output as text: escape sequences dropped, CRLF as newlines.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
fn plain_output(task: &Task) -> String {
    let raw: String = task
        .artifacts
        .iter()
        .flatten()
        .flat_map(|a| a.parts.iter())
        .filter_map(|p| match &p.content {
            wire::a2a::Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates, then one final byte.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ST.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[component]
pub fn TaskList(sid: Signal<String>) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let rows = RwSignal::new(Vec::<Row>::new());
    let chosen = RwSignal::new(None::<String>);
    let output = RwSignal::new(None::<(String, String)>);
    let error = RwSignal::new(None::<String>);

    #[cfg(feature = "hydrate")]
    let load = move || {
        let Some(token) = auth.token.get_untracked() else {
            return;
        };
        let sid = sid.get_untracked();
        let picked = chosen.get_untracked();
        leptos::task::spawn_local(async move {
            let page = crate::api::get_a2a::<TaskPage>(
                &format!("/tasks?contextId={sid}&pageSize=20&includeArtifacts=false"),
                &token,
            )
            .await;
            let now = js_sys::Date::now();
            match page {
                Ok(page) => {
                    rows.try_set(page.tasks.iter().map(|t| Row::of(t, now)).collect());
                    error.try_set(None);
                }
                Err(f) => {
                    error.try_set(Some(auth.check(f)));
                }
            }
            let Some(id) = picked else { return };
            let settled = output.with_untracked(|o| o.as_ref().is_some_and(|(i, _)| *i == id))
                && rows.with_untracked(|r| {
                    r.iter().any(|row| row.id == id && row.state.is_terminal())
                });
            if settled {
                return;
            }
            if let Ok(task) = crate::api::get_a2a::<Task>(&format!("/tasks/{id}"), &token).await
                && chosen.try_get_untracked().flatten().as_deref() == Some(id.as_str())
            {
                output.try_set(Some((id, plain_output(&task))));
            }
        });
    };
    #[cfg(feature = "hydrate")]
    crate::api::poll(auth, REFRESH_MS, load);
    #[cfg(not(feature = "hydrate"))]
    let _ = (auth, sid);

    let choose = move |id: String| {
        let again = chosen.get_untracked().as_deref() == Some(id.as_str());
        chosen.set((!again).then_some(id));
        output.set(None);
        #[cfg(feature = "hydrate")]
        load();
    };

    view! {
        <section class="tasks" aria-labelledby="tasks-title">
            <h2 id="tasks-title">"Tasks"</h2>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <Show when=move || rows.with(Vec::is_empty)>
                <p class="muted">"No A2A tasks in this session yet."</p>
            </Show>
            <ul class="task-list">
                <For each=move || rows.get() key=|r| (r.id.clone(), r.state, r.duration_ms.map(|d| d as u64 / 1000)) let:row>
                    {
                        let id = row.id.clone();
                        let selected = {
                            let id = id.clone();
                            move || chosen.get().as_deref() == Some(id.as_str())
                        };
                        let state = state_label(row.state);
                        let data_state = state.clone();
                        // Its moment in the player.
                        let play = uuid_v7_ms(&row.id).map(|at| {
                            format!("/sessions/{}/play?at={}", sid.get_untracked(), at as i64)
                        });
                        view! {
                            <li data-task=row.id.clone() data-state=data_state>
                                <button class="task" aria-pressed=move || selected().to_string() on:click=move |_| choose(id.clone())>
                                    <code class="cmd">{row.command.clone()}</code>
                                    <span class="tag state">{state}</span>
                                    {row.exit_code.map(|c| view! { <span class="tag exit">{format!("exit {c}")}</span> })}
                                    {row.duration_ms.map(|d| view! { <span class="muted dur">{duration_label(d)}</span> })}
                                </button>
                                {play.map(|href| view! { <a class="play" href=href title="Play this task back">"▶"</a> })}
                            </li>
                        }
                    }
                </For>
            </ul>
            {move || output.get().map(|(id, text)| view! {
                <figure class="task-output">
                    <figcaption>"Output of " <code>{crate::short(&id)}</code></figcaption>
                    <pre aria-label="Task output" tabindex="0">{text}</pre>
                </figure>
            })}
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v7_ids_carry_their_creation_time() {
        assert_eq!(
            uuid_v7_ms("01a22959-c229-711d-bb0c-ecd026f3b956"),
            Some(0x01a22959c229u64 as f64)
        );
        assert_eq!(
            uuid_v7_ms("6b4e03d2-2b9f-4b1e-9f3a-2c1d0e9f8a7b"),
            None,
            "v4 has no time"
        );
    }

    #[test]
    fn output_is_shown_without_escape_sequences() {
        let task: Task = serde_json::from_value(serde_json::json!({
            "id": "t", "contextId": "c", "status": { "state": "TASK_STATE_COMPLETED" },
            "artifacts": [{ "artifactId": "output", "parts": [{ "text": "\u{1b}[1;31mred\u{1b}[0m\r\n\u{1b}]0;title\u{7}ok\r\n" }] }]
        }))
        .unwrap();
        assert_eq!(plain_output(&task), "red\nok\n");
        assert_eq!(state_label(TaskState::InputRequired), "input-required");
        assert_eq!(duration_label(1530.0), "1.5 s");
        assert_eq!(duration_label(61_000.0), "1m 01s");
    }
}
