//! The session control plane: create, list, show and terminate sessions, and mint, list
//! and revoke read-only observer links.

use crate::sessions::SessionId;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use wire::{CloseReason, control};

use crate::audit;
use crate::auth::{self, Principal, Scope, TokenRequest};
use crate::clock;
use crate::sessions::{self, SessionView, SpecError, SpecRequest};
use crate::state::{ApiError, AppState, require};

const DEFAULT_SHARE_TTL: u64 = 3600;
const MAX_SHARE_TTL: u64 = 30 * 24 * 3600;

/// Path parameters by name, so the same handlers serve `/` and `/agents/{instance_id}`.
#[derive(Debug, Deserialize)]
pub struct SessionPath {
    pub(super) sid: SessionId,
}

#[derive(Debug, Deserialize)]
pub struct SharePath {
    sid: SessionId,
    id: String,
}

pub(super) fn body<T>(payload: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    payload
        .map(|Json(t)| t)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

pub(super) fn view_json(state: &AppState, v: &SessionView) -> control::Session {
    let r = &v.row;
    let live = state.sessions.live(&SessionId::from(&r.id));
    let lifetime = sessions::Lifetime::from_stored(r.lifetime.as_deref());
    let paused = v.live.and_then(|l| l.paused);
    let span = |d: Duration| humantime::format_duration(d).to_string();
    control::Session {
        session_id: r.id.clone(),
        instance_id: r.instance_id.clone(),
        node_id: r.node_id.clone(),
        label: r.label.clone(),
        argv: r.argv.clone(),
        cwd: r.cwd.clone(),
        session_backend: r.backend.clone(),
        session_class: r.class.clone(),
        cols: r.cols,
        rows: r.rows,
        state: match paused {
            Some(_) => "paused".to_owned(),
            None => r.state.clone(),
        },
        exit_code: r.exit_code,
        close_reason: r.close_reason.clone(),
        created_at: clock::rfc3339(r.created_at),
        closed_at: r.closed_at.map(clock::rfc3339),
        current_sequence: r.last_sequence,
        replay_floor: v.replay_floor,
        controllers: v.live.map_or(0, |l| l.controllers),
        observers: v.live.map_or(0, |l| l.observers),
        attach_url: state.attach_url(&r.id),
        sandbox: Some(sessions::sandboxed::info(
            sessions::sandboxed::stored_limits(r).as_ref(),
            &state.sessions.settings().sandbox,
        )),
        usage: (live.as_ref()).and_then(|h| h.sandboxed().and_then(|s| s.usage())),
        workspace: r.workspace.clone(),
        ports: None,
        ttl: lifetime.ttl().map(span),
        idle_timeout: lifetime.idle_timeout().map(span),
        ends_at: (live.as_ref())
            .and_then(|h| h.ends_at_ms())
            .map(clock::rfc3339),
        paused: paused.map(|p| control::Paused {
            since: clock::rfc3339(p.since_ms),
            method: p.method,
            idle: p.idle,
        }),
    }
}

/// The session, when it exists and this principal may see it; 404 otherwise (never 403,
/// so a bound token learns nothing about other sessions).
pub(super) async fn visible(
    state: &AppState,
    who: &Principal,
    sid: &SessionId,
) -> Result<SessionView, ApiError> {
    let not_found = || ApiError::not_found(format!("no session {sid}"));
    if !who.sees_session(sid) {
        return Err(not_found());
    }
    state.sessions.view(sid).await?.ok_or_else(not_found)
}

/// Who the caller is: what the UI needs to show or hide controls. Signing in with a
/// share link is a use of it.
pub async fn me(State(state): State<AppState>, who: Principal) -> Json<control::Me> {
    if let (true, Some(sid)) = (who.share_link, &who.session_id) {
        state.audit.record(
            audit::Record::new(audit::Event::ShareLinkUsed, sid)
                .by(&who.token_id)
                .detail(audit::Detail::Opened {
                    to: "sign_in".into(),
                }),
        );
    }
    Json(control::Me {
        scope: who.scope.as_str().to_owned(),
        token_id: who.token_id,
        file_downloads: who.scope >= Scope::Control || state.files.observer_downloads,
        session_id: who.session_id,
        label: who.label,
    })
}

pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    payload: Result<Json<control::CreateSession>, JsonRejection>,
) -> Result<Response, ApiError> {
    let c = body(payload)?;
    let sandbox = c
        .sandbox
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("sandbox: {e}")))?;
    let span = |what, s: &Option<control::Span>| {
        s.as_ref()
            .map(|s| sessions::span(what, s))
            .transpose()
            .map_err(spec_error)
    };
    let request = SpecRequest {
        argv: c.argv,
        command: c.command,
        cwd: c.cwd,
        env: c.env,
        session_backend: c.session_backend,
        session_class: c.session_class,
        cols: c.cols,
        rows: c.rows,
        label: c.label,
        sandbox,
        admin: who.scope >= Scope::Admin,
        ttl: span("ttl", &c.ttl)?,
        idle_timeout: span("idle_timeout", &c.idle_timeout)?,
        from_snapshot: c.from_snapshot,
    };
    let session = start(&state, &who, request).await?;
    Ok((StatusCode::CREATED, Json(session)).into_response())
}

fn spec_error(e: SpecError) -> ApiError {
    let status = match e {
        SpecError::Forbidden(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, e.code(), e.to_string())
}

/// Starts a session for `who` (`pty:control`, not bound to a session); its JSON.
pub(super) async fn start(
    state: &AppState,
    who: &Principal,
    request: SpecRequest,
) -> Result<control::Session, ApiError> {
    require(who, Scope::Control)?;
    if who.session_id.is_some() {
        return Err(ApiError::forbidden(
            "a session-bound token cannot create sessions",
        ));
    }
    if let Some(id) = &request.from_snapshot
        && state.store.snapshots().get(id).await?.is_none()
    {
        return Err(ApiError::not_found(format!("no snapshot {id}")));
    }
    let spec = request
        .into_spec(state.sessions.settings())
        .map_err(spec_error)?;
    let row = state.sessions.create(spec).await?;
    let view = state
        .sessions
        .view(&SessionId::from(&row.id))
        .await?
        .ok_or_else(|| anyhow::anyhow!("session {} vanished", row.id))?;
    Ok(view_json(state, &view))
}

pub async fn list(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<control::SessionList>, ApiError> {
    let views = state.sessions.list().await?;
    let sessions = views
        .iter()
        .filter(|v| who.sees_session(&v.row.id))
        .map(|v| with_ports(&state, view_json(&state, v)));
    let sessions = futures_util::future::join_all(sessions).await;
    Ok(Json(control::SessionList { sessions }))
}

pub async fn show(
    State(state): State<AppState>,
    who: Principal,
    Path(SessionPath { sid }): Path<SessionPath>,
) -> Result<Json<control::Session>, ApiError> {
    let v = visible(&state, &who, &sid).await?;
    Ok(Json(with_ports(&state, view_json(&state, &v)).await))
}

/// Ends a running session (SIGHUP to its process group, SIGKILL after a grace period)
/// and answers once it is closed; a closed session is answered as it is.
pub async fn terminate(
    State(state): State<AppState>,
    who: Principal,
    Path(SessionPath { sid }): Path<SessionPath>,
) -> Result<Json<control::Session>, ApiError> {
    require(&who, Scope::Control)?;
    visible(&state, &who, &sid).await?;
    if state.sessions.terminate(&sid, CloseReason::Killed).await {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while state.sessions.live(&sid).is_some() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let v = visible(&state, &who, &sid).await?;
    Ok(Json(view_json(&state, &v)))
}

pub async fn share(
    State(state): State<AppState>,
    who: Principal,
    Path(SessionPath { sid }): Path<SessionPath>,
    payload: Result<Json<control::ShareRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    require(&who, Scope::Control)?;
    visible(&state, &who, &sid).await?;
    let req = body(payload)?;
    let ttl = req.ttl_secs.unwrap_or(DEFAULT_SHARE_TTL);
    if !(1..=MAX_SHARE_TTL).contains(&ttl) {
        return Err(ApiError::bad_request(format!(
            "ttl_secs must be between 1 and {MAX_SHARE_TTL}"
        )));
    }
    if req.label.as_ref().is_some_and(|l| l.chars().count() > 128) {
        return Err(ApiError::bad_request("label is longer than 128 characters"));
    }
    let issued = auth::issue(
        &state.store,
        TokenRequest {
            scope: Scope::Observe,
            session_id: Some(&sid),
            label: req.label.as_deref(),
            ttl: Some(Duration::from_secs(ttl)),
            kind: "share",
            secret: None,
        },
    )
    .await?;
    state.audit.record(
        audit::Record::new(audit::Event::ShareLinkCreated, &sid)
            .by(&who.token_id)
            .detail(audit::Detail::LinkIssued {
                link_id: issued.id.clone(),
                ttl_secs: ttl,
                label: req.label.clone(),
            }),
    );
    let body = control::NewLink {
        url: format!(
            "{}/sessions/{sid}#token={}",
            state.public_url, issued.secret
        ),
        id: issued.id,
        token: issued.secret,
        expires_at: issued.expires_at.map(clock::rfc3339),
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

pub async fn list_shares(
    State(state): State<AppState>,
    who: Principal,
    Path(SessionPath { sid }): Path<SessionPath>,
) -> Result<Json<control::ShareLinks>, ApiError> {
    require(&who, Scope::Control)?;
    visible(&state, &who, &sid).await?;
    let links = state
        .store
        .tokens()
        .list(Some((&sid, clock::now_ms())))
        .await?
        .into_iter()
        .map(|t| control::ShareLink {
            id: t.id,
            label: t.label,
            created_at: clock::rfc3339(t.created_at),
            expires_at: t.expires_at.map(clock::rfc3339),
        })
        .collect();
    Ok(Json(control::ShareLinks { links }))
}

pub async fn revoke_share(
    State(state): State<AppState>,
    who: Principal,
    Path(SharePath { sid, id }): Path<SharePath>,
) -> Result<StatusCode, ApiError> {
    require(&who, Scope::Control)?;
    visible(&state, &who, &sid).await?;
    if state
        .store
        .tokens()
        .revoke(&id, Some(&sid), clock::now_ms())
        .await?
    {
        state.revocations.revoked(&id);
        state.audit.record(
            audit::Record::new(audit::Event::ShareLinkRevoked, &sid)
                .by(&who.token_id)
                .detail(audit::Detail::Link {
                    link_id: id.clone(),
                }),
        );
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!(
            "no live link {id} on session {sid}"
        )))
    }
}

#[derive(Debug, Deserialize)]
pub struct AuditQuery {
    session_id: Option<String>,
    limit: Option<u32>,
}

/// `GET B/audit`: the newest audit records (of one session), for admins.
pub async fn audit_log(
    State(state): State<AppState>,
    who: Principal,
    Query(q): Query<AuditQuery>,
) -> Result<Json<control::AuditRecords>, ApiError> {
    require(&who, Scope::Admin)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 1000"));
    }
    let rows = state
        .store
        .records()
        .audit(q.session_id.as_deref(), limit)
        .await?;
    let records = rows
        .into_iter()
        .map(|r| control::AuditRecord {
            at: clock::rfc3339(r.at),
            event: r.event,
            session_id: r.session_id,
            token_id: r.token_id,
            client_id: r.client_id,
            detail: serde_json::from_str(&r.detail).unwrap_or(control::AuditDetail::Nothing {}),
        })
        .collect();
    Ok(Json(control::AuditRecords { records }))
}

/// The session JSON with the ports listening inside its own network namespace, while it
/// runs and has one.
pub(super) async fn with_ports(
    state: &AppState,
    mut session: control::Session,
) -> control::Session {
    let sid = crate::sessions::SessionId::from(&session.session_id);
    let net = state.sessions.live(&sid).and_then(|h| {
        let s = h.sandboxed()?;
        Some(s.net.as_ref()?.agent.clone())
    });
    if let Some(agent) = net {
        session.ports = agent.listening_ports().await.ok().map(|ports| {
            ports
                .into_iter()
                .map(|port| control::ListeningPort {
                    port,
                    protocol: "tcp".to_owned(),
                    url: (state.preview_hosts.as_ref()).map(|h| h.url(&sid, port)),
                })
                .collect()
        });
    }
    session
}
