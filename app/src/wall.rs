//! The wall (`/wall`): every running session the token may see as a live, read-only tile
//! (its screen scaled down, label, command, state, who controls it, its sandbox and
//! ports, the task running in it); a click opens the session. Each tile is a pty-ws
//! observer that acknowledges what it rendered once a second, asking for a small window:
//! quiet output arrives as it happens, and a flooding session costs the tile 16 KiB of
//! output and a keyframe a second.

use leptos::prelude::*;

use crate::api::{Auth, Session};

/// How often the list of sessions (and each tile's running task) refreshes.
#[cfg(feature = "hydrate")]
const REFRESH_MS: u32 = 2000;

#[component]
pub fn WallPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let sessions = RwSignal::new(Vec::<Session>::new());
    #[cfg(feature = "hydrate")]
    crate::api::poll(auth, REFRESH_MS, move || {
        let Some(token) = auth.token.get_untracked() else {
            return;
        };
        leptos::task::spawn_local(async move {
            if let Ok(list) = crate::api::get::<crate::api::SessionList>("/sessions", &token).await
            {
                let running = (list.sessions.into_iter())
                    .filter(|s| matches!(s.state.as_str(), "running" | "paused"));
                sessions.try_set(running.collect());
            }
        });
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = auth;
    let filter = RwSignal::new(String::new());
    let shown = move || {
        let filter = filter.get();
        sessions.with(|all| {
            (all.iter())
                .filter(|s| crate::summary::matches(s, &filter))
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    view! {
        <section class="wall" aria-labelledby="wall-title">
            <h1 id="wall-title">"Wall"</h1>
            <Show when=move || sessions.with(Vec::is_empty)
                fallback=move || view! { <crate::summary::FilterBox text=filter /> }>
                <p class="muted">"No session is running."</p>
            </Show>
            <div class="tiles">
                <For each=shown key=|s| s.session_id.clone() let:s>
                    <Tile sid=s.session_id.clone() sessions=sessions />
                </For>
            </div>
        </section>
    }
}

#[component]
fn Tile(sid: String, sessions: RwSignal<Vec<Session>>) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let host = NodeRef::<leptos::html::Div>::new();
    let task = RwSignal::new(None::<String>);
    let info = {
        let sid = sid.clone();
        move || sessions.with(|all| all.iter().find(|s| s.session_id == sid).cloned())
    };
    #[cfg(feature = "hydrate")]
    {
        let (watched, polled) = (sid.clone(), StoredValue::new(sid.clone()));
        crate::api::start_once(host, auth, move |el, token| {
            browser::watch(el, watched.clone(), token, task)
        });
        crate::api::poll(auth, REFRESH_MS, move || {
            let (Some(token), Some(sid)) = (auth.token.get_untracked(), polled.try_get_value())
            else {
                return;
            };
            leptos::task::spawn_local(async move {
                let path = format!("/tasks?contextId={sid}&status=TASK_STATE_WORKING&pageSize=1");
                if let Ok(page) =
                    crate::api::get_a2a::<crate::summary::TaskPage>(&path, &token).await
                {
                    let running = page
                        .tasks
                        .first()
                        .map(|t| t.history.first().map(|m| m.text()));
                    task.try_set(running.flatten());
                }
            });
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = auth;
    let title = {
        let info = info.clone();
        move || info().map(|s| crate::summary::name(&s))
    };
    let command = {
        let info = info.clone();
        move || info().map(|s| s.command())
    };
    let state = {
        let info = info.clone();
        Signal::derive(move || info().map(|s| s.state))
    };
    let state_text = {
        let info = info.clone();
        move || info().map(|s| crate::summary::state(&s))
    };
    let sandbox = {
        let info = info.clone();
        move || info().map(|s| format!("sandbox {}", crate::summary::sandbox(&s)))
    };
    let ports = {
        let info = info.clone();
        move || {
            let ports = crate::summary::ports(&info()?)?;
            Some(view! { <span class="ports">{format!("ports {ports}")}</span> })
        }
    };
    let controllers = move || info().map(|s| crate::summary::holders(&s));
    view! {
        <a class="tile" href=format!("/sessions/{sid}") data-session=sid.clone()>
            <header>
                <strong>{title}</strong>
                <code>{command}</code>
                <span class="tag" data-state=state>{state_text}</span>
            </header>
            <div class="tile-screen" node_ref=host></div>
            <footer>
                <span class="who">{controllers}</span>
                <span class="sandbox">{sandbox}</span>
                {ports}
                {move || task.get().map(|t| view! { <span class="task">"task: " <code>{t}</code></span> })}
            </footer>
        </a>
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use futures::{FutureExt, SinkExt, StreamExt};
    use gloo_net::websocket::Message;
    use leptos::prelude::*;
    use wire::SessionFrame;
    use wire::server::{ServerFrame, ServerOp};

    /// A tile acknowledges what it rendered this often; past its window the server skips
    /// output for it and sends a keyframe on the next acknowledgement.
    const ACK_MS: u32 = 1000;
    /// The window a tile asks for: a glance at a flood needs little of its output.
    const WINDOW_BYTES: u32 = 16 * 1024;

    /// The acknowledgement of everything up to `sequence`, asking for the tile's window.
    fn ack(sequence: u64) -> Message {
        let ack = wire::Ack {
            sequence,
            window_bytes: Some(WINDOW_BYTES),
        };
        Message::Text(crate::client::frame(wire::ClientOp::Ack(ack), None))
    }

    /// Watches session `sid` in `host` until the tile goes away (`alive` is disposed).
    pub fn watch(
        host: web_sys::HtmlElement,
        sid: String,
        token: String,
        alive: RwSignal<Option<String>>,
    ) {
        let (term, _) = crate::xterm::open_terminal_with(&host, 9, false);
        leptos::task::spawn_local(async move {
            let Some(ws) = crate::client::attach(&sid, &token) else {
                return;
            };
            let (mut sink, mut stream) = ws.split();
            let mut last = 0u64;
            let mut acked = 0u64;
            // A clock of its own: a flood's frames must not keep postponing the ack.
            let mut ticks = gloo_timers::future::IntervalStream::new(ACK_MS).fuse();
            loop {
                futures::select! {
                    msg = stream.next().fuse() => {
                        let Some(Ok(Message::Text(text))) = msg else { break };
                        let Ok(server) = ServerFrame::decode(&text) else { continue };
                        let frame = match server.op {
                            ServerOp::Hello(_) => {
                                let join = wire::JoinSession { role: Some(wire::Role::Observer), ..wire::JoinSession::default() };
                                let join = crate::client::frame(wire::ClientOp::Join(join), None);
                                let _ = sink.send(Message::Text(join)).await;
                                continue;
                            }
                            ServerOp::Session(frame) => frame,
                            _ => continue,
                        };
                        last = server.sequence.unwrap_or(last).max(last);
                        if acked == 0 && matches!(frame, SessionFrame::MembershipChanged { .. }) {
                            // Joined: acknowledging now puts the tile under flow control.
                            acked = last;
                            let _ = sink.send(ack(last)).await;
                        }
                        match frame {
                            SessionFrame::Output { data, .. } => crate::xterm::write_bytes(&term, &data.0),
                            SessionFrame::Keyframe { snapshot, snapshot_cols, snapshot_rows, .. } => {
                                crate::xterm::paint_keyframe(&term, &snapshot.0, snapshot_cols, snapshot_rows);
                                crate::xterm::scale_into(&host, crate::xterm::Zoom::Fit);
                            }
                            SessionFrame::Resize { cols, rows } => {
                                term.resize(u32::from(cols), u32::from(rows));
                                crate::xterm::scale_into(&host, crate::xterm::Zoom::Fit);
                            }
                            _ => {}
                        }
                    }
                    _ = ticks.next() => {
                        if alive.is_disposed() {
                            break;
                        }
                        if last > acked {
                            acked = last;
                            let _ = sink.send(ack(last)).await;
                        }
                    }
                }
            }
            let _ = sink.close().await;
            term.dispose();
        });
    }
}
