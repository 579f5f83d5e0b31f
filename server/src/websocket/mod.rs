//! The server side of a WebSocket (pty-ws connections, direct and forwarded): the upgrade
//! (RFC 6455's handshake on HTTP/1.1, answered with the subprotocol the attach checks
//! chose), and the socket it yields (`socket`: large messages written from their own bytes).

mod socket;

use std::future::Future;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// A server-side WebSocket on an upgraded connection.
pub type Socket = socket::Socket<TokioIo<hyper::upgrade::Upgraded>>;

/// A request to upgrade its connection to a WebSocket.
pub struct Upgrade {
    on_upgrade: OnUpgrade,
    key: HeaderValue,
}

/// Why a request is not a WebSocket upgrade: a status and a sentence.
#[derive(Debug)]
pub struct NotAnUpgrade(StatusCode, &'static str);

impl IntoResponse for NotAnUpgrade {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

/// Whether header `name` lists `token` (comma-separated, any case).
fn lists(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl<S: Send + Sync> FromRequestParts<S> for Upgrade {
    type Rejection = NotAnUpgrade;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let refuse = |status, why| Err(NotAnUpgrade(status, why));
        if parts.method != Method::GET {
            return refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "a WebSocket upgrade is a GET",
            );
        }
        if !lists(&parts.headers, header::CONNECTION, "upgrade")
            || !lists(&parts.headers, header::UPGRADE, "websocket")
        {
            return refuse(
                StatusCode::UPGRADE_REQUIRED,
                "this route takes a WebSocket upgrade (Connection: upgrade, Upgrade: websocket)",
            );
        }
        if parts
            .headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .map(|v| v.as_bytes())
            != Some(b"13")
        {
            return refuse(StatusCode::BAD_REQUEST, "Sec-WebSocket-Version must be 13");
        }
        let Some(key) = parts.headers.get(header::SEC_WEBSOCKET_KEY).cloned() else {
            return refuse(StatusCode::BAD_REQUEST, "Sec-WebSocket-Key is missing");
        };
        let Some(on_upgrade) = parts.extensions.remove::<OnUpgrade>() else {
            return refuse(
                StatusCode::UPGRADE_REQUIRED,
                "this connection cannot be upgraded",
            );
        };
        Ok(Upgrade { on_upgrade, key })
    }
}

impl Upgrade {
    /// Answers `101 Switching Protocols` with `subprotocol`, and once the client has the
    /// answer, runs what `serve` makes of the socket.
    pub fn on_upgrade<F, Fut>(
        self,
        subprotocol: &'static str,
        config: WebSocketConfig,
        serve: F,
    ) -> Response
    where
        F: FnOnce(Socket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let accept = derive_accept_key(self.key.as_bytes());
        tokio::spawn(async move {
            let Ok(upgraded) = self.on_upgrade.await else {
                return;
            };
            let io = TokioIo::new(upgraded);
            serve(Socket::server(io, config).await).await;
        });
        let mut answer = Response::new(Body::empty());
        *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = answer.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(
            header::SEC_WEBSOCKET_ACCEPT,
            HeaderValue::from_str(&accept).expect("base64 is a header value"),
        );
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(subprotocol),
        );
        answer
    }
}
