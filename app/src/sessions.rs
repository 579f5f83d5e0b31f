//! The sessions page (`/`): every session, live; start one; end one.

use leptos::prelude::*;

use crate::api::{Auth, Session};
use crate::summary;

/// How often the list refreshes.
#[cfg(feature = "hydrate")]
const REFRESH_MS: u32 = 2000;

/// A column of the list, which its header sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Session,
    Command,
    State,
    Holders,
    Task,
    Sandbox,
    Ports,
    Age,
}

impl Column {
    const ALL: [(Column, &'static str); 8] = [
        (Column::Session, "Session"),
        (Column::Command, "Command"),
        (Column::State, "State"),
        (Column::Holders, "Controller"),
        (Column::Task, "Running task"),
        (Column::Sandbox, "Sandbox"),
        (Column::Ports, "Ports"),
        (Column::Age, "Age"),
    ];
}

/// A row: the session, the task running in it, and what the columns show.
#[derive(Debug, Clone)]
struct Row {
    session: Session,
    task: Option<String>,
    state: String,
    holders: String,
    sandbox: String,
    ports: Option<String>,
}

impl Row {
    fn new(session: Session, tasks: &std::collections::HashMap<String, String>) -> Row {
        Row {
            task: tasks.get(&session.session_id).cloned(),
            state: summary::state(&session),
            holders: summary::holders(&session),
            sandbox: summary::sandbox(&session),
            ports: summary::ports(&session),
            session,
        }
    }

    /// What sorting by `column` compares.
    fn key(&self, column: Column) -> (usize, String) {
        let s = &self.session;
        match column {
            Column::Session => (0, summary::name(s).to_lowercase()),
            Column::Command => (0, s.command().to_lowercase()),
            Column::State => (0, self.state.clone()),
            Column::Holders => (s.controllers, self.holders.clone()),
            Column::Task => (0, self.task.clone().unwrap_or_default()),
            Column::Sandbox => (0, self.sandbox.clone()),
            Column::Ports => {
                let first = s.ports.as_ref().and_then(|p| p.first());
                (first.map_or(usize::MAX, |p| p.port.into()), String::new())
            }
            // Ascending age is descending creation time (`rows` turns it round).
            Column::Age => (0, s.created_at.clone()),
        }
    }

    /// What the row's view depends on, but its age (which ticks by itself).
    fn shown(&self) -> String {
        let s = &self.session;
        format!(
            "{}|{:?}|{}|{}|{}|{:?}|{}|{:?}|{}x{}",
            s.session_id,
            s.label,
            s.command(),
            self.state,
            self.holders,
            self.task,
            self.sandbox,
            self.ports,
            s.cols,
            s.rows
        )
    }
}

#[component]
pub fn SessionsPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let sessions = RwSignal::new(Vec::<Session>::new());
    let tasks = RwSignal::new(std::collections::HashMap::<String, String>::new());
    let loaded = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let now_ms = RwSignal::new(0.0f64);
    let filter = RwSignal::new(String::new());
    let sort = RwSignal::new((Column::Age, true));

    #[cfg(feature = "hydrate")]
    let load = move || {
        let Some(token) = auth.token.get_untracked() else {
            return;
        };
        leptos::task::spawn_local(async move {
            match crate::api::get::<crate::api::SessionList>("/sessions", &token).await {
                Ok(list) => {
                    now_ms.try_set(js_sys::Date::now());
                    sessions.try_set(list.sessions);
                    loaded.try_set(true);
                    error.try_set(None);
                }
                Err(f) => {
                    error.try_set(Some(auth.check(f)));
                }
            }
            if let Some(running) = summary::running_tasks(&token).await {
                tasks.try_set(running);
            }
        });
    };
    #[cfg(feature = "hydrate")]
    crate::api::poll(auth, REFRESH_MS, load);
    #[cfg(not(feature = "hydrate"))]
    let load = move || {};

    let can_control = move || auth.me.get().is_some_and(|m| m.can_control());
    let terminate = move |sid: String| {
        #[cfg(feature = "hydrate")]
        crate::api::act(
            auth,
            error,
            |token| async move { crate::api::delete(&format!("/sessions/{sid}"), &token).await },
            move |()| load(),
        );
        #[cfg(not(feature = "hydrate"))]
        let _ = sid;
    };
    let rows = move || {
        let (column, ascending) = sort.get();
        let filter = filter.get();
        let mut rows: Vec<Row> = tasks.with(|tasks| {
            sessions.with(|all| {
                (all.iter())
                    .filter(|s| summary::matches(s, &filter))
                    .map(|s| Row::new(s.clone(), tasks))
                    .collect()
            })
        });
        rows.sort_by_cached_key(|r| r.key(column));
        if ascending == (column == Column::Age) {
            rows.reverse();
        }
        rows
    };
    let header = move |(column, title): (Column, &'static str)| {
        let order = move || match sort.get() {
            (c, true) if c == column => "ascending",
            (c, false) if c == column => "descending",
            _ => "none",
        };
        view! {
            <th scope="col" aria-sort=order>
                <button type="button" class="sort" on:click=move |_| sort.update(|(c, asc)| {
                    *asc = *c != column || !*asc;
                    *c = column;
                })>{title}</button>
            </th>
        }
    };

    // Built apart (and type-erased) to keep the page's view type shallow.
    let table = move || {
        view! {
        <div class="table-wrap">
            <table class="sessions">
                <thead>
                    <tr>
                        {Column::ALL.map(header)}
                        <th scope="col">"Size"</th>
                        <th scope="col"><span class="sr-only">"Actions"</span></th>
                    </tr>
                </thead>
                <tbody>
                    <For each=rows key=Row::shown let:row>
                        {
                            let s = row.session;
                            let sid = s.session_id.clone();
                            let running = summary::is_live(&s);
                            let created = s.created_at.clone();
                            view! {
                                <tr data-session=s.session_id.clone() data-state=s.state.clone()>
                                    // A closed session opens in the player.
                                    <td><a href=if running { format!("/sessions/{}", s.session_id) } else { format!("/sessions/{}/play", s.session_id) }>{summary::name(&s)}</a></td>
                                    <td><code>{s.command()}</code></td>
                                    <td data-column="state">{row.state}</td>
                                    <td>{row.holders}</td>
                                    <td data-column="task">{row.task.map(|t| view! { <code>{t}</code> })}</td>
                                    <td data-column="sandbox">{row.sandbox}</td>
                                    <td data-column="ports">{port_links(&s, auth)}</td>
                                    <td>{move || age(&created, now_ms.get())}</td>
                                    <td>{format!("{}×{}", s.cols, s.rows)}</td>
                                    <td>
                                        <Show when=move || running && can_control()>
                                            {
                                                let sid = sid.clone();
                                                view! { <button class="small danger" on:click=move |_| terminate(sid.clone())>"Terminate"</button> }
                                            }
                                        </Show>
                                    </td>
                                </tr>
                            }
                        }
                    </For>
                </tbody>
            </table>
        </div>
        }
        .into_any()
    };

    view! {
        <section aria-labelledby="sessions-title">
            <h1 id="sessions-title">"Sessions"</h1>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <Show when=can_control>
                <NewSession on_created=Callback::new(move |()| load()) />
            </Show>
            <Show when=move || loaded.get() fallback=|| view! { <p class="muted">"Loading sessions…"</p> }>
                <Show when=move || !sessions.get().is_empty() fallback=|| view! { <p class="muted">"No sessions yet."</p> }>
                    <summary::FilterBox text=filter />
                    {table}
                </Show>
            </Show>
        </section>
    }
}

/// Each listening port as a link to its preview, or "none"; nothing where the session has
/// no network of its own to look in.
fn port_links(s: &Session, auth: Auth) -> impl IntoView + use<> {
    let token = auth.token.get_untracked().unwrap_or_default();
    let ports = s.ports.clone()?;
    if ports.is_empty() {
        return Some(view! { <span class="muted">"none"</span> }.into_any());
    }
    let (instance, sid) = (s.instance_id.clone(), s.session_id.clone());
    let links = ports.into_iter().map(move |port| {
        let href = summary::port_link(&instance, &sid, &port, &token);
        view! {
            <a href=href target="_blank" rel="noopener noreferrer"
                aria-label=format!("Open port {}", port.port)>{port.port}</a>
        }
    });
    Some(view! { <span class="port-links">{links.collect_view()}</span> }.into_any())
}

/// "3 min" from an RFC 3339 time and the current time in ms.
fn age(created_at: &str, now_ms: f64) -> String {
    #[cfg(feature = "hydrate")]
    let secs = ((now_ms - js_sys::Date::parse(created_at)) / 1000.0).max(0.0) as u64;
    #[cfg(not(feature = "hydrate"))]
    let secs = {
        let _ = (created_at, now_ms);
        0u64
    };
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86400),
    }
}

/// The form that starts a session: a command (empty: the login shell), directory and size.
#[component]
fn NewSession(on_created: Callback<()>) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let command = RwSignal::new(String::new());
    let cwd = RwSignal::new(String::new());
    let cols = RwSignal::new("120".to_owned());
    let rows = RwSignal::new("30".to_owned());
    let error = RwSignal::new(None::<String>);
    let navigate = leptos_router::hooks::use_navigate();

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let given = |s: String| Some(s).filter(|s| !s.trim().is_empty());
        let mut body = wire::control::CreateSession {
            command: given(command.get_untracked()),
            cwd: given(cwd.get_untracked()),
            ..Default::default()
        };
        for (key, value, field) in [
            ("cols", cols.get_untracked(), &mut body.cols),
            ("rows", rows.get_untracked(), &mut body.rows),
        ] {
            match value.trim().parse::<u16>() {
                Ok(n) if (1..=1024).contains(&n) => *field = Some(n),
                _ => {
                    error.set(Some(format!("{key} must be a number from 1 to 1024")));
                    return;
                }
            }
        }
        #[cfg(feature = "hydrate")]
        {
            let Some(token) = auth.token.get_untracked() else {
                return;
            };
            let navigate = navigate.clone();
            leptos::task::spawn_local(async move {
                match crate::api::post::<crate::api::Session>("/sessions", &token, &body).await {
                    Ok(s) => {
                        error.try_set(None);
                        on_created.run(());
                        navigate(&format!("/sessions/{}", s.session_id), Default::default());
                    }
                    Err(f) => {
                        error.try_set(Some(auth.check(f)));
                    }
                }
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (body, &navigate, auth, on_created);
    };

    view! {
        <form class="new-session" on:submit=submit aria-labelledby="new-title">
            <h2 id="new-title">"New session"</h2>
            <label>"Command" <input name="command" placeholder="empty: login shell" prop:value=command on:input=move |ev| command.set(event_target_value(&ev))/></label>
            <label>"Directory" <input name="cwd" placeholder="default: server's" prop:value=cwd on:input=move |ev| cwd.set(event_target_value(&ev))/></label>
            <label>"Columns" <input name="cols" inputmode="numeric" size="4" prop:value=cols on:input=move |ev| cols.set(event_target_value(&ev))/></label>
            <label>"Rows" <input name="rows" inputmode="numeric" size="4" prop:value=rows on:input=move |ev| rows.set(event_target_value(&ev))/></label>
            <button type="submit">"Start session"</button>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </form>
    }
}
