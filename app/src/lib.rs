//! The ptyhost web UI (Leptos, SSR + hydrate) and the wire types it shares with the server.

pub mod wire;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::{
    StaticSegment,
    components::{Route, Router, Routes},
};

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="data:,"/>
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
    view! {
        <Stylesheet id="leptos" href="/pkg/ptyhost.css"/>
        <Title text="ptyhost"/>
        <Router>
            <main>
                <Routes fallback=|| view! { <p>"Not found."</p> }>
                    <Route path=StaticSegment("") view=Home/>
                </Routes>
            </main>
        </Router>
    }
}

#[component]
fn Home() -> impl IntoView {
    view! {
        <h1>"ptyhost"</h1>
        <p>"A terminal agent on the A2A protocol. Sessions are served over pty-ws/v1; the operator console arrives with the web UI."</p>
        <p><a href="/.well-known/agent-card.json">"Agent card"</a></p>
    }
}
