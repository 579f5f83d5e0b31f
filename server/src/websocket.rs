//! The server side of a WebSocket (pty-ws connections, direct and forwarded): the upgrade
//! (RFC 6455's handshake on HTTP/1.1, answered with the subprotocol the attach checks
//! chose), and large messages sent in fragments. The WebSocket library keeps its write buffer at the size of the largest frame
//! it ever wrote, for as long as the connection lives; a `MembershipChanged` that lists a
//! thousand members is some 75 KB, so without fragments every idle viewer would hold that
//! much.

use std::future::Future;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{Sink, SinkExt};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// A server-side WebSocket.
pub type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Text and binary messages larger than this go through `send` and `feed` in fragments of
/// this size.
pub const FRAGMENT_BYTES: usize = 16 * 1024;

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
            serve(WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await).await;
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

/// A message as it goes out: whole, or the fragments of a large text or binary one.
enum Outgoing {
    Whole(Message),
    Fragments(Bytes, Data),
}

fn outgoing(msg: Message) -> Outgoing {
    match msg {
        Message::Text(t) if t.len() > FRAGMENT_BYTES => Outgoing::Fragments(t.into(), Data::Text),
        Message::Binary(b) if b.len() > FRAGMENT_BYTES => Outgoing::Fragments(b, Data::Binary),
        msg => Outgoing::Whole(msg),
    }
}

/// Writes `data` as fragments of one message, each flushed before the next is written.
async fn send_fragments<S>(sink: &mut S, data: Bytes, kind: Data) -> Result<(), S::Error>
where
    S: Sink<Message> + Unpin,
{
    let mut opcode = OpCode::Data(kind);
    let mut start = 0;
    while start < data.len() {
        let end = (start + FRAGMENT_BYTES).min(data.len());
        let frame = Frame::message(data.slice(start..end), opcode, end == data.len());
        sink.send(Message::Frame(frame)).await?;
        opcode = OpCode::Data(Data::Continue);
        start = end;
    }
    Ok(())
}

/// Sends `msg` and flushes; a large one in fragments.
pub async fn send<S>(sink: &mut S, msg: Message) -> Result<(), S::Error>
where
    S: Sink<Message> + Unpin,
{
    match outgoing(msg) {
        Outgoing::Whole(msg) => sink.send(msg).await,
        Outgoing::Fragments(data, kind) => send_fragments(sink, data, kind).await,
    }
}

/// Queues `msg` behind what is queued already; a large one goes out at once, in fragments
/// (and everything queued before it with them).
pub async fn feed<S>(sink: &mut S, msg: Message) -> Result<(), S::Error>
where
    S: Sink<Message> + Unpin,
{
    match outgoing(msg) {
        Outgoing::Whole(msg) => sink.feed(msg).await,
        Outgoing::Fragments(data, kind) => send_fragments(sink, data, kind).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a sink was sent: each message, or each fragment as (opcode, final, length).
    async fn sent(msg: Message) -> Vec<(String, bool, usize)> {
        let mut out = Vec::new();
        let sink = futures_util::sink::unfold(&mut out, |out, m: Message| async move {
            out.push(match m {
                Message::Frame(f) => {
                    let h = f.header();
                    (format!("{:?}", h.opcode), h.is_final, f.payload().len())
                }
                m => ("whole".to_owned(), true, m.len()),
            });
            Ok::<_, std::convert::Infallible>(out)
        });
        let mut sink = Box::pin(sink);
        send(&mut sink, msg).await.unwrap();
        drop(sink);
        out
    }

    #[tokio::test]
    async fn a_large_text_goes_in_fragments_of_the_fragment_size_and_a_small_one_whole() {
        let big = "x".repeat(2 * FRAGMENT_BYTES + 5);
        let got = sent(Message::Text(big.into())).await;
        assert_eq!(
            got,
            [
                ("Data(Text)".to_owned(), false, FRAGMENT_BYTES),
                ("Data(Continue)".to_owned(), false, FRAGMENT_BYTES),
                ("Data(Continue)".to_owned(), true, 5),
            ]
        );
        let got = sent(Message::Text("small".into())).await;
        assert_eq!(got, [("whole".to_owned(), true, 5)]);
        let got = sent(Message::Binary(Bytes::from(vec![0; FRAGMENT_BYTES + 1]))).await;
        assert_eq!(got[0], ("Data(Binary)".to_owned(), false, FRAGMENT_BYTES));
    }
}
