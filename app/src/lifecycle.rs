//! A session's lifecycle in the UI: the terminal page's panel (pause or resume, snapshot,
//! fork) and the snapshots page (`/snapshots`), whose entries restore into new sessions.

use leptos::prelude::*;

use crate::api::{Auth, Session};
use crate::short;
use wire::control::Snapshot;

/// Reads session `sid`'s JSON into `shown`.
#[cfg(feature = "hydrate")]
pub fn reload(auth: Auth, sid: String, shown: RwSignal<Option<Session>>) {
    let Some(token) = auth.token.get_untracked() else {
        return;
    };
    leptos::task::spawn_local(async move {
        if let Ok(s) = crate::api::get::<Session>(&format!("/sessions/{sid}"), &token).await {
            shown.try_set(Some(s));
        }
    });
}

/// What the last action did: a line to read, and where it leads.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    text: String,
    links: Vec<(String, String)>,
}

/// Pause or resume, snapshot and fork, for a caller who may control the session.
#[component]
pub fn LifecyclePanel(sid: Signal<String>, shown: RwSignal<Option<Session>>) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let outcome = RwSignal::new(None::<Outcome>);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let paused = move || shown.with(|s| s.as_ref().is_some_and(|s| s.state == "paused"));
    let has_workspace = move || shown.with(|s| s.as_ref().is_some_and(|s| s.workspace.is_some()));
    let act = move |op: &'static str| {
        #[cfg(feature = "hydrate")]
        {
            busy.set(true);
            let path = format!("/sessions/{}:{op}", sid.get_untracked());
            crate::api::act(
                auth,
                error,
                move |token| async move {
                    let done = async {
                        Ok(match op {
                            "snapshot" => {
                                let asked = wire::control::TakeSnapshot::default();
                                let s = crate::api::post::<Snapshot>(&path, &token, &asked).await?;
                                Outcome {
                                    text: format!(
                                        "Snapshot taken: {} files, {} bytes.",
                                        s.files, s.bytes
                                    ),
                                    links: vec![(
                                        "/snapshots".into(),
                                        format!("Snapshot {}", short(&s.snapshot_id)),
                                    )],
                                }
                            }
                            "fork" => {
                                let asked = wire::control::Fork { count: Some(1) };
                                let f = crate::api::post::<wire::control::Forked>(
                                    &path, &token, &asked,
                                )
                                .await?;
                                Outcome {
                                    text: "Forked: a new session starts from this workspace."
                                        .into(),
                                    links: (f.sessions.iter())
                                        .map(|s| {
                                            (
                                                format!("/sessions/{}", s.session_id),
                                                format!("Open {}", short(&s.session_id)),
                                            )
                                        })
                                        .collect(),
                                }
                            }
                            _ => {
                                let s = crate::api::post::<Session>(
                                    &path,
                                    &token,
                                    &serde_json::json!({}),
                                )
                                .await?;
                                let text = format!("The session is {}.", s.state);
                                shown.try_set(Some(s));
                                Outcome {
                                    text,
                                    links: Vec::new(),
                                }
                            }
                        })
                    }
                    .await;
                    busy.try_set(false);
                    done
                },
                move |o| {
                    outcome.try_set(Some(o));
                    error.try_set(None);
                },
            );
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (op, auth, busy, sid);
    };
    view! {
        <section class="lifecycle" aria-labelledby="lifecycle-title">
            <h2 id="lifecycle-title">"Lifecycle"</h2>
            <div class="row">
                <Show
                    when=paused
                    fallback=move || view! { <button on:click=move |_| act("pause") prop:disabled=busy>"Pause"</button> }
                >
                    <button on:click=move |_| act("resume") prop:disabled=busy>"Resume"</button>
                </Show>
                <Show when=has_workspace>
                    <button on:click=move |_| act("snapshot") prop:disabled=busy>"Snapshot"</button>
                    <button on:click=move |_| act("fork") prop:disabled=busy>"Fork"</button>
                </Show>
            </div>
            {move || outcome.get().map(|o| view! {
                <p class="done" role="status">
                    {o.text} " "
                    {o.links.into_iter().map(|(href, text)| view! { <a href=href>{text}</a> " " }).collect_view()}
                </p>
            })}
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </section>
    }
}

/// Every snapshot this token may see, each restorable into a new session.
#[component]
pub fn SnapshotsPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let snapshots = RwSignal::new(None::<Vec<Snapshot>>);
    let error = RwSignal::new(None::<String>);
    #[cfg(feature = "hydrate")]
    let load = move || {
        crate::api::act(
            auth,
            error,
            |token| async move {
                crate::api::get::<wire::control::Snapshots>("/snapshots", &token).await
            },
            move |list| {
                snapshots.try_set(Some(list.snapshots));
            },
        )
    };
    #[cfg(feature = "hydrate")]
    crate::api::poll(auth, 5000, load);
    let can_control = move || auth.me.get().is_some_and(|m| m.can_control());
    let restore = move |id: String| {
        #[cfg(feature = "hydrate")]
        crate::api::act(
            auth,
            error,
            |token| async move {
                let body = wire::control::CreateSession {
                    from_snapshot: Some(id),
                    ..Default::default()
                };
                crate::api::post::<Session>("/sessions", &token, &body).await
            },
            |s| {
                let href = format!("/sessions/{}", s.session_id);
                leptos_router::hooks::use_navigate()(&href, Default::default());
            },
        );
        #[cfg(not(feature = "hydrate"))]
        let _ = id;
    };
    let remove = move |id: String| {
        #[cfg(feature = "hydrate")]
        crate::api::act(
            auth,
            error,
            |token| async move { crate::api::delete(&format!("/snapshots/{id}"), &token).await },
            move |()| load(),
        );
        #[cfg(not(feature = "hydrate"))]
        let _ = id;
    };
    view! {
        <section aria-labelledby="snapshots-title">
            <h1 id="snapshots-title">"Snapshots"</h1>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {move || match snapshots.get() {
                None => view! { <p class="muted">"Loading…"</p> }.into_any(),
                Some(list) if list.is_empty() => view! {
                    <p class="muted">"No snapshots yet: take one from a session's terminal page."</p>
                }.into_any(),
                Some(list) => view! {
                    <div class="table-wrap">
                        <table class="snapshots">
                            <thead>
                                <tr>
                                    <th scope="col">"Snapshot"</th>
                                    <th scope="col">"Of session"</th>
                                    <th scope="col">"Files"</th>
                                    <th scope="col">"Size"</th>
                                    <th scope="col">"Taken"</th>
                                    <th scope="col"><span class="sr-only">"Actions"</span></th>
                                </tr>
                            </thead>
                            <tbody>
                                {list.into_iter().map(|s| {
                                    let (id, again) = (s.snapshot_id.clone(), s.snapshot_id.clone());
                                    view! {
                                        <tr data-snapshot=s.snapshot_id.clone()>
                                            <td>{s.label.clone().unwrap_or_else(|| short(&s.snapshot_id))}</td>
                                            <td><a href=format!("/sessions/{}/play", s.session_id)>{short(&s.session_id)}</a></td>
                                            <td>{s.files}</td>
                                            <td>{format!("{:.1} MiB", s.bytes as f64 / 1048576.0)}</td>
                                            <td>{s.created_at.clone()}</td>
                                            <td>
                                                <Show when=can_control>
                                                    {
                                                        let (id, again) = (id.clone(), again.clone());
                                                        view! {
                                                            <button class="small" on:click=move |_| restore(id.clone())>"Restore"</button>
                                                            <button class="small danger" on:click=move |_| remove(again.clone())>"Delete"</button>
                                                        }
                                                    }
                                                </Show>
                                            </td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any(),
            }}
        </section>
    }
}
