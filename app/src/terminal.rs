//! The terminal page (`/sessions/{sid}`): the live terminal, who is attached, the
//! controller handoff, and the read-only links of the session.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::{Auth, Session, ShareLink};
use crate::short;
use crate::term_ui::{TermCommand, TermUi, Zoom};
use wire::Role;

#[component]
pub fn TerminalPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let params = use_params_map();
    let sid = move || params.read().get("sid").unwrap_or_default();
    let ui = TermUi::new(auth);
    let host = NodeRef::<leptos::html::Div>::new();

    #[cfg(feature = "hydrate")]
    {
        crate::api::start_once(host, auth, move |el, token| {
            crate::client::start(el, sid(), token, ui)
        });
        on_cleanup(move || ui.commands.set_value(None));
    }

    let files = crate::files::Files::new(auth, Signal::derive(sid));
    // The session's JSON, read again now and then: its ports and its paused state.
    let shown = RwSignal::new(None::<Session>);
    #[cfg(feature = "hydrate")]
    crate::api::poll(auth, SHOWN_MS, move || {
        crate::lifecycle::reload(auth, sid(), shown)
    });
    // Files dropped on the terminal upload into the Files panel's directory (controller only).
    let dragover = move |ev: leptos::ev::DragEvent| {
        if ui.role.get_untracked() == Some(Role::Controller) {
            ev.prevent_default();
        }
    };
    let drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        #[cfg(feature = "hydrate")]
        if ui.role.get_untracked() == Some(Role::Controller) {
            files.upload_dropped(&ev);
        }
    };
    let me_controls = move || auth.me.get().is_some_and(|m| m.can_control());
    let is_controller = move || ui.role.get() == Some(Role::Controller);
    let holder = move || {
        let mine = ui.client_id.get();
        ui.members.with(|(controllers, _)| {
            controllers
                .iter()
                .find(|(id, _)| Some(id) != mine.as_ref())
                .map(|(id, label)| label.clone().unwrap_or_else(|| short(id)))
        })
    };
    let take_blocked = move || {
        if ui.closed.get().is_some() {
            Some("The session has ended.".to_owned())
        } else if !me_controls() {
            Some("Read-only link: this token can watch but not control.".to_owned())
        } else {
            holder().map(|h| format!("{h} has control; they must release it first."))
        }
    };

    // Built apart (and type-erased) to keep the page's view type shallow.
    let side = view! {
        <aside class="side">
            <h2>"Attached"</h2>
            <ul class="members" aria-label="Members">
                {move || {
                    let mine = ui.client_id.get();
                    let (controllers, observers) = ui.members.get();
                    controllers.into_iter().map(|m| (m, "controller")).chain(observers.into_iter().map(|m| (m, "observer")))
                        .map(|((id, label), role)| {
                            let me = if Some(&id) == mine.as_ref() { " (you)" } else { "" };
                            let name = label.unwrap_or_else(|| short(&id));
                            view! { <li data-role=role>{format!("{name}{me}")} <span class="tag">{role}</span></li> }
                        })
                        .collect_view()
                }}
            </ul>
            <crate::tasks::TaskList sid=Signal::derive(sid) />
            <Ports sid=Signal::derive(sid) shown=shown />
            <Show when=me_controls>
                <crate::lifecycle::LifecyclePanel sid=Signal::derive(sid) shown=shown />
            </Show>
            <Show when=move || auth.me.get().is_some_and(|m| m.file_downloads)>
                <crate::files::FilesPanel files=files can_upload=Signal::derive(is_controller) />
            </Show>
            <Show when=me_controls>
                <ShareLinks sid=Signal::derive(sid) />
            </Show>
        </aside>
    }
    .into_any();

    view! {
        <section class="terminal-page" aria-labelledby="term-title">
            <header class="term-bar">
                <a href="/" class="back">"← Sessions"</a>
                <h1 id="term-title">"Session " <code>{move || short(&sid())}</code></h1>
                <span class="status" role="status" data-status=move || ui.status.get()>{move || ui.status.get()}</span>
                <span class="role" data-role=move || role_name(ui.role.get())>{move || role_name(ui.role.get())}</span>
                <a class="play-link" href=move || format!("/sessions/{}/play", sid())>"Play back"</a>
            </header>
            <div class="term-actions">
                <Show
                    when=is_controller
                    fallback=move || view! {
                        <button
                            on:click=move |_| ui.send(TermCommand::RequestRole(Role::Controller))
                            prop:disabled=move || take_blocked().is_some()
                            title=move || take_blocked().unwrap_or_default()
                        >"Take control"</button>
                    }
                >
                    <button on:click=move |_| ui.send(TermCommand::RequestRole(Role::Observer))>"Release"</button>
                </Show>
                <button on:click=move |_| ui.send(TermCommand::Resync) title="Repaint the screen from a fresh keyframe">"Resync"</button>
                <Show when=move || !is_controller()>
                    <button aria-pressed=move || (ui.zoomed.get() == Zoom::Fit).to_string()
                        title="Scale the screen to the pane's width, or show it at full size and pan"
                        on:click=move |_| {
                            let next = if ui.zoomed.get_untracked() == Zoom::Fit { Zoom::Actual } else { Zoom::Fit };
                            ui.zoom.set(next);
                            ui.send(TermCommand::Fit);
                        }>"Fit to width"</button>
                </Show>
                <label class="check">
                    <input type="checkbox" on:change=move |ev| ui.send(TermCommand::ScreenReader(event_target_checked(&ev)))/>
                    "Screen reader mode"
                </label>
                <span class="hint">"Shift+Tab leaves the terminal."</span>
                <span class="reason">{move || if is_controller() { None } else { take_blocked() }}</span>
            </div>
            {move || ui.closed.get().map(|c| view! {
                <p class="banner" role="alert">
                    {format!("Session ended ({}){}", c.reason, c.exit_code.map(|e| format!(", exit code {e}")).unwrap_or_default())}
                    {c.detail.map(|d| format!(": {d}"))}
                </p>
            })}
            {move || ui.notice.get().map(|n| view! { <p class="notice" role="status">{n}</p> })}
            <div class="term-layout">
                <div class="term-main">
                    <Search ui=ui />
                    <div class="term-host" node_ref=host role="region" aria-label="Terminal" on:dragover=dragover on:drop=drop></div>
                    <Show when=is_controller>
                        <KeyBar ui=ui />
                    </Show>
                </div>
                {side}
            </div>
        </section>
    }
}

/// How often the session's JSON (its ports, its paused state) is read again.
#[cfg(feature = "hydrate")]
const SHOWN_MS: u32 = 3000;

/// The ports something listens on inside the session's own network, each a link to its
/// preview (`summary::port_link`).
#[component]
fn Ports(sid: Signal<String>, shown: RwSignal<Option<Session>>) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let ports = move || {
        shown.with(|s| {
            let s = s.as_ref()?;
            Some((s.instance_id.clone(), s.ports.clone()?))
        })
    };
    let link = move |instance: &str, port: &wire::control::ListeningPort| {
        let token = auth.token.get().unwrap_or_default();
        crate::summary::port_link(instance, &sid.get(), port, &token)
    };
    view! {
        <Show when=move || ports().is_some()>
            <section class="ports" aria-labelledby="ports-title">
                <h2 id="ports-title">"Ports"</h2>
                {move || {
                    let (instance, list) = ports().unwrap_or_default();
                    if list.is_empty() {
                        view! { <p class="empty">"Nothing listens inside the session yet."</p> }.into_any()
                    } else {
                        view! {
                            <ul aria-label="Listening ports">
                                {list.into_iter().map(|port| view! {
                                    <li>
                                        <a href=link(&instance, &port) target="_blank" rel="noopener noreferrer">
                                            {format!("Open port {}", port.port)}
                                        </a>
                                    </li>
                                }).collect_view()}
                            </ul>
                        }.into_any()
                    }
                }}
            </section>
        </Show>
    }
}

/// Search in the scrollback (xterm.js's search addon): Enter or "Next" finds onwards,
/// "Previous" back; the match is selected (and so copied).
#[component]
fn Search(ui: TermUi) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let find = move |forward: bool| {
        let t = text.get_untracked();
        if !t.is_empty() {
            ui.send(TermCommand::Find(t, forward));
        }
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        find(true);
    };
    let state = move || match ui.found.get() {
        Some(true) => "found",
        Some(false) => "not found",
        None => "",
    };
    view! {
        <form class="search" role="search" on:submit=submit>
            <input type="search" name="search" aria-label="Search the scrollback" placeholder="Search"
                prop:value=text on:input=move |ev| {
                    text.set(event_target_value(&ev));
                    ui.found.set(None);
                }/>
            <button type="submit">"Next"</button>
            <button type="button" on:click=move |_| find(false)>"Previous"</button>
            <span class="found" data-found=state>{state}</span>
        </form>
    }
}

/// Keys a phone's keyboard lacks, for the controller (shown on narrow screens): Esc, Tab,
/// a sticky Ctrl for the next key typed, Ctrl-C, and the arrows.
#[component]
fn KeyBar(ui: TermUi) -> impl IntoView {
    const KEYS: [(&str, &str, &str); 7] = [
        ("Esc", "Escape", "\x1b"),
        ("Tab", "Tab", "\t"),
        ("^C", "Ctrl-C", "\x03"),
        ("←", "Left", "\x1b[D"),
        ("↑", "Up", "\x1b[A"),
        ("↓", "Down", "\x1b[B"),
        ("→", "Right", "\x1b[C"),
    ];
    view! {
        <div class="key-bar" role="toolbar" aria-label="Keys">
            <button type="button" aria-label="Ctrl" aria-pressed=move || ui.ctrl.get().to_string()
                on:click=move |_| {
                    ui.ctrl.update(|c| *c = !*c);
                    refocus();
                }>"Ctrl"</button>
            {KEYS.iter().map(|&(face, name, bytes)| view! {
                <button type="button" aria-label=name
                    on:click=move |_| {
                        ui.send(TermCommand::Input(bytes.to_owned()));
                        refocus();
                    }>{face}</button>
            }).collect_view()}
        </div>
    }
}

/// Gives the keyboard back to the terminal after a key bar button took it.
fn refocus() {
    #[cfg(feature = "hydrate")]
    if let Some(input) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.query_selector(".term-host textarea").ok().flatten())
        .and_then(|e| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlElement>(e).ok())
    {
        let _ = input.focus();
    }
}

fn role_name(role: Option<Role>) -> &'static str {
    match role {
        Some(Role::Controller) => "controller",
        Some(Role::Observer) => "observer",
        None => "not joined",
    }
}

/// Mint, copy, list and revoke read-only observer links.
#[component]
fn ShareLinks(sid: Signal<String>) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let links = RwSignal::new(Vec::<ShareLink>::new());
    let latest = RwSignal::new(None::<String>);
    let error = RwSignal::new(None::<String>);

    #[cfg(feature = "hydrate")]
    let refresh = move || {
        let Some(token) = auth.token.get_untracked() else {
            return;
        };
        leptos::task::spawn_local(async move {
            match crate::api::get::<crate::api::ShareLinks>(
                &format!("/sessions/{}/share", sid.get_untracked()),
                &token,
            )
            .await
            {
                Ok(l) => {
                    links.try_set(l.links);
                }
                Err(f) => {
                    error.try_set(Some(auth.check(f)));
                }
            }
        });
    };
    #[cfg(not(feature = "hydrate"))]
    let _ = (auth, sid);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if auth.token.get().is_some() {
            refresh();
        }
    });

    let share = move |_| {
        #[cfg(feature = "hydrate")]
        {
            let Some(token) = auth.token.get_untracked() else {
                return;
            };
            leptos::task::spawn_local(async move {
                let body = wire::control::ShareRequest {
                    ttl_secs: Some(3600),
                    label: Some("shared from the web UI".into()),
                };
                match crate::api::post::<crate::api::NewLink>(
                    &format!("/sessions/{}/share", sid.get_untracked()),
                    &token,
                    &body,
                )
                .await
                {
                    Ok(link) => {
                        crate::client::copy_to_clipboard(&link.url);
                        latest.try_set(Some(link.url));
                        refresh();
                    }
                    Err(f) => {
                        error.try_set(Some(auth.check(f)));
                    }
                }
            });
        }
    };
    let revoke = move |id: String| {
        #[cfg(feature = "hydrate")]
        {
            let path = format!("/sessions/{}/share/{id}", sid.get_untracked());
            crate::api::act(
                auth,
                error,
                |token| async move { crate::api::delete(&path, &token).await },
                move |()| refresh(),
            );
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = id;
    };

    view! {
        <section class="share" aria-labelledby="share-title">
            <h2 id="share-title">"Read-only links"</h2>
            <button on:click=share>"Share read-only link"</button>
            {move || latest.get().map(|url| view! {
                <label class="link">"Copied to the clipboard:"
                    <input class="share-url" readonly prop:value=url.clone() on:focus=|ev| {
                        #[cfg(feature = "hydrate")]
                        {
                            use wasm_bindgen::JsCast;
                            if let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) {
                                input.select();
                            }
                        }
                        #[cfg(not(feature = "hydrate"))]
                        let _ = ev;
                    }/>
                </label>
            })}
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <ul class="links">
                <For each=move || links.get() key=|l| l.id.clone() let:link>
                    {
                        let id = link.id.clone();
                        view! {
                            <li>
                                <span>{link.label.clone().unwrap_or_else(|| short(&link.id))}</span>
                                <span class="muted">{link.expires_at.clone().map(|e| format!(" until {e}"))}</span>
                                <button class="small" on:click=move |_| revoke(id.clone())>"Revoke"</button>
                            </li>
                        }
                    }
                </For>
            </ul>
        </section>
    }
}
