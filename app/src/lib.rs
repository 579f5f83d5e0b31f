//! The ptyhost web UI (Leptos, SSR + hydrate) and the wire types it shares with the server.
// The view types are deep when built without cargo-leptos's type erasure (release, tests).
#![recursion_limit = "256"]
#![forbid(unsafe_code)]

pub mod api;
#[cfg(feature = "hydrate")]
mod client;
mod files;
mod lifecycle;
mod player;
mod sessions;
mod summary;
mod tasks;
mod term_ui;
mod terminal;
// Its markers are made in the browser; the server renders only an empty timeline.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
mod timeline;
mod wall;
#[cfg(feature = "hydrate")]
mod xterm;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

use crate::api::Auth;

/// Resolves the bare module names of the xterm-js-rs bindings to the ESM builds of
/// xterm.js that the build brings from npm into `public/vendor/`.
const IMPORT_MAP: &str = r#"{"imports":{"xterm":"/vendor/xterm.mjs","xterm-addon-fit":"/vendor/addon-fit.mjs","xterm-addon-unicode11":"/vendor/addon-unicode11.mjs","xterm-addon-webgl":"/vendor/addon-webgl.mjs","xterm-addon-search":"/vendor/addon-search.mjs"}}"#;

/// The HTML document around the app, rendered on the server. The import map must come
/// before the hydration scripts that import the bindings.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <script type="importmap" inner_html=IMPORT_MAP></script>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <link rel="stylesheet" href="/vendor/xterm.css"/>
                <link rel="stylesheet" id="leptos" href=options.css_path()/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    let auth = Auth::new();
    provide_context(auth);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| auth.start());

    view! {
        <Title text="ptyhost"/>
        <Router>
            <nav class="top">
                <a href="/" class="brand">"ptyhost"</a>
                <a href="/wall">"Wall"</a>
                <a href="/snapshots">"Snapshots"</a>
                <a href="/card">"Agent card"</a>
                <span class="who">{move || auth.me.get().map(|m| format!("{}{}", m.label.map(|l| format!("{l} · ")).unwrap_or_default(), m.scope))}</span>
                <Show when=move || auth.token.get().is_some()>
                    <button class="small" on:click=move |_| sign_out(auth)>"Sign out"</button>
                </Show>
            </nav>
            <main>
                <Routes fallback=|| view! { <p>"Not found."</p> }>
                    <Route path=path!("/") view=|| view! { <Gate><sessions::SessionsPage/></Gate> }/>
                    <Route path=path!("/sessions/:sid") view=|| view! { <Gate><terminal::TerminalPage/></Gate> }/>
                    <Route path=path!("/sessions/:sid/play") view=|| view! { <Gate><player::PlayerPage/></Gate> }/>
                    <Route path=path!("/wall") view=|| view! { <Gate><wall::WallPage/></Gate> }/>
                    <Route path=path!("/snapshots") view=|| view! { <Gate><lifecycle::SnapshotsPage/></Gate> }/>
                    <Route path=path!("/card") view=CardPage/>
                </Routes>
            </main>
        </Router>
    }
}

fn sign_out(auth: Auth) {
    #[cfg(feature = "hydrate")]
    auth.sign_out(None);
    #[cfg(not(feature = "hydrate"))]
    let _ = auth;
}

/// Shows its children once signed in, and the sign-in form otherwise.
#[component]
fn Gate(children: ChildrenFn) -> impl IntoView {
    let auth = expect_context::<Auth>();
    view! {
        <Show when=move || auth.token.get().is_some() fallback=TokenForm>
            {children()}
        </Show>
    }
}

/// Manual sign-in: paste a token (links sign in by themselves from their `#token=` part).
#[component]
fn TokenForm() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let value = RwSignal::new(String::new());
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let token = value.get_untracked().trim().to_owned();
        if !token.is_empty() {
            #[cfg(feature = "hydrate")]
            auth.sign_in(token);
            value.set(String::new());
        }
    };
    view! {
        <form class="signin" on:submit=submit>
            <h1>"Sign in"</h1>
            {move || auth.refused.get().map(|r| view! { <p class="error" role="alert">{r}</p> })}
            <p class="muted">"Open the link ptyhost printed on its first start, an observer link, or paste a token."</p>
            <label>"Access token"
                <input type="password" name="token" autocomplete="off" prop:value=value on:input=move |ev| value.set(event_target_value(&ev))/>
            </label>
            <button type="submit">"Sign in"</button>
        </form>
    }
}

/// The public AgentCard, as clients see it.
#[component]
fn CardPage() -> impl IntoView {
    let card = RwSignal::new(None::<String>);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            let text = match gloo_net::http::Request::get("/.well-known/agent-card.json")
                .send()
                .await
            {
                Ok(resp) => match resp.json::<serde_json::Value>().await {
                    Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_default(),
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            card.set(Some(text));
        });
    });
    view! {
        <section aria-labelledby="card-title">
            <h1 id="card-title">"Agent card"</h1>
            <p><a href="/.well-known/agent-card.json">"/.well-known/agent-card.json"</a></p>
            <pre class="card" tabindex="0" aria-label="The agent card">{move || card.get().unwrap_or_else(|| "Loading…".into())}</pre>
        </section>
    }
}

/// The last eight characters of an id: enough to tell sessions and tasks apart on screen.
pub(crate) fn short(id: &str) -> String {
    id.chars()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}
