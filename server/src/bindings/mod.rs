//! Thin adapters between transports and the task service and sessions.

pub mod a202;
pub mod grpc;
pub mod jsonrpc;
pub mod mcp;
pub mod proto;
pub mod pty_ws;
pub mod rest;
pub mod stdio;

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value};

use crate::a2a::A2aError;
use crate::a2a::service::TaskService;
use crate::agentic::Surface;
use crate::agentic::idempotency::{self, Begun};
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

/// What a request on `surface` (HTTP+JSON and JSON-RPC, or gRPC) activates, by its
/// `A2A-Extensions` headers, of the extensions the card declares that it implements: A202
/// and the agentic-sandbox ones (the PTY and flow-control extensions live on pty-ws alone).
pub fn activate(
    tasks: &TaskService,
    headers: &HeaderMap,
    surface: Surface,
) -> Result<Activation, A2aError> {
    let declared: Vec<_> = std::iter::once(tasks.a202().declared())
        .chain(tasks.agentic().declared(surface))
        .collect();
    Ok(extensions::activate(headers, &declared)?)
}

/// A send under `idempotency/v1` (activated by the request): `run` answers it unless its
/// key replays an earlier answer. `binding` names where the answer is valid (a JSON-RPC
/// answer is no HTTP+JSON one); `refuse` renders a refusal in the binding's vocabulary.
/// The send runs in a task of its own, so a client that goes away does not stop it and
/// its retry gets the answer.
pub async fn idempotent<F>(
    tasks: &TaskService,
    params: &Value,
    binding: &str,
    refuse: impl Fn(A2aError) -> Response,
    run: F,
) -> Response
where
    F: std::future::Future<Output = Response> + Send + 'static,
{
    let key = match idempotency::key(params) {
        Ok(Some(key)) => key,
        Ok(None) => return run.await,
        Err(refusal) => return refuse(refusal.into()),
    };
    match tasks.agentic().idempotency().begin(key, binding).await {
        Err(refusal) => refuse(refusal.into()),
        Ok(Begun::Replay(response)) => response,
        Ok(Begun::Fresh(claim)) => {
            let response = tokio::spawn(run)
                .await
                .unwrap_or_else(|_| refuse(A2aError::Internal));
            claim.record(response).await
        }
    }
}

/// What a binding without headers (pty-ws, STDIO) activates through its service
/// parameters.
pub fn activate_parameters(
    tasks: &TaskService,
    params: &Map<String, Value>,
) -> Result<Vec<&'static str>, A2aError> {
    Ok(extensions::from_parameters(
        params,
        &card::extensions(tasks),
    )?)
}
