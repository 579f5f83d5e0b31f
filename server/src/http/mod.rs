//! The axum router: operations endpoints, the AgentCards, the per-instance API under
//! `/agents/{instance_id}` (also served at `/` for the default instance), and the UI.

pub mod assets;
mod sessions;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use leptos::prelude::LeptosOptions;
use leptos_axum::{LeptosRoutes, generate_route_list};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::a2a::service::TaskService;
use crate::auth::{self, AuthError, Principal, Scope};
use crate::bindings::{a202, jsonrpc, pty_ws, rest};
use crate::card;
use crate::sessions::Sessions;
use crate::store::Store;

#[derive(Clone)]
pub struct AppState(Arc<AppInner>);

pub struct AppInner {
    pub sessions: Sessions,
    pub tasks: TaskService,
    pub store: Store,
    pub instance_id: String,
    /// Origin clients reach us at, without a trailing slash (e.g. `http://127.0.0.1:3000`).
    pub public_url: String,
    /// Plain ws:// upgrades are refused: the listen address is not loopback and the
    /// operator did not pass `--allow-insecure-ws`.
    pub refuse_plain_ws: bool,
    /// Served over plain HTTP on a non-loopback address (A202 objects are refused then).
    pub plain_off_loopback: bool,
    /// Origins (`scheme://host:port`) whose browser pages may attach.
    pub allowed_origins: Vec<String>,
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    pub limits: crate::limits::Limits,
    pub audit: crate::audit::Audit,
    /// Cancelled when the server stops: connections say goodbye and close.
    pub shutdown: CancellationToken,
    /// Every WebSocket connection, so that shutdown can wait for their goodbyes.
    pub connections: TaskTracker,
}

impl std::ops::Deref for AppState {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl AppState {
    pub fn new(inner: AppInner) -> AppState {
        AppState(Arc::new(inner))
    }

    /// Whether a browser page from `origin` may open a WebSocket here.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        origin.eq_ignore_ascii_case(&self.public_url)
            || self
                .allowed_origins
                .iter()
                .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
    }

    /// `B`, the base URL of this instance's API.
    pub fn base_url(&self) -> String {
        format!("{}/agents/{}", self.public_url, self.instance_id)
    }

    /// The pty-ws attach URL of a session (`{session_id}` for the template).
    pub fn attach_url(&self, session_id: &str) -> String {
        let base = self.base_url();
        let ws = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else {
            format!("ws://{}", base.trim_start_matches("http://"))
        };
        format!("{ws}/sessions/{session_id}/attach")
    }
}

pub fn router(state: AppState, assets: assets::Assets, addr: std::net::SocketAddr) -> Router {
    let leptos = LeptosOptions::builder()
        .output_name(assets.output_name())
        .site_root(assets.site_root())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    let assets = Arc::new(assets);
    let api = Router::new()
        .route("/me", get(sessions::me))
        .route("/audit", get(sessions::audit_log))
        .route("/sessions", get(sessions::list).post(sessions::create))
        .route(
            "/sessions/{sid}",
            get(sessions::show).delete(sessions::terminate),
        )
        .route(
            "/sessions/{sid}/share",
            get(sessions::list_shares).post(sessions::share),
        )
        .route("/sessions/{sid}/share/{id}", delete(sessions::revoke_share))
        .route("/sessions/{sid}/attach", get(pty_ws::attach))
        .route("/jsonrpc", axum::routing::post(jsonrpc::endpoint))
        .route("/jsonrpc/", axum::routing::post(jsonrpc::endpoint))
        .merge(rest::routes(&state));
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
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/.well-known/agent-card.json", get(card::pure))
        .route("/.well-known/a202-capability.json", get(a202::preflight))
        .route(
            "/a202/objects",
            axum::routing::post(a202::submit)
                .layer(axum::extract::DefaultBodyLimit::max(a202::MAX_OBJECT_BYTES)),
        )
        .route("/a202/transactions/{id}", get(a202::transaction))
        .nest("/agents/{instance_id}", instance)
        .merge(root_api)
        .with_state(state)
        .fallback_service(ui)
}

/// A page navigation: GET, wants HTML, carries no credentials and is no WebSocket upgrade.
fn is_navigation(req: &Request) -> bool {
    let headers = req.headers();
    req.method() == axum::http::Method::GET
        && !headers.contains_key(header::AUTHORIZATION)
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
    match state.store.ping().await {
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
    ];
    let mut body = String::new();
    for (name, help, value) in gauges {
        body.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        ));
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

/// A control-plane error: `{"error": {"code", "message"}}` with a fitting status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for `Retry-After` (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn rate_limited(refused: crate::limits::Refused) -> ApiError {
        ApiError {
            retry_after: Some(refused.retry_after.as_secs_f64().ceil().max(1.0) as u64),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                refused.message,
            )
        }
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "permission_denied", message)
    }
    pub fn internal(e: anyhow::Error) -> ApiError {
        tracing::error!(error = %format!("{e:#}"), "request failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> ApiError {
        ApiError::internal(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(serde_json::json!({
            "error": { "code": self.code, "message": self.message }
        }));
        let mut resp = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// Refuses credentials in the URL query: they would end up in logs and histories.
pub fn refuse_query_token(query: Option<&str>) -> Result<(), ApiError> {
    const CREDENTIALS: [&str; 10] = [
        "token",
        "access_token",
        "auth_token",
        "id_token",
        "bearer",
        "authorization",
        "auth",
        "api_key",
        "apikey",
        "jwt",
    ];
    let named_like_a_secret =
        |name: &str| CREDENTIALS.contains(&name.to_ascii_lowercase().as_str());
    let found = query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split('=').next())
        .any(named_like_a_secret);
    if found {
        return Err(ApiError::bad_request(
            "credentials in the URL query are refused; use the Authorization header",
        ));
    }
    Ok(())
}

pub fn auth_error(e: AuthError) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", e.to_string())
}

/// The `Authorization: Bearer` token of a request, if any.
pub fn header_bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(auth::bearer_from_authorization)
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        refuse_query_token(parts.uri.query())?;
        auth::authenticate(&state.store, header_bearer(&parts.headers))
            .await
            .map_err(auth_error)
    }
}

/// Refuses a principal whose scope is below `needed`.
pub fn require(principal: &Principal, needed: Scope) -> Result<(), ApiError> {
    if principal.scope < needed {
        return Err(ApiError::forbidden(format!(
            "this needs {needed}; the token has {}",
            principal.scope
        )));
    }
    Ok(())
}
