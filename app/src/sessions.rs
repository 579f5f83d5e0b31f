//! The sessions page (`/`): every session, live; start one; end one.

use leptos::prelude::*;

use crate::api::{Auth, Session};
use crate::short;

/// How often the list refreshes.
#[cfg(feature = "hydrate")]
const REFRESH_MS: u32 = 2000;

#[component]
pub fn SessionsPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let sessions = RwSignal::new(Vec::<Session>::new());
    let loaded = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let now_ms = RwSignal::new(0.0f64);

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

    // Built apart (and type-erased) to keep the page's view type shallow.
    let table = move || {
        view! {
        <div class="table-wrap">
            <table class="sessions">
                <thead>
                    <tr>
                        <th scope="col">"Session"</th>
                        <th scope="col">"Command"</th>
                        <th scope="col">"State"</th>
                        <th scope="col">"Size"</th>
                        <th scope="col">"Age"</th>
                        <th scope="col">"Viewers"</th>
                        <th scope="col"><span class="sr-only">"Actions"</span></th>
                    </tr>
                </thead>
                <tbody>
                    <For each=move || sessions.get() key=|s| (s.session_id.clone(), s.state.clone(), s.controllers, s.observers, s.cols, s.rows) let:s>
                        {
                            let sid = s.session_id.clone();
                            let running = matches!(s.state.as_str(), "running" | "paused");
                            let state = match (running, s.exit_code) {
                                (true, _) => s.state.clone(),
                                (false, Some(code)) => format!("exited {code}"),
                                (false, None) => "closed".to_owned(),
                            };
                            let created = s.created_at.clone();
                            view! {
                                <tr data-session=s.session_id.clone() data-state=s.state.clone()>
                                    // A closed session opens in the player.
                                    <td><a href=if running { format!("/sessions/{}", s.session_id) } else { format!("/sessions/{}/play", s.session_id) }>{s.label.clone().unwrap_or_else(|| short(&s.session_id))}</a></td>
                                    <td><code>{s.command()}</code></td>
                                    <td>{state}</td>
                                    <td>{format!("{}×{}", s.cols, s.rows)}</td>
                                    <td>{move || age(&created, now_ms.get())}</td>
                                    <td>{format!("{} controlling, {} watching", s.controllers, s.observers)}</td>
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
                    {table}
                </Show>
            </Show>
        </section>
    }
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
