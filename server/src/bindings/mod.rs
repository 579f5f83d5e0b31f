//! Thin adapters between transports and the task service and sessions.

pub mod a202;
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

/// What a request activates, by its `A2A-Extensions` headers, of the extensions the card
/// declares (HTTP+JSON, JSON-RPC).
pub fn activate(tasks: &TaskService, headers: &HeaderMap) -> Result<Activation, A2aError> {
    Ok(extensions::activate(
        headers,
        &card::extensions(tasks.commerce()),
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
