//! A running session's network: its egress allowlist, changed live (`PATCH
//! B/sessions/{sid}`), and the ports listening inside its namespace.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use wire::control;

use super::sessions::{SessionPath, body, view_json, visible, with_ports};
use crate::audit;
use crate::auth::{Principal, Scope};
use crate::egress::{Rule, Rules};
use crate::sessions::sandboxed;
use crate::state::{ApiError, AppState, require};

fn conflict(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "failed_precondition", message)
}

/// The allowlist a network update asks for.
fn requested(network: control::Network) -> Result<Rules, ApiError> {
    match network {
        control::Network::Mode(m) if m == "none" => Ok(Rules::default()),
        control::Network::Mode(m) if m == "host" => Err(conflict(
            "a running session cannot move to the host's network; start one with network \"host\"",
        )),
        control::Network::Mode(m) => Err(ApiError::bad_request(format!(
            "network {m:?} is none of \"none\", {{\"allow\": [RULE…]}}"
        ))),
        control::Network::Allow { allow } => allow
            .iter()
            .map(|r| r.parse::<Rule>())
            .collect::<Result<Vec<_>, _>>()
            .map(Rules)
            .map_err(ApiError::bad_request),
    }
}

/// Changes a running session's egress allowlist: `pty:admin` may set any, `pty:control`
/// only one within the current. New connections follow it at once; open ones to a target
/// it no longer allows are cut.
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Path(SessionPath { sid }): Path<SessionPath>,
    payload: Result<Json<control::UpdateSession>, JsonRejection>,
) -> Result<Json<control::Session>, ApiError> {
    require(&who, Scope::Control)?;
    visible(&state, &who, &sid).await?;
    let rules = requested(body(payload)?.sandbox.network)?;
    let handle = (state.sessions.live(&sid))
        .ok_or_else(|| conflict(format!("session {sid} is not running")))?;
    let sandboxed = handle
        .sandboxed()
        .ok_or_else(|| conflict(format!("session {sid} is not sandboxed")))?;
    let net = (sandboxed.net.as_ref())
        .ok_or_else(|| conflict(format!("session {sid} runs on the host's network")))?;
    let before = net.rules();
    if who.scope < Scope::Admin && !rules.within(&before) {
        return Err(ApiError::forbidden(
            "widening a session's egress allowlist needs pty:admin; pty:control may only narrow it",
        ));
    }
    net.set_rules(rules.clone());
    let stored = sandboxed::stored(&sandboxed.limits, Some(&rules));
    state.store.sessions().set_sandbox(&sid, &stored).await?;
    state.audit.record(
        audit::Record::new(audit::Event::EgressChanged, &sid)
            .by(&who.token_id)
            .detail(audit::Detail::EgressChanged {
                from: before.texts(),
                to: rules.texts(),
            }),
    );
    let view = visible(&state, &who, &sid).await?;
    Ok(Json(with_ports(&state, view_json(&state, &view)).await))
}
