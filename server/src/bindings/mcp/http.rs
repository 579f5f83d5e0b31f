//! MCP's Streamable HTTP transport at `B/mcp`: rmcp's service, behind the server's own
//! rules. A request from a browser page must come from an allowed origin (as a pty-ws
//! attach must), and every request carries a bearer token, whose principal each tool call
//! acts as (with its scope and session binding).

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::{Caller, Terminal, Terminals};
use crate::auth::Principal;
use crate::state::{ApiError, AppState};

/// The route `/mcp` (under the instance's base), for `state`'s sessions and tasks.
pub fn routes(state: &AppState) -> Router<AppState> {
    let terminals = Terminals::new(
        state.sessions.clone(),
        state.tasks.clone(),
        state.files.clone(),
        Some(state.public_url.clone()),
    );
    let config = StreamableHttpServerConfig::default()
        // Hosts are the server's business (`--public-url`); origins are checked below.
        .with_allowed_hosts(Vec::<String>::new())
        .with_cancellation_token(state.shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(Terminal::new(Arc::clone(&terminals), Caller::Bearer)),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .route_layer(middleware::from_fn_with_state(state.clone(), admit))
}

/// Refuses a page from an origin that may not use this server, and a request without a
/// valid bearer token; gives the others' principal to the tools.
async fn admit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or(""));
    if let Some(origin) = origin
        && !state.origin_allowed(origin)
    {
        let message = format!("origin {origin} may not use this server (--allowed-origin)");
        return ApiError::new(StatusCode::FORBIDDEN, "origin_not_allowed", message).into_response();
    }
    let (mut parts, body) = req.into_parts();
    match Principal::from_request_parts(&mut parts, &state).await {
        Ok(who) => {
            parts.extensions.insert(who);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => e.into_response(),
    }
}
