//! The axum router: operations endpoints, the AgentCards, the per-instance API under
//! `/agents/{instance_id}` (also served at `/` for the default instance), and the UI. The
//! only module that knows every binding.

pub mod assets;
mod body;
mod files;
mod lifecycle;
mod network;
mod nodes;
mod playback;
mod preview;
pub mod server;
mod sessions;

use crate::sessions::SessionId;
use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get};
use leptos::prelude::LeptosOptions;
use leptos_axum::{LeptosRoutes, generate_route_list};

use crate::bindings::{a202, grpc, jsonrpc, mcp, pty_ws, rest};
use crate::card;
use crate::cluster::{Owner, forward};
use crate::state::{ApiError, AppState};

pub fn router(state: AppState, assets: assets::Assets, addr: std::net::SocketAddr) -> Router {
    let leptos = LeptosOptions::builder()
        .output_name(assets.output_name())
        .site_root(assets.site_root())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    let assets = Arc::new(assets);
    let control = Router::new()
        .route("/me", get(sessions::me))
        .route("/audit", get(sessions::audit_log))
        .route("/sessions", get(sessions::list).post(sessions::create))
        .route(
            "/sessions/{sid}",
            get(sessions::show)
                .delete(sessions::terminate)
                .patch(network::update)
                .post(lifecycle::action)
                .route_layer(middleware::from_fn_with_state(state.clone(), to_owner)),
        )
        .route("/snapshots", get(lifecycle::list))
        .route("/pool", get(lifecycle::pool).put(lifecycle::set_pool))
        .route(
            "/snapshots/{id}",
            get(lifecycle::show).delete(lifecycle::delete),
        )
        .route(
            "/sessions/{sid}/share",
            get(sessions::list_shares).post(sessions::share),
        )
        .route("/sessions/{sid}/share/{id}", delete(sessions::revoke_share))
        .route("/sessions/{sid}/frames", get(playback::frames))
        .route("/sessions/{sid}/recording.cast", get(playback::recording))
        .route("/sessions/{sid}/attach", get(pty_ws::attach))
        .layer(body::limit(body::MAX_BODY_BYTES, ApiError::too_large));
    let rpc = Router::new()
        .route("/jsonrpc", axum::routing::post(jsonrpc::endpoint))
        .route("/jsonrpc/", axum::routing::post(jsonrpc::endpoint))
        .layer(body::limit(body::MAX_BODY_BYTES, jsonrpc::too_large));
    let rest = rest::routes(&state).layer(body::limit(body::MAX_BODY_BYTES, rest::too_large));
    // Streamed both ways, held to --max-file-bytes by the handler, not buffered.
    let files = Router::new()
        .route("/sessions/{sid}/files", get(files::get))
        .route("/sessions/{sid}/files/", get(files::get))
        .route(
            "/sessions/{sid}/files/{*path}",
            get(files::get).put(files::put).delete(files::delete),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), to_owner));
    // Port previews: streamed both ways (HTTP and WebSocket), authenticated by the
    // preview itself (bearer or its cookie).
    let previews = Router::new()
        .route("/sessions/{sid}/ports/{port}", any(preview::redirect))
        .route("/sessions/{sid}/ports/{port}/", any(preview::proxy))
        .route("/sessions/{sid}/ports/{port}/{*path}", any(preview::proxy))
        .route_layer(middleware::from_fn_with_state(state.clone(), to_owner));
    let api = (control.merge(rpc).merge(rest).merge(files).merge(previews))
        .merge(mcp::http::routes(&state));
    let instance = api
        .clone()
        .route("/.well-known/agent-card.json", get(card::superset))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            known_instance,
        ));
    let ui = Router::new()
        .leptos_routes(&leptos, generate_route_list(app::App), {
            let leptos = leptos.clone();
            move || app::shell(leptos.clone())
        })
        .fallback({
            // A UI file, or else the app's page for the path (its router says "Not found.").
            let page = leptos_axum::render_app_to_stream({
                let leptos = leptos.clone();
                move || app::shell(leptos.clone())
            });
            move |req: Request| {
                let (assets, page) = (assets.clone(), page.clone());
                async move {
                    let (parts, body) = req.into_parts();
                    match assets.serve(&parts).await {
                        Some(file) => file,
                        None => page(Request::from_parts(parts, body)).await,
                    }
                }
            }
        })
        .with_state(leptos);
    // At the root the API and the UI share `/sessions/{sid}`: a browser navigating there
    // gets the page, an API client the JSON.
    let root_api = api.route_layer(middleware::from_fn_with_state(ui.clone(), pages_to_ui));
    let mut root = Router::new();
    // The agentic-sandbox executor's liveness route, which its clients check.
    if state.tasks.agentic().profile() == crate::agentic::Profile::AgenticSandbox {
        root = root.route("/health", get(|| async { "healthy" }));
    }
    root.route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/nodes", get(nodes::list))
        .route("/metrics", get(metrics))
        .route("/.well-known/agent-card.json", get(card::pure))
        .route("/.well-known/a202-capability.json", get(a202::preflight))
        .route(
            "/a202/objects",
            axum::routing::post(a202::submit)
                .layer(body::limit(a202::MAX_OBJECT_BYTES, a202::too_large)),
        )
        .route("/a202/transactions/{id}", get(a202::transaction))
        .route(
            &format!("/{}/{{method}}", grpc::SERVICE),
            axum::routing::post(grpc::serve),
        )
        .nest("/agents/{instance_id}", instance)
        .merge(root_api)
        .with_state(state.clone())
        .fallback_service(ui)
        // A preview's own origin is the preview's alone: none of the API or the UI is there.
        .layer(middleware::from_fn_with_state(state, preview::by_host))
        .layer(middleware::from_fn(server::note_authentication))
}

/// A page navigation: GET, wants HTML, carries no credentials (its own or forwarded ones)
/// and is no WebSocket upgrade.
fn is_navigation(req: &Request) -> bool {
    let headers = req.headers();
    req.method() == axum::http::Method::GET
        && !headers.contains_key(header::AUTHORIZATION)
        && !headers.contains_key(crate::cluster::FORWARD_HEADER)
        && !headers.contains_key(header::UPGRADE)
        && headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"))
}

async fn pages_to_ui(State(ui): State<Router>, req: Request, next: Next) -> Response {
    if is_navigation(&req) {
        match tower::ServiceExt::oneshot(ui, req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    } else {
        next.run(req).await
    }
}

/// A request about a session another node runs goes to that node (its files, its live
/// state, its end), once this node has authenticated the caller. Anything else, and any
/// caller this node refuses, is answered here.
async fn to_owner(
    State(state): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
    next: Next,
) -> Response {
    // `{sid}:pause` and the like name the session before the colon.
    let sid = params.get("sid").map(|s| s.split(':').next().unwrap_or(s));
    let owner = match sid {
        // Running here: no lookup.
        Some(sid) if state.sessions.live(&SessionId::from(sid)).is_some() => None,
        Some(sid) => match state.store.sessions().get(sid).await {
            Ok(Some(row)) => state.node.owner(&row).await.ok(),
            _ => None,
        },
        None => None,
    };
    let Some(Owner::There { url, .. }) = owner else {
        return next.run(req).await;
    };
    let bearer = crate::state::header_bearer(req.headers());
    match crate::state::authenticate(&state, req.headers(), bearer).await {
        Ok(who) if sid.is_some_and(|sid| who.sees_session(sid)) => {
            forward::http(&state.node, &who, &url, req)
                .await
                .unwrap_or_else(|| ApiError::node_unreachable().into_response())
        }
        _ => next.run(req).await,
    }
}

/// Only the configured instance exists; any other `{instance_id}` is 404.
async fn known_instance(
    State(state): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
    next: Next,
) -> Response {
    match params.get("instance_id") {
        Some(id) if *id != state.instance_id => {
            ApiError::not_found(format!("no agent instance {id:?}")).into_response()
        }
        _ => next.run(req).await,
    }
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    if state.store.refusing_writes() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the store refuses writes").into_response();
    }
    let ping = tokio::time::timeout(std::time::Duration::from_secs(2), state.store.ping());
    match ping
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within 2 s")))
    {
        Ok(()) => "ready".into_response(),
        Err(e) => {
            tracing::error!(error = %e, "store not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "store unavailable").into_response()
        }
    }
}

/// Prometheus text: what is running now.
async fn metrics(State(state): State<AppState>) -> Response {
    let gauges = [
        (
            "ptyhost_sessions_running",
            "Sessions whose program is running.",
            state.sessions.live_count(),
        ),
        (
            "ptyhost_pty_ws_connections",
            "Open pty-ws/v1 connections.",
            state.connections.len(),
        ),
        (
            "ptyhost_tasks_running",
            "A2A tasks not finished yet.",
            state.tasks.live_count(),
        ),
        (
            "ptyhost_shell_pool_shells",
            "Pooled shells, ready or starting (at most --shell-pool).",
            state.sessions.pool_size(),
        ),
    ];
    let mut body = String::new();
    for (name, help, value) in gauges {
        body.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        ));
    }
    let pool = state.sessions.pool();
    for (name, help, value) in [
        (
            "ptyhost_shell_pool_taken_total",
            "Pooled shells taken by messages.",
            pool.hits,
        ),
        (
            "ptyhost_shell_pool_hits_total",
            "Messages that found a pooled shell ready.",
            pool.hits,
        ),
        (
            "ptyhost_shell_pool_misses_total",
            "Messages that asked the pool for a shell and found none ready.",
            pool.misses,
        ),
    ] {
        body.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
        ));
    }
    // Every node of the cluster as the store knows it (none while the store is down).
    if let Ok(nodes) = state.node.list().await {
        let families = [
            (
                "ptyhost_node_alive",
                "Whether the node's heartbeat is within --node-timeout.",
            ),
            ("ptyhost_node_sessions", "Sessions running on the node."),
            (
                "ptyhost_node_last_seen_seconds",
                "Unix time of the node's last heartbeat.",
            ),
        ];
        for (i, (name, help)) in families.into_iter().enumerate() {
            body.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
            for (n, alive) in &nodes {
                let value = match i {
                    0 => u8::from(*alive).to_string(),
                    1 => n.sessions.to_string(),
                    _ => format!("{:.3}", n.last_seen as f64 / 1000.0),
                };
                let this = if n.id == state.node.id() {
                    ",this=\"true\""
                } else {
                    ""
                };
                body.push_str(&format!("{name}{{node_id=\"{}\"{this}}} {value}\n", n.id));
            }
        }
    }
    body.push_str(&format!(
        "# HELP ptyhost_build_info The running build.\n# TYPE ptyhost_build_info gauge\nptyhost_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    ));
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        body,
    )
        .into_response()
}
