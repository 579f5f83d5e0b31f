//! A session summed up for the sessions list and the wall: its name, its state, its
//! sandbox against its caps, its ports, and whether a filter's text finds it.

use leptos::prelude::*;

use crate::api::Session;
use wire::control::{ListeningPort, Network};

/// Its label, or the end of its id.
pub fn name(s: &Session) -> String {
    s.label
        .clone()
        .unwrap_or_else(|| crate::short(&s.session_id))
}

/// Running or paused: it can be attached to.
pub fn is_live(s: &Session) -> bool {
    matches!(s.state.as_str(), "running" | "paused")
}

/// `running`, `paused`, `paused (idle)`, `exited 2` or `closed`.
pub fn state(s: &Session) -> String {
    match (s.state.as_str(), &s.paused, s.exit_code) {
        ("paused", Some(p), _) if p.idle => "paused (idle)".to_owned(),
        ("running" | "paused", ..) => s.state.clone(),
        (_, _, Some(code)) => format!("exited {code}"),
        _ => "closed".to_owned(),
    }
}

/// Who holds it: "1 controlling, 2 watching", or "nobody controls it".
pub fn holders(s: &Session) -> String {
    match s.controllers {
        0 => format!("nobody controls it, {} watching", s.observers),
        n => format!("{n} controlling, {} watching", s.observers),
    }
}

/// `off`, or `on`, its network, and what it uses against its caps:
/// "on · network none · 12 of 512 MiB · 3 of 64 processes".
pub fn sandbox(s: &Session) -> String {
    let Some(sb) = s.sandbox.as_ref().filter(|sb| sb.enabled) else {
        return "off".to_owned();
    };
    let network = match &sb.network {
        Network::Mode(mode) => format!("network {mode}"),
        Network::Allow { allow } => format!("network {}", allow.join(", ")),
    };
    let mut parts = vec!["on".to_owned(), network];
    let mib = |b: u64| b.div_ceil(1 << 20);
    let used = s.usage.as_ref();
    match (used.map(|u| u.memory_bytes), sb.memory_bytes) {
        (Some(u), Some(cap)) => parts.push(format!("{} of {} MiB", mib(u), mib(cap))),
        (Some(u), None) => parts.push(format!("{} MiB", mib(u))),
        (None, Some(cap)) => parts.push(format!("at most {} MiB", mib(cap))),
        (None, None) => {}
    }
    match (used.map(|u| u.pids), sb.pids) {
        (Some(u), Some(cap)) => parts.push(format!("{u} of {cap} processes")),
        (Some(u), None) => parts.push(format!("{u} processes")),
        (None, Some(cap)) => parts.push(format!("at most {cap} processes")),
        (None, None) => {}
    }
    parts.join(" · ")
}

/// The ports something listens on inside its own network namespace: "8000, 9000", or
/// "none"; `None` where it has no namespace of its own to look in.
pub fn ports(s: &Session) -> Option<String> {
    let ports = s.ports.as_ref()?;
    let list: Vec<String> = ports.iter().map(|p| p.port.to_string()).collect();
    Some(match list.is_empty() {
        true => "none".to_owned(),
        false => list.join(", "),
    })
}

/// Where a port's preview opens: its own origin when it has one, else its path under the
/// API. The link carries the token in its fragment, which the preview's page trades for a
/// cookie scoped to that preview; no URL the server sees holds it.
pub fn port_link(instance: &str, sid: &str, port: &ListeningPort, token: &str) -> String {
    let url = (port.url.clone())
        .unwrap_or_else(|| format!("/agents/{instance}/sessions/{sid}/ports/{}/", port.port));
    format!("{url}#token={token}")
}

/// Whether `filter` (any case) is part of its label, command or id.
pub fn matches(s: &Session, filter: &str) -> bool {
    let filter = filter.trim().to_lowercase();
    filter.is_empty()
        || [
            s.label.as_deref().unwrap_or(""),
            &s.command(),
            &s.session_id,
        ]
        .iter()
        .any(|field| field.to_lowercase().contains(&filter))
}

/// A page of `GET /tasks`.
#[derive(Debug, Clone, serde::Deserialize)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub struct TaskPage {
    pub tasks: Vec<wire::a2a::Task>,
}

/// The command of each session's working task, by session (a task's context is its
/// session); `None` when the tasks could not be read.
#[cfg(feature = "hydrate")]
pub async fn running_tasks(token: &str) -> Option<std::collections::HashMap<String, String>> {
    let path = "/tasks?status=TASK_STATE_WORKING&pageSize=100";
    let page = crate::api::get_a2a::<TaskPage>(path, token).await.ok()?;
    let running = page.tasks.into_iter().filter_map(|t| {
        let command = t.history.first()?.text();
        Some((t.context_id, command))
    });
    Some(running.collect())
}

/// The text box that filters sessions.
#[component]
pub fn FilterBox(text: RwSignal<String>) -> impl IntoView {
    view! {
        <input type="search" class="filter" name="filter" aria-label="Filter by label, command or id"
            placeholder="Filter by label, command or id"
            prop:value=text on:input=move |ev| text.set(event_target_value(&ev))/>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(extra: serde_json::Value) -> Session {
        let mut v = serde_json::json!({
            "session_id": "0195f0c2-aaaa-bbbb-cccc-0123456789ab", "instance_id": "local",
            "label": "build", "argv": ["/bin/sh", "-lc", "cargo test"], "cwd": null,
            "session_backend": "native", "session_class": "direct", "cols": 80, "rows": 24,
            "state": "running", "exit_code": null, "close_reason": null,
            "created_at": "2026-12-01T00:00:00Z", "closed_at": null, "current_sequence": 3,
            "replay_floor": 0, "controllers": 1, "observers": 2, "attach_url": "ws://x",
        });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn ports_are_listed_or_none_and_link_to_their_preview_with_the_token_in_the_fragment() {
        assert_eq!(ports(&session(serde_json::json!({}))), None);
        assert_eq!(
            ports(&session(serde_json::json!({ "ports": [] }))).as_deref(),
            Some("none")
        );
        let s = session(serde_json::json!({ "ports": [
            { "port": 8000, "protocol": "tcp" },
            { "port": 9000, "protocol": "tcp", "url": "http://9000-x.localhost:3000/" },
        ] }));
        assert_eq!(ports(&s).as_deref(), Some("8000, 9000"));
        let listed = s.ports.as_ref().unwrap();
        assert_eq!(
            port_link("local", "x", &listed[0], "t0k"),
            "/agents/local/sessions/x/ports/8000/#token=t0k"
        );
        assert_eq!(
            port_link("local", "x", &listed[1], "t0k"),
            "http://9000-x.localhost:3000/#token=t0k"
        );
    }

    #[test]
    fn a_filter_finds_a_session_by_label_command_or_id_in_any_case() {
        let s = session(serde_json::json!({}));
        for found in ["", "BUILD", "cargo", "89ab", " test "] {
            assert!(matches(&s, found), "{found:?}");
        }
        assert!(!matches(&s, "deploy"));
    }

    #[test]
    fn a_sandbox_shows_its_network_and_usage_against_its_caps() {
        let s = session(serde_json::json!({
            "sandbox": { "enabled": true, "network": "none", "memory_bytes": 536870912u64,
                         "pids": 64, "cpus": 1.0 },
            "usage": { "memory_bytes": 12582912u64, "pids": 3, "cpu_seconds": 0.5 },
        }));
        assert_eq!(
            sandbox(&s),
            "on · network none · 12 of 512 MiB · 3 of 64 processes"
        );
        let s = session(serde_json::json!({
            "sandbox": { "enabled": true, "network": { "allow": ["pypi.org"] },
                         "memory_bytes": null, "pids": null, "cpus": null },
        }));
        assert_eq!(sandbox(&s), "on · network pypi.org");
        assert_eq!(sandbox(&session(serde_json::json!({}))), "off");
    }

    #[test]
    fn a_state_says_why_it_is_paused_or_how_it_ended() {
        let paused = serde_json::json!({ "since": "2026-12-01T00:00:00Z", "method": "sigstop", "idle": true });
        let s = session(serde_json::json!({ "state": "paused", "paused": paused }));
        assert_eq!(state(&s), "paused (idle)");
        assert_eq!(
            state(&session(
                serde_json::json!({ "state": "exited", "exit_code": 2 })
            )),
            "exited 2"
        );
        assert_eq!(
            state(&session(serde_json::json!({ "state": "closed" }))),
            "closed"
        );
    }
}
