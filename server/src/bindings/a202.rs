//! The A202 plain HTTPS binding (binding §7): a preflight document, a POST of an object's
//! canonical bytes, and a read of a transaction's stream. HTTPS only (plain HTTP is served
//! on loopback alone); the request must activate the extension in `A202-Extensions`, which
//! is echoed; a refused check is `412`, an accepted submission `202` with no body, a
//! sequence conflict `409`, and any other refusal carries its registry code.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::a202::{self, A202Refusal, Carrier};
use crate::auth::{Principal, Scope};
use crate::extensions;
use crate::state::{ApiError, AppState, require};

/// The largest object accepted.
pub const MAX_OBJECT_BYTES: usize = 1024 * 1024;

/// `GET /.well-known/a202-capability.json`.
pub async fn preflight(State(state): State<AppState>) -> Response {
    (
        [(header::CACHE_CONTROL, "max-age=60")],
        Json(state.tasks.a202().preflight()),
    )
        .into_response()
}

/// A refusal with its status: 412 for the capability check, 409 for a sequence conflict,
/// 403 for an insecure endpoint, 422 for an object that does not verify.
fn refused(refusal: &A202Refusal) -> Response {
    let status = match refusal {
        A202Refusal::ExtensionUnsupported => StatusCode::PRECONDITION_FAILED,
        A202Refusal::SequenceConflict { .. } => StatusCode::CONFLICT,
        A202Refusal::EndpointInsecure => StatusCode::FORBIDDEN,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    };
    (status, Json(refusal.body())).into_response()
}

/// An object over `limit`: 413 with an A202 refusal.
pub fn too_large(limit: usize) -> Response {
    let refusal = A202Refusal::Kernel(format!("the object is over its limit of {limit} bytes"));
    (StatusCode::PAYLOAD_TOO_LARGE, Json(refusal.body())).into_response()
}

/// `POST /a202/objects`: the body is one object's canonical bytes.
pub async fn submit(
    State(state): State<AppState>,
    who: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if state.plain_off_loopback {
        return refused(&A202Refusal::EndpointInsecure);
    }
    if let Err(e) = commercial(&who, Scope::Control) {
        return e.into_response();
    }
    if !extensions::listed(&headers, a202::HTTP_HEADER)
        .iter()
        .any(|uri| uri == a202::URI)
    {
        return refused(&A202Refusal::ExtensionUnsupported);
    }
    let mut resp = accept(&state, &headers, &body).await;
    resp.headers_mut()
        .insert(a202::HTTP_HEADER, HeaderValue::from_static(a202::URI));
    resp
}

async fn accept(state: &AppState, headers: &HeaderMap, body: &[u8]) -> Response {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if media != Some(a202::MEDIA_TYPE) {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("send the object's canonical bytes as {}", a202::MEDIA_TYPE),
        )
        .into_response();
    }
    let a202 = state.tasks.a202();
    let object = match a202.verify(body) {
        Ok(o) => o,
        Err(r) => return refused(&r),
    };
    match a202.append(vec![object], Carrier::Https).await {
        Ok(_) => StatusCode::ACCEPTED.into_response(),
        Err(a202::Error::Refused(r)) => refused(&r),
        Err(a202::Error::Store(e)) => ApiError::internal(e).into_response(),
    }
}

/// `GET /a202/transactions/{id}`: the stream, and each offer's status.
pub async fn transaction(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> Result<Json<a202::Transaction>, ApiError> {
    commercial(&who, Scope::Observe)?;
    match state.tasks.a202().transaction(&id).await? {
        Some(view) => Ok(Json(view)),
        None => Err(ApiError::not_found(format!(
            "no A202 stream for transaction {id}"
        ))),
    }
}

/// A202 streams are not any session's: a session-bound token does not reach them.
fn commercial(who: &Principal, needed: Scope) -> Result<(), ApiError> {
    if who.session_id.is_some() {
        return Err(ApiError::forbidden(
            "a session-bound token does not reach A202 transaction streams",
        ));
    }
    require(who, needed)
}
