//! Thin adapters between transports and the task service and sessions.

pub mod a202;
pub mod grpc;
pub mod jsonrpc;
pub mod proto;
pub mod pty_ws;
pub mod rest;
pub mod stdio;

use axum::http::HeaderMap;
use serde_json::{Map, Value};

use crate::a2a::A2aError;
use crate::a2a::service::TaskService;
use crate::card;
use crate::extensions::{self, Activation};

/// The media types A2A bodies are sent as.
const A2A_JSON: &str = "application/a2a+json";
const JSON: &str = "application/json";

/// Whether the request's `Content-Type` (its essence, without parameters) is one of them;
/// `None` when it names none.
fn json_content_type(headers: &HeaderMap) -> Option<bool> {
    let declared = headers.get(axum::http::header::CONTENT_TYPE)?;
    let essence = declared
        .to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase());
    Some(essence.is_some_and(|t| t == JSON || t == A2A_JSON))
}

/// What a request activates, by its `A2A-Extensions` headers, of the extensions the card
/// declares that HTTP+JSON and JSON-RPC implement: A202 (the PTY and flow-control
/// extensions live on pty-ws alone).
pub fn activate(tasks: &TaskService, headers: &HeaderMap) -> Result<Activation, A2aError> {
    Ok(extensions::activate(
        headers,
        &[tasks.commerce().declared()],
    )?)
}

/// What a binding without headers (pty-ws, STDIO) activates through its service
/// parameters.
pub fn activate_parameters(
    tasks: &TaskService,
    params: &Map<String, Value>,
) -> Result<Vec<&'static str>, A2aError> {
    Ok(extensions::from_parameters(
        params,
        &card::extensions(tasks.commerce()),
    )?)
}
