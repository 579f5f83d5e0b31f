//! The `pty-ws/v1` binding: upgrade checks (subprotocol, bearer, session), then one task
//! per connection (`connection`) that maps frames to session commands and session frames
//! to the socket; joining (`connection::join`), the A2A operations on the connection
//! (`connection::tasks`) and sending (`connection::send`) are its other parts. A connection
//! speaks the spec's shape or the agentic-sandbox executor's (`executor`), which decodes
//! into and encodes from the same operations.

use crate::sessions::SessionId;
use std::sync::Arc;
use wire::server::{ErrorPayload, ServerFrame, ServerOp};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use wire::{self, ErrorCode, SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON};

mod connection;
mod executor;
mod forwarded;

use crate::websocket::{NotAnUpgrade, Socket, Upgrade};
use connection::Connection;

use crate::admission::Admitted;
use crate::audit;
use crate::auth::{self, Principal};
use crate::clock;
use crate::cluster::{Owner, forward};
use crate::limits::SessionSlot;
use crate::state::{
    ApiError, AppState, auth_error, authenticate, header_bearer, refuse_query_token,
};

/// Largest client frame accepted.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// Largest client frame read. One up to this size is read whole and refused with an Error
/// frame and close 1009; a larger one is refused unread, and since its bytes are never
/// read, the client may see the close as a reset.
const READ_LIMIT_BYTES: usize = 16 * MAX_FRAME_BYTES;
/// What a connection's read buffer holds at most between reads. The WebSocket library
/// zero-fills its whole read buffer before each read (128 KiB by default, resident for every
/// idle viewer); a frame larger than this still arrives whole, the buffer growing for it.
const READ_BUFFER_BYTES: usize = 4 * 1024;

#[derive(Debug, Deserialize)]
pub struct AttachPath {
    sid: String,
}

/// `GET B/sessions/{sid}/attach`: everything that can fail is refused before the upgrade.
pub async fn attach(
    State(state): State<AppState>,
    Path(AttachPath { sid }): Path<AttachPath>,
    uri: Uri,
    headers: HeaderMap,
    upgrade: Result<Upgrade, NotAnUpgrade>,
    admitted: Option<axum::Extension<Arc<Admitted>>>,
) -> Response {
    let checked = match url_replay_from(&uri) {
        Ok(resume) => check_attach(&state, &sid, &uri, &headers)
            .await
            .map(|c| (c, resume)),
        Err(e) => Err(e),
    };
    // What the checks refuse is refused first; then a request that is no upgrade.
    let (checked, upgrade) = match (checked, upgrade) {
        (Err(e), _) => return e.into_response(),
        (_, Err(rejection)) => return rejection.into_response(),
        (Ok(checked), Ok(upgrade)) => (checked, upgrade),
    };
    let tracker = state.connections.clone();
    match checked {
        ((principal, subprotocol, _slot, Owner::There { url, .. }), resume) => {
            // Another node runs the session: its answer to the upgrade is ours.
            let mut url = forward::attach_url(&url, &state.instance_id, &sid);
            if let Some(after) = resume {
                url.push_str(&format!("?replay_from={after}"));
            }
            let owner =
                match forward::open(&state.node, &url, subprotocol, &principal, READ_LIMIT_BYTES)
                    .await
                {
                    Ok(owner) => owner,
                    Err(Some(refused)) => return refused,
                    Err(None) => return ApiError::node_unreachable().into_response(),
                };
            upgraded(upgrade, subprotocol, tracker, admitted, move |socket| {
                forwarded::run(state, socket, owner, sid)
            })
        }
        ((principal, subprotocol, slot, Owner::Here), resume) => {
            let attach = audit::Record::new(audit::Event::Attach, &sid)
                .by(&principal.token_id)
                .detail(audit::Detail::Attach {
                    scope: principal.scope.as_str().to_owned(),
                    subprotocol: subprotocol.to_owned(),
                });
            state.audit.record(attach);
            if principal.share_link {
                let used = audit::Record::new(audit::Event::ShareLinkUsed, &sid)
                    .by(&principal.token_id)
                    .detail(audit::Detail::Opened {
                        to: "attach".into(),
                    });
                state.audit.record(used);
            }
            let binary = subprotocol == SUBPROTOCOL_BINARY;
            upgraded(upgrade, subprotocol, tracker, admitted, move |socket| {
                Connection::new(state, principal, sid.into(), binary, slot)
                    .resuming(resume)
                    .run(socket)
            })
        }
    }
}

/// Completes the upgrade with this binding's limits and runs `serve` on the socket; the
/// socket keeps its place among the server's connections (and its admission) until then.
fn upgraded<F>(
    ws: Upgrade,
    subprotocol: &'static str,
    tracker: tokio_util::task::TaskTracker,
    admitted: Option<axum::Extension<Arc<Admitted>>>,
    serve: impl FnOnce(Socket) -> F + Send + 'static,
) -> Response
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(READ_LIMIT_BYTES))
        .max_frame_size(Some(READ_LIMIT_BYTES));
    ws.on_upgrade(subprotocol, config, move |socket| {
        let held = async move {
            serve(socket).await;
            drop(admitted);
        };
        tracker.track_future(held)
    })
}

/// The executor's resume: `replay_from` as a query parameter of the attach URL.
fn url_replay_from(uri: &Uri) -> Result<Option<u64>, ApiError> {
    let value = (uri.query().unwrap_or_default().split('&'))
        .find_map(|pair| pair.strip_prefix("replay_from="));
    match value.map(str::parse::<u64>) {
        None => Ok(None),
        Some(Ok(after)) => Ok(Some(after)),
        Some(Err(_)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "replay_from must be a sequence number",
        )),
    }
}

async fn check_attach(
    state: &AppState,
    sid: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<(Principal, &'static str, SessionSlot, Owner), ApiError> {
    refuse_query_token(uri.query())?;
    if state.refuse_plain_ws {
        return Err(ApiError::forbidden(
            "plain ws:// is refused on a non-loopback address: put TLS in front or pass --allow-insecure-ws",
        ));
    }
    // A browser says where the page came from: only ours may attach (no cross-site
    // WebSocket hijacking). Other clients send no Origin.
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok())
        && !state.origin_allowed(origin)
    {
        tracing::warn!(origin, "refused a WebSocket upgrade from a foreign origin");
        return Err(ApiError::forbidden(format!(
            "pages from {origin} may not attach (see --allowed-origin)"
        )));
    }
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    // The first of ours the client offers is the one it prefers.
    let Some(subprotocol) = offered.iter().find_map(|p| {
        [SUBPROTOCOL_BINARY, SUBPROTOCOL_JSON]
            .into_iter()
            .find(|o| o == p)
    }) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the Sec-WebSocket-Protocol header must include pty-ws.v1 or pty-ws.v1.binary",
        ));
    };
    let token = header_bearer(headers)
        .map(str::to_owned)
        .or_else(|| auth::bearer_from_subprotocols(offered.iter().copied()));
    let principal = authenticate(state, headers, token.as_deref())
        .await
        .map_err(auth_error)?;
    let not_found = || ApiError::not_found(format!("no session {sid}"));
    let id = SessionId::from(sid);
    let owner = match principal.sees_session(sid) {
        false => return Err(not_found()),
        // A session running here needs no trip to the store (fifty joins at once would
        // queue for its connections).
        true if state.sessions.live(&id).is_some() => Owner::Here,
        true => match state.sessions.view(&id).await? {
            Some(view) => state.node.owner(&view.row).await?,
            None => return Err(not_found()),
        },
    };
    state
        .limits
        .connection(&principal.token_id)
        .map_err(ApiError::rate_limited)?;
    let slot = state
        .limits
        .session_slot(sid)
        .map_err(ApiError::rate_limited)?;
    Ok((principal, subprotocol, slot, owner))
}

/// A binding-level frame (not a session frame): hello, goodbye, responses, errors.
/// A frame sent now: `id` is the request it answers (a new UUIDv7 when it answers none).
fn frame_now(id: Option<String>, sequence: Option<u64>, op: ServerOp) -> ServerFrame {
    ServerFrame {
        id: id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        ts: clock::now_rfc3339(),
        sequence,
        service_parameters: None,
        op,
    }
}

fn server_frame(id: Option<String>, sequence: Option<u64>, op: ServerOp) -> String {
    frame_now(id, sequence, op).to_text()
}

fn error_frame(id: Option<String>, code: ErrorCode, message: &str) -> String {
    error_frame_of(id, ErrorPayload::new(code, message))
}

fn error_frame_of(id: Option<String>, error: ErrorPayload) -> String {
    server_frame(id, None, ServerOp::Error(Box::new(error)))
}
