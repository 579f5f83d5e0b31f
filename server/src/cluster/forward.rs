//! Forwarding to the node that owns a session. The node a client reached authenticates it
//! once; what it forwards carries the cluster's secret and that principal, which the owner
//! takes as decided. A pty-ws connection is relayed frame for frame in both directions
//! (`relay`); an HTTP request is sent on whole, its body streamed both ways (`http`).

use axum::http::{HeaderMap, HeaderValue};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::{FutureExt, Sink, SinkExt, Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio_tungstenite::tungstenite::{self, Message};

use super::{FORWARD_HEADER, Node};
use crate::auth::{AuthError, Principal};

/// The header with the principal the forwarding node authenticated.
pub const PRINCIPAL_HEADER: &str = "x-ptyhost-principal";

#[derive(Serialize, Deserialize)]
struct Forwarded {
    token_id: String,
    scope: String,
    session_id: Option<String>,
    label: Option<String>,
    share_link: bool,
}

/// The headers a forwarded request carries: the secret and `who`.
pub fn headers(node: &Node, who: &Principal) -> [(&'static str, HeaderValue); 2] {
    let forwarded = Forwarded {
        token_id: who.token_id.clone(),
        scope: who.scope.as_str().into(),
        session_id: who.session_id.clone(),
        label: who.label.clone(),
        share_link: who.share_link,
    };
    let json = serde_json::to_vec(&forwarded).expect("a principal serializes");
    [
        (
            FORWARD_HEADER,
            HeaderValue::from_str(node.secret()).expect("the secret is a header value"),
        ),
        (
            PRINCIPAL_HEADER,
            HeaderValue::from_str(&URL_SAFE_NO_PAD.encode(json)).expect("base64 is a header value"),
        ),
    ]
}

/// The principal of a request another node forwarded, if it is one: `None` without the
/// forward header; refused when the secret is wrong or the principal unreadable.
pub fn principal(node: &Node, headers: &HeaderMap) -> Option<Result<Principal, AuthError>> {
    let secret = headers.get(FORWARD_HEADER)?;
    let decided = || -> Option<Principal> {
        if !node.is_secret(secret.to_str().ok()?) {
            tracing::warn!("refused a forwarded request with a wrong cluster secret");
            return None;
        }
        let json = URL_SAFE_NO_PAD
            .decode(headers.get(PRINCIPAL_HEADER)?.as_bytes())
            .ok()?;
        let f: Forwarded = serde_json::from_slice(&json).ok()?;
        Some(Principal {
            token_id: f.token_id,
            scope: f.scope.parse().ok()?,
            session_id: f.session_id,
            label: f.label,
            share_link: f.share_link,
        })
    };
    Some(decided().ok_or(AuthError::Invalid))
}

/// The pty-ws URL of session `sid` on the node reached at `base` (an `http(s)://` URL).
pub fn attach_url(base: &str, instance_id: &str, sid: &str) -> String {
    let ws = match base.strip_prefix("https://") {
        Some(rest) => format!("wss://{rest}"),
        None => format!("ws://{}", base.trim_start_matches("http://")),
    };
    format!("{ws}/agents/{instance_id}/sessions/{sid}/attach")
}

/// The owner's socket of a forwarded connection.
pub type OwnerSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the owner's side of a forwarded pty-ws connection. When the owner refuses the
/// upgrade, its answer (status and body) is what the client gets; `Err(None)`: the owner
/// does not answer.
pub async fn open(
    node: &Node,
    url: &str,
    subprotocol: &str,
    who: &Principal,
    max_message: usize,
) -> Result<OwnerSocket, Option<axum::response::Response>> {
    use axum::response::IntoResponse;
    use tungstenite::client::IntoClientRequest;
    let unreachable = |e: &dyn std::fmt::Display| {
        tracing::warn!(url, error = %e, "the session's node is unreachable");
        None
    };
    let mut req = url.into_client_request().map_err(|e| unreachable(&e))?;
    let h = req.headers_mut();
    h.insert(
        "sec-websocket-protocol",
        HeaderValue::from_str(subprotocol).map_err(|e| unreachable(&e))?,
    );
    for (name, value) in headers(node, who) {
        h.insert(name, value);
    }
    let config = tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    match tokio_tungstenite::connect_async_with_config(req, Some(config), true).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(refused)) => {
            let (parts, body) = refused.into_parts();
            Err(Some(
                (parts.status, parts.headers, body.unwrap_or_default()).into_response(),
            ))
        }
        Err(e) => Err(unreachable(&e)),
    }
}

/// How a relay ended.
#[derive(Debug, PartialEq)]
pub enum Ended {
    /// One side closed and the close went through to the other.
    Closed,
    /// The owner's side broke without a close: its node may be gone.
    OwnerLost,
    /// The client's side broke or went quiet.
    ClientLost,
}

/// Relays frames between a client and the owner until one side closes (its close code and
/// reason passed on) or breaks. Pings from the owner reach the client and its pongs go
/// back, so the owner's heartbeat measures the client; `quiet` bounds how long the client
/// may send nothing at all.
pub async fn relay<C, O>(client: &mut C, owner: &mut O, quiet: std::time::Duration) -> Ended
where
    C: Stream<Item = Result<Message, tungstenite::Error>> + Sink<Message> + Unpin,
    O: Stream<Item = Result<Message, tungstenite::Error>> + Sink<Message> + Unpin,
{
    loop {
        tokio::select! {
            m = tokio::time::timeout(quiet, client.next()) => match m {
                Ok(Some(Ok(m))) => {
                    let close = matches!(m, Message::Close(_));
                    if owner.send(m).await.is_err() {
                        return Ended::OwnerLost;
                    }
                    if close {
                        // The owner's answering close goes back to the client.
                        while let Some(Ok(m)) = owner.next().await {
                            let close = matches!(m, Message::Close(_));
                            let _ = client.send(m).await;
                            if close {
                                break;
                            }
                        }
                        return Ended::Closed;
                    }
                }
                _ => {
                    let _ = owner.send(Message::Close(None)).await;
                    return Ended::ClientLost;
                }
            },
            m = owner.next() => {
                // What the owner has sent already goes on in one write.
                let mut next = m;
                loop {
                    let m = match next {
                        Some(Ok(m)) => m,
                        _ => return Ended::OwnerLost,
                    };
                    let close = matches!(m, Message::Close(_));
                    if client.feed(m).await.is_err() {
                        let _ = owner.send(Message::Close(None)).await;
                        return Ended::ClientLost;
                    }
                    if close {
                        let _ = client.close().await;
                        return Ended::Closed;
                    }
                    match owner.next().now_or_never() {
                        Some(ready) => next = ready,
                        None => break,
                    }
                }
                if client.flush().await.is_err() {
                    let _ = owner.send(Message::Close(None)).await;
                    return Ended::ClientLost;
                }
            }
        }
    }
}

/// Headers that belong to one hop of HTTP, not to the request or answer.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// Sends request `req` of `who` on to the node at `base` and gives back its answer, both
/// bodies streamed (`None`: that node does not answer). The client's credentials stay
/// here: the owner takes `who` as decided.
pub async fn http(
    node: &Node,
    who: &Principal,
    base: &str,
    req: axum::extract::Request,
) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{base}{path}");
    let mut out = node
        .http()
        .request(parts.method.clone(), &url)
        .body(reqwest::Body::wrap_stream(body.into_data_stream()));
    // The caller's credentials, and anything claiming to be forwarding headers, stay here.
    let own = [FORWARD_HEADER, PRINCIPAL_HEADER];
    for (name, value) in &parts.headers {
        if name != axum::http::header::AUTHORIZATION
            && !HOP_BY_HOP.contains(&name.as_str())
            && !own.contains(&name.as_str())
        {
            out = out.header(name, value);
        }
    }
    for (name, value) in headers(node, who) {
        out = out.header(name, value);
    }
    match out.send().await {
        Ok(answer) => {
            let mut response = axum::response::Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                if !HOP_BY_HOP.contains(&name.as_str()) {
                    response = response.header(name, value);
                }
            }
            Some(
                response
                    .body(axum::body::Body::from_stream(answer.bytes_stream()))
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "a forwarded answer could not be passed on");
                        axum::http::StatusCode::BAD_GATEWAY.into_response()
                    }),
            )
        }
        Err(e) => {
            tracing::warn!(url, error = %e, "the session's node is unreachable");
            None
        }
    }
}
