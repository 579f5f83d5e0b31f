//! What every binding and route is served with: the shared state, the caller's
//! principal (bearer from the header, never from the query), the control-plane error, and
//! the extensions a request activates. The router (`http`) is the only module that knows
//! every binding; the bindings know this.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wire::control::ErrorBody;

mod serving;

#[cfg(test)]
pub(crate) use serving::for_tests;
pub use serving::public_url;

use crate::a2a::service::TaskService;
use crate::auth::{self, AuthError, Principal, Scope};
use crate::sessions::Sessions;
use crate::store::Store;

#[derive(Clone)]
pub struct AppState(Arc<AppInner>);

pub struct AppInner {
    pub sessions: Sessions,
    pub tasks: TaskService,
    pub store: Store,
    /// This node of the cluster (the one node, on SQLite).
    pub node: crate::cluster::Node,
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
    pub files: crate::files::FileSettings,
    pub audit: crate::audit::Audit,
    /// The tokens of open connections, which are cut when their token stops being valid.
    pub revocations: crate::revocation::Revocations,
    /// The port previews' own origins, if they have them.
    pub preview_hosts: Option<crate::previews::PreviewHosts>,
    /// The port previews' cookies.
    pub preview_tickets: auth::Tickets,
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
    /// Where gRPC clients connect: the public URL's host and port (gRPC targets carry no
    /// scheme or path; TLS follows `--tls-cert`).
    pub fn grpc_url(&self) -> String {
        let url = reqwest::Url::parse(&self.public_url).ok();
        match url
            .as_ref()
            .and_then(|u| Some((u.host_str()?, u.port_or_known_default()?)))
        {
            Some((host, port)) => format!("{host}:{port}"),
            None => self.public_url.clone(),
        }
    }

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
    /// 502: the node that runs the session does not answer.
    pub fn node_unreachable() -> ApiError {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "node_unreachable",
            "the node running this session does not answer",
        )
    }

    pub fn rate_limited(refused: crate::limits::LimitRefusal) -> ApiError {
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
    /// A body over `limit`, as a response (the body limit's refusal).
    pub fn too_large(limit: usize) -> Response {
        let m = format!("the request body is over its limit of {limit} bytes");
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", m).into_response()
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
        let body = Json(ErrorBody::new(self.code, &self.message));
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

/// Who a request is from: the principal another node forwarded it with (see
/// `cluster::forward`), else the bearer `token`'s.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    token: Option<&str>,
) -> Result<Principal, AuthError> {
    match crate::cluster::forward::principal(&state.node, headers) {
        Some(forwarded) => forwarded,
        None => state.revocations.authenticate(&state.store, token).await,
    }
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        caller(state, parts.uri.query(), &parts.headers)
            .await
            .map_err(|refusal| match refusal {
                CallerRefusal::QueryToken => ApiError::bad_request(refusal.to_string()),
                CallerRefusal::Unauthenticated(e) => auth_error(e),
            })
    }
}

/// Why a request has no principal: a credential in its URL, or no valid bearer.
#[derive(Debug, thiserror::Error)]
pub enum CallerRefusal {
    #[error("credentials in the URL query are refused; use the Authorization header")]
    QueryToken,
    #[error("{0}")]
    Unauthenticated(AuthError),
}

impl From<CallerRefusal> for crate::a2a::A2aError {
    fn from(refusal: CallerRefusal) -> Self {
        match refusal {
            CallerRefusal::QueryToken => Self::InvalidRequest(refusal.to_string()),
            CallerRefusal::Unauthenticated(e) => Self::Unauthenticated(e.to_string()),
        }
    }
}

/// Who a request is from, by its URL query and headers (every binding over HTTP asks so).
pub async fn caller(
    state: &AppState,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Principal, CallerRefusal> {
    if refuse_query_token(query).is_err() {
        return Err(CallerRefusal::QueryToken);
    }
    authenticate(state, headers, header_bearer(headers))
        .await
        .map_err(CallerRefusal::Unauthenticated)
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
