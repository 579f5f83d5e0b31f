//! A session's lifecycle on the control plane: `POST B/sessions/{sid}:pause`, `:resume`,
//! `:snapshot` and `:fork`, the snapshots (`GET B/snapshots`, `GET|DELETE
//! B/snapshots/{id}`), and the warm pool (`GET|PUT B/pool`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use wire::control;

use super::sessions::{start, view_json, visible};
use crate::auth::{Principal, Scope};
use crate::clock;
use crate::sessions::{LifecycleError, SessionId, SpecRequest, sandboxed};
use crate::state::{ApiError, AppState, require};
use crate::store::SnapshotRow;

/// How many sessions one fork may start.
const MAX_FORKS: u32 = 16;

#[derive(Debug, Deserialize)]
pub struct ActionPath {
    sid: String,
}

/// `POST B/sessions/{sid}:{op}`.
pub async fn action(
    State(state): State<AppState>,
    who: Principal,
    Path(ActionPath { sid }): Path<ActionPath>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some((sid, op)) = sid.rsplit_once(':') else {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "unimplemented",
            format!("no operation POST B/sessions/{sid}; try :pause, :resume, :snapshot or :fork"),
        ));
    };
    let sid = SessionId::from(sid);
    require(&who, Scope::Control)?;
    visible(&state, &who, &sid).await?;
    match op {
        "pause" => {
            state.sessions.pause(&sid).await.map_err(refused)?;
            shown(&state, &who, &sid).await
        }
        "resume" => {
            state.sessions.resume(&sid).await.map_err(refused)?;
            shown(&state, &who, &sid).await
        }
        "snapshot" => {
            let asked: control::TakeSnapshot = parse(&body)?;
            let row = (state.sessions.snapshot(&sid, asked.label).await).map_err(refused)?;
            Ok((StatusCode::CREATED, Json(snapshot_json(&row))).into_response())
        }
        "fork" => fork(&state, &who, &sid, parse(&body)?).await,
        _ => Err(ApiError::not_found(format!(
            "no operation :{op}; try :pause, :resume, :snapshot or :fork"
        ))),
    }
}

/// A body's JSON; none at all is the type's default.
fn parse<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))
}

async fn shown(state: &AppState, who: &Principal, sid: &SessionId) -> Result<Response, ApiError> {
    let view = visible(state, who, sid).await?;
    Ok(Json(view_json(state, &view)).into_response())
}

/// Snapshots session `sid` and starts `count` sessions from it, each a fresh shell in a
/// workspace of its own, with the source's sandbox.
async fn fork(
    state: &AppState,
    who: &Principal,
    sid: &SessionId,
    asked: control::Fork,
) -> Result<Response, ApiError> {
    let count = asked.count.unwrap_or(1);
    if !(1..=MAX_FORKS).contains(&count) {
        return Err(ApiError::bad_request(format!(
            "count must be 1 to {MAX_FORKS}"
        )));
    }
    let source = visible(state, who, sid).await?;
    let snapshot = (state
        .sessions
        .snapshot(sid, Some(format!("fork of {sid}")))
        .await)
        .map_err(refused)?;
    let sandbox = sandboxed::stored_limits(&source.row)
        .map(|(limits, egress)| crate::sandbox::Request::same_as(&limits, egress.as_ref()));
    let mut sessions = Vec::new();
    for i in 1..=count {
        let label = source.row.label.as_deref().unwrap_or("session");
        let request = SpecRequest {
            label: Some(format!("{label} (fork {i})")),
            sandbox: sandbox.clone(),
            admin: who.scope >= Scope::Admin,
            from_snapshot: Some(snapshot.id.clone()),
            ..Default::default()
        };
        sessions.push(start(state, who, request).await?);
    }
    let forked = control::Forked {
        snapshot_id: snapshot.id,
        sessions,
    };
    Ok((StatusCode::CREATED, Json(forked)).into_response())
}

pub(super) fn snapshot_json(row: &SnapshotRow) -> control::Snapshot {
    control::Snapshot {
        snapshot_id: row.id.clone(),
        session_id: row.session_id.clone(),
        label: row.label.clone(),
        bytes: row.bytes,
        files: row.files,
        created_at: clock::rfc3339(row.created_at),
    }
}

fn refused(e: LifecycleError) -> ApiError {
    match e {
        LifecycleError::Snapshot(crate::lifecycle::SnapshotError::Failed(e)) => e.into(),
        LifecycleError::Snapshot(e @ crate::lifecycle::SnapshotError::TooLarge { .. }) => {
            ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "resource_exhausted",
                e.to_string(),
            )
        }
        e => ApiError::new(StatusCode::CONFLICT, "failed_precondition", e.to_string()),
    }
}

/// `GET B/snapshots`: every snapshot, or a session-bound token's session's.
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<control::Snapshots>, ApiError> {
    let rows = state.store.snapshots().list(&state.instance_id).await?;
    let snapshots = rows
        .iter()
        .filter(|r| who.sees_session(&r.session_id))
        .map(snapshot_json)
        .collect();
    Ok(Json(control::Snapshots { snapshots }))
}

#[derive(Debug, Deserialize)]
pub struct SnapshotPath {
    id: String,
}

/// A snapshot this caller may see; 404 otherwise.
async fn seen(state: &AppState, who: &Principal, id: &str) -> Result<SnapshotRow, ApiError> {
    let row = state.store.snapshots().get(id).await?;
    row.filter(|r| r.instance_id == state.instance_id && who.sees_session(&r.session_id))
        .ok_or_else(|| ApiError::not_found(format!("no snapshot {id}")))
}

pub async fn show(
    State(state): State<AppState>,
    who: Principal,
    Path(SnapshotPath { id }): Path<SnapshotPath>,
) -> Result<Json<control::Snapshot>, ApiError> {
    Ok(Json(snapshot_json(&seen(&state, &who, &id).await?)))
}

pub async fn delete(
    State(state): State<AppState>,
    who: Principal,
    Path(SnapshotPath { id }): Path<SnapshotPath>,
) -> Result<StatusCode, ApiError> {
    require(&who, Scope::Control)?;
    seen(&state, &who, &id).await?;
    state.store.snapshots().delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn pool_json(p: crate::sessions::PoolView) -> control::Pool {
    control::Pool {
        size: p.wanted,
        sandbox: p.sandbox,
        ready: p.ready,
        hits: p.hits,
        misses: p.misses,
    }
}

/// `GET B/pool` (`pty:admin`).
pub async fn pool(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<control::Pool>, ApiError> {
    require(&who, Scope::Admin)?;
    Ok(Json(pool_json(state.sessions.pool())))
}

/// `PUT B/pool` (`pty:admin`): its size and its shells' sandbox, at run time.
pub async fn set_pool(
    State(state): State<AppState>,
    who: Principal,
    body: Bytes,
) -> Result<Json<control::Pool>, ApiError> {
    require(&who, Scope::Admin)?;
    let asked: control::SetPool = parse(&body)?;
    const MAX_POOL: usize = 64;
    if asked.size.is_some_and(|n| n > MAX_POOL) {
        return Err(ApiError::bad_request(format!(
            "size must be at most {MAX_POOL}"
        )));
    }
    let view = (state.sessions.set_pool(asked.size, asked.sandbox).await)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.code(), e.to_string()))?;
    Ok(Json(pool_json(view)))
}
