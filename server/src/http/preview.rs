//! Port previews: HTTP and WebSocket reverse-proxied to `127.0.0.1:{port}` inside a
//! session's own network namespace, through a socket its net agent made there.
//!
//! A preview is served on an origin of its own, `{port}-{sid}.{domain}` (see
//! [`crate::previews`]), so its pages can reach neither the UI's storage nor another
//! preview's cookies. `B/sessions/{sid}/ports/{port}/…` serves API clients (a bearer
//! token), sends a browser to the preview's origin when there is one, and else serves it
//! under a CSP sandbox, an opaque origin.
//!
//! A caller shows a bearer token (`pty:observe` may read, `pty:control` may send other
//! methods), or a browser the preview's cookie. A preview link carries its token in the
//! fragment (`…/#token=…`): the page served without credentials trades it, in a POST, for a
//! ticket in a cookie scoped to that preview, so the token never rides in a URL the server
//! sees or logs.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{OriginalUri, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use serde::Deserialize;

use crate::audit::{self, Detail, Event};
use crate::auth::{Principal, Scope};
use crate::sessions::SessionId;
use crate::state::{ApiError, AppState, auth_error, header_bearer};

/// The path, under a preview, where a browser trades a link's token for a cookie.
const SIGN_IN: &str = ".ptyhost-sign-in";
/// How long a preview's cookie lasts.
const TICKET_TTL: Duration = Duration::from_secs(3600);
/// What a preview served under the API's own origin may do: run, but as an opaque origin
/// that reads none of the UI's storage.
const SANDBOX: &str = "sandbox allow-scripts allow-forms allow-modals allow-popups \
                       allow-popups-to-escape-sandbox allow-downloads";

#[derive(Debug, Deserialize)]
pub struct PortPath {
    sid: SessionId,
    port: u16,
}

/// One preview request: the session and port, and where the preview's root is.
struct Target {
    sid: SessionId,
    port: u16,
    /// The path of the preview's root: empty on its own origin, `…/ports/{port}` under the
    /// API.
    prefix: String,
    /// The request's path and query as the server inside sees it.
    inner: String,
    /// Served on an origin of its own (else under the API's, sandboxed).
    own_origin: bool,
}

/// `…/ports/{port}` without the slash: the preview's pages resolve relative URLs against
/// the slash, so send the browser there.
pub async fn redirect(Path(p): Path<PortPath>) -> Response {
    let location = format!("{}/", p.port);
    (
        StatusCode::PERMANENT_REDIRECT,
        [(header::LOCATION, location)],
    )
        .into_response()
}

/// `B/sessions/{sid}/ports/{port}/…`.
pub async fn proxy(
    State(state): State<AppState>,
    Path(p): Path<PortPath>,
    OriginalUri(original): OriginalUri,
    req: Request,
) -> Response {
    let whole = original.path_and_query().map_or("/", |pq| pq.as_str());
    let marker = format!("/ports/{}/", p.port);
    let (prefix, inner) = match whole.find(&marker) {
        Some(i) => (
            &whole[..i + marker.len() - 1],
            &whole[i + marker.len() - 1..],
        ),
        None => (whole.trim_end_matches('/'), "/"),
    };
    // A browser (no bearer) goes to the preview's own origin, the fragment with it.
    if let Some(hosts) = &state.preview_hosts
        && header_bearer(req.headers()).is_none()
    {
        let location = format!("{}{}", hosts.url(&p.sid, p.port), &inner[1..]);
        return (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, location)],
        )
            .into_response();
    }
    let target = Target {
        sid: p.sid,
        port: p.port,
        prefix: prefix.to_owned(),
        inner: inner.to_owned(),
        own_origin: false,
    };
    serve(&state, &target, req)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Any request to a preview's own origin, whatever its path, goes to the preview; the rest
/// go on to the router.
pub async fn by_host(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let host = (req.headers().get(header::HOST))
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    let found = (state.preview_hosts.as_ref()).and_then(|hosts| hosts.target(host?));
    let Some((sid, port)) = found else {
        return next.run(req).await;
    };
    let target = Target {
        sid: SessionId::from(sid),
        port,
        prefix: String::new(),
        inner: (req.uri().path_and_query())
            .map_or("/", |pq| pq.as_str())
            .to_owned(),
        own_origin: true,
    };
    serve(&state, &target, req)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

fn cookie_name(port: u16) -> String {
    format!("ptyhost_preview_{port}")
}

/// Every `name=value` pair of a request's cookies.
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
}

/// The preview's ticket from the request's cookies.
fn ticket(headers: &HeaderMap, port: u16) -> Option<String> {
    let name = cookie_name(port);
    cookies(headers)
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// Who is asking: the bearer's principal, or the one the preview's cookie stands for.
async fn caller(
    state: &AppState,
    port: u16,
    headers: &HeaderMap,
) -> Option<Result<(Principal, String), ApiError>> {
    let token = match header_bearer(headers) {
        Some(t) => t.to_owned(),
        None => state.preview_tickets.token(&ticket(headers, port)?)?,
    };
    Some(
        crate::state::authenticate(state, headers, Some(&token))
            .await
            .map(|who| (who, token))
            .map_err(auth_error),
    )
}

async fn serve(state: &AppState, t: &Target, req: Request) -> Result<Response, ApiError> {
    let not_found = || ApiError::not_found(format!("no session {}", t.sid));
    let Some(who) = caller(state, t.port, req.headers()).await else {
        return Ok(sign_in_page(&t.prefix));
    };
    let (who, token) = who?;
    if !who.sees_session(&t.sid) {
        return Err(not_found());
    }
    let path = t.inner.split('?').next().unwrap_or("/");
    if path.strip_prefix('/') == Some(SIGN_IN) && req.method() == Method::POST {
        let ticket = state.preview_tickets.issue(&token, TICKET_TTL);
        let cookie = format!(
            "{}={ticket}; Path={}/; Max-Age={}; HttpOnly; SameSite=Lax",
            cookie_name(t.port),
            t.prefix,
            TICKET_TTL.as_secs()
        );
        return Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, cookie)]).into_response());
    }
    let reads = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let needed = if reads {
        Scope::Observe
    } else {
        Scope::Control
    };
    crate::state::require(&who, needed)?;
    let handle = state.sessions.live(&t.sid).ok_or_else(not_found)?;
    let client = (handle.sandboxed())
        .and_then(|s| s.net.as_ref())
        .map(|n| n.previews.clone())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "failed_precondition",
                format!("session {} has no network of its own to preview (its sandbox network is \"host\", or it is not sandboxed)", t.sid),
            )
        })?;
    let (method, path) = (req.method().to_string(), path.to_owned());
    let answer = forward(&client, t, req).await;
    let status = answer
        .as_ref()
        .map_or(StatusCode::BAD_GATEWAY, |r| r.status());
    state.audit.record(
        audit::Record::new(Event::PortPreview, &t.sid)
            .by(&who.token_id)
            .detail(Detail::Preview {
                port: t.port,
                method,
                path,
                status: status.as_u16(),
            }),
    );
    let mut answer = answer.unwrap_or_else(|why| {
        (
            StatusCode::BAD_GATEWAY,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!(
                "ptyhost: nothing answers on port {} inside session {}: {why}\n",
                t.port, t.sid
            ),
        )
            .into_response()
    });
    if !t.own_origin {
        answer.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(SANDBOX),
        );
    }
    Ok(answer)
}

/// Sends `req` to the port inside the session and streams the answer back; a WebSocket
/// upgrade becomes a tunnel between the two upgraded connections.
async fn forward(
    client: &crate::previews::Client,
    t: &Target,
    mut req: Request,
) -> Result<Response, String> {
    let port = t.port;
    let upgrading = req.headers().contains_key(header::UPGRADE);
    let downstream = upgrading.then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    parts.uri = format!("http://127.0.0.1:{port}{}", t.inner)
        .parse()
        .map_err(|e: axum::http::uri::InvalidUri| e.to_string())?;
    parts.headers.remove(header::AUTHORIZATION);
    strip_cookie(&mut parts.headers, port);
    parts.headers.insert(
        header::HOST,
        HeaderValue::from_str(&format!("localhost:{port}")).map_err(|e| e.to_string())?,
    );
    let mut answer = client
        .send(axum::http::Request::from_parts(parts, body))
        .await
        .map_err(|e| match std::error::Error::source(&e) {
            Some(cause) => cause.to_string(),
            None => e.to_string(),
        })?;
    if answer.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(downstream) = downstream
    {
        let upstream = hyper::upgrade::on(&mut answer);
        tokio::spawn(async move {
            if let (Ok(down), Ok(up)) = (downstream.await, upstream.await) {
                let _ =
                    tokio::io::copy_bidirectional(&mut TokioIo::new(down), &mut TokioIo::new(up))
                        .await;
            }
        });
    }
    Ok(answer.map(Body::new))
}

/// Drops the preview's own cookie, which the server inside has no business with.
fn strip_cookie(headers: &mut HeaderMap, port: u16) {
    let ours = format!("{}=", cookie_name(port));
    let kept: Vec<String> = cookies(headers)
        .filter(|pair| !pair.starts_with(&ours))
        .map(str::to_owned)
        .collect();
    headers.remove(header::COOKIE);
    if !kept.is_empty()
        && let Ok(v) = HeaderValue::from_str(&kept.join("; "))
    {
        headers.insert(header::COOKIE, v);
    }
}

/// What a browser gets without credentials: a page that trades the link's `#token=` for
/// the preview's cookie, then reloads.
fn sign_in_page(prefix: &str) -> Response {
    let sign_in = serde_json::to_string(&format!("{prefix}/{SIGN_IN}")).unwrap_or_default();
    let page = format!(
        r#"<!doctype html><meta charset="utf-8"><title>ptyhost preview</title>
<p id="why">This preview needs a token: open it with a link that carries one (#token=…).</p>
<script>
const token = new URLSearchParams(location.hash.slice(1)).get("token");
if (token) {{
  fetch({sign_in}, {{ method: "POST", headers: {{ Authorization: "Bearer " + token }}, credentials: "same-origin" }})
    .then(r => r.ok ? location.replace(location.pathname + location.search)
                    : document.getElementById("why").textContent = "This preview link was refused (" + r.status + ").");
}}
</script>
"#
    );
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_previews_own_cookie_is_dropped() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; ptyhost_preview_8000=t; b=2"),
        );
        strip_cookie(&mut h, 8000);
        assert_eq!(h[header::COOKIE], "a=1; b=2");
        assert_eq!(ticket(&HeaderMap::new(), 8000), None);
    }
}
