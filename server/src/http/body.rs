//! Request bodies are read here, up to a limit per route group. A larger one is answered
//! 413 in its binding's words, after the rest of it has been read (up to `DRAIN_MAX`): a
//! server that answers and closes while the client still sends makes the client's TCP
//! stack see a reset, not the answer.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;

/// The body limit of the A2A bindings and the control plane (axum's default).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// How much of an oversized body is read and dropped before the 413 goes out; a client
/// that sends more has its connection closed.
const DRAIN_MAX: usize = 64 * 1024 * 1024;

/// How long draining an oversized body may take.
const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// A route group's body limit, and how its binding says a body is over it.
#[derive(Clone, Copy)]
pub struct Limit {
    bytes: usize,
    too_large: fn(usize) -> Response,
}

type Bounded = fn(State<Limit>, Request, Next) -> BoxFuture<'static, Response>;

/// The middleware that holds a route group's bodies to `bytes`.
pub fn limit(
    bytes: usize,
    too_large: fn(usize) -> Response,
) -> axum::middleware::FromFnLayer<Bounded, Limit, (State<Limit>, Request)> {
    axum::middleware::from_fn_with_state(Limit { bytes, too_large }, |l, r, n| {
        Box::pin(bounded(l, r, n)) as BoxFuture<'static, Response>
    })
}

/// Buffers the body up to the limit, or answers `too_large`.
async fn bounded(State(l): State<Limit>, req: Request, next: Next) -> Response {
    let (limit, too_large) = (l.bytes, l.too_large);
    let (parts, body) = req.into_parts();
    let mut data = body.into_data_stream();
    let mut buffered = BytesMut::new();
    while let Some(chunk) = data.next().await {
        let Ok(chunk) = chunk else {
            let unread = "the request body could not be read";
            return (StatusCode::BAD_REQUEST, unread).into_response();
        };
        if buffered.len() + chunk.len() > limit {
            let mut drained = buffered.len() + chunk.len();
            let _ = tokio::time::timeout(DRAIN_WAIT, async {
                while let Some(Ok(chunk)) = data.next().await {
                    drained += chunk.len();
                    if drained > DRAIN_MAX {
                        break;
                    }
                }
            })
            .await;
            return too_large(limit);
        }
        buffered.extend_from_slice(&chunk);
    }
    let body = Body::from(buffered.freeze());
    next.run(Request::from_parts(parts, body)).await
}
