//! The HTTP server: accepts TCP connections (TLS when configured), admits them
//! (`admission`), and serves each with hyper, whose header-read timer closes a connection
//! that has not sent a complete request head within `header_read_timeout` of being ready
//! for one: a fresh connection (slowloris), or an idle keep-alive one. A connection that is
//! turned away gets a short HTTP answer that says why, not a silent reset.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tower::ServiceExt as _;
use wire::control::ErrorBody;

use crate::admission::{Admission, Admitted, Turned};

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Turned-away connections being answered at once; past that they are closed unanswered.
const MAX_REFUSING: usize = 64;
/// How long serving connections may take to finish after shutdown begins.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

pub struct ServerSettings {
    pub header_read_timeout: Duration,
    pub admission: Admission,
    pub tls: Option<TlsAcceptor>,
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets the connections in
/// flight finish (at most `DRAIN_WAIT`).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    settings: ServerSettings,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = auto::Builder::new(InlineFirst);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout);
    let graceful = GracefulShutdown::new();
    let refusing = Arc::new(AtomicUsize::new(0));
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors, most likely: let some close.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        if let Err(e) = crate::sys::tune_connection(&tcp) {
            tracing::warn!(error = %e, "tuning a connection failed");
        }
        let tls = settings.tls.clone();
        let admitted = match settings.admission.admit(peer.ip()) {
            Ok(a) => Arc::new(a),
            Err(turned) => {
                if refusing.fetch_add(1, Ordering::AcqRel) < MAX_REFUSING {
                    tracing::debug!(%peer, ?turned, "turning a connection away");
                    let refusing = refusing.clone();
                    tokio::spawn(async move {
                        match tls {
                            None => refuse(tcp, turned).await,
                            Some(acceptor) => {
                                if let Ok(io) = handshake(acceptor, tcp).await {
                                    refuse(io, turned).await;
                                }
                            }
                        }
                        refusing.fetch_sub(1, Ordering::AcqRel);
                    });
                } else {
                    refusing.fetch_sub(1, Ordering::AcqRel);
                }
                continue;
            }
        };
        let evictable = admitted.clone();
        let service = app
            .clone()
            .map_request(move |mut req: axum::http::Request<Incoming>| {
                req.extensions_mut().insert(admitted.clone());
                req
            });
        let service = TowerToHyperService::new(service);
        let (builder, watcher) = (builder.clone(), graceful.watcher());
        tokio::spawn(async move {
            let serve = async move {
                match tls {
                    None => {
                        let conn =
                            builder.serve_connection_with_upgrades(Unvectored::io(tcp), service);
                        watcher.watch(conn).await
                    }
                    Some(acceptor) => {
                        let io = handshake(acceptor, tcp).await?;
                        let conn =
                            builder.serve_connection_with_upgrades(Unvectored::io(io), service);
                        watcher.watch(conn).await
                    }
                }
            };
            tokio::select! {
                served = serve => if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                },
                () = evictable.evicted() => tracing::debug!(%peer, "evicted to make room"),
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_WAIT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some HTTP connections did not finish in time");
    }
}

/// hyper's executor for HTTP/2 streams: a stream's first poll runs on its connection's
/// task, and only a stream that poll did not finish gets a task of its own. hyper spawns a
/// task per stream, so a unary call whose answer is ready at once (a task read from memory)
/// cost a spawn, a hand-off of the answer back to the connection's task and two wake-ups;
/// inline it is answered in the turn that read it, as over HTTP/1.1. A spawned stream is
/// polled again at once with its task's waker, so the first poll's no-op waker loses
/// nothing, and a panic in that poll ends the stream, not the connection.
#[derive(Debug, Clone, Copy)]
struct InlineFirst;

impl<F> hyper::rt::Executor<F> for InlineFirst
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        let mut future = Box::pin(future);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            future.as_mut().poll(&mut cx)
        }));
        if let Ok(Poll::Pending) = first {
            tokio::spawn(future);
        }
    }
}

/// A connection that tells HTTP/2 it takes no vectored writes. With a vectored transport,
/// h2 keeps every DATA payload over 256 bytes apart from its frame buffer and must write it
/// out before it can encode the next frame, so a unary gRPC answer of a task took two
/// writes (HEADERS and DATA, then the trailers) and two segments. Without, h2 copies
/// payloads up to 1 KiB into its buffer and the answer leaves in one write. HTTP/1.1 keeps
/// its vectored writes (a download's chunks are not copied): the connection tells the two
/// apart by the HTTP/2 preface, which hyper reads before it asks.
struct Unvectored<T> {
    inner: T,
    /// The connection's first bytes, up to the preface's first four.
    first: [u8; 4],
    seen: usize,
}

impl<T> Unvectored<T> {
    fn io(inner: T) -> TokioIo<Self> {
        TokioIo::new(Unvectored {
            inner,
            first: [0; 4],
            seen: 0,
        })
    }

    fn http2(&self) -> bool {
        self.first == *b"PRI "
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Unvectored<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        let seen = self.seen;
        if seen < 4 {
            let new = &buf.filled()[before..];
            let n = new.len().min(4 - seen);
            self.first[seen..seen + n].copy_from_slice(&new[..n]);
            self.seen += n;
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Unvectored<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        !self.http2() && self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A connection's TLS handshake, bounded by `HANDSHAKE_TIMEOUT`.
async fn handshake(acceptor: TlsAcceptor, tcp: TcpStream) -> io::Result<TlsStream<TcpStream>> {
    let timed_out = |_| io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake timed out");
    tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
        .await
        .map_err(timed_out)?
}

/// Answers a turned-away connection: 503 when the server is full, 429 when its address
/// holds too many unauthenticated connections. The request is read first (briefly), so
/// that the answer is not lost to a reset.
async fn refuse(mut io: impl AsyncRead + AsyncWrite + Unpin, turned: Turned) {
    let (status, code, message) = match turned {
        Turned::Full => (
            "503 Service Unavailable",
            "unavailable",
            "the server holds its maximum of connections; try again shortly",
        ),
        Turned::Address => (
            "429 Too Many Requests",
            "rate_limited",
            "this address holds its maximum of connections that have not authenticated",
        ),
    };
    let body = serde_json::to_string(&ErrorBody::new(code, message)).unwrap_or_default();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut request = [0u8; 8192];
    let _ = tokio::time::timeout(Duration::from_millis(200), io.read(&mut request)).await;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        io.write_all(response.as_bytes()).await?;
        io.shutdown().await
    })
    .await;
}

/// Marks the request's connection authenticated when the request authenticated a token.
pub async fn note_authentication(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let admitted = req.extensions().get::<Arc<Admitted>>().cloned();
    let (response, authenticated) = crate::auth::noting_authentication(next.run(req)).await;
    if let (true, Some(admitted)) = (authenticated, admitted) {
        admitted.authenticated();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn a_stream_ready_at_once_is_answered_inline_and_one_that_waits_on_its_own_task() {
        let (done, mut finished) = oneshot::channel();
        InlineFirst.execute(async move { done.send(()).unwrap() });
        assert!(
            finished.try_recv().is_ok(),
            "it ran before execute returned"
        );

        let (answer, waited) = oneshot::channel();
        let (done, finished) = oneshot::channel();
        InlineFirst.execute(async move { done.send(waited.await.unwrap()).unwrap() });
        answer.send(7).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), finished).await;
        assert_eq!(got.unwrap().unwrap(), 7, "woken after its inline poll");
    }

    #[tokio::test]
    async fn a_panic_in_a_streams_first_poll_ends_that_stream_and_not_its_connection() {
        InlineFirst.execute(async { panic!("a handler's bug") });
        let (done, finished) = oneshot::channel();
        InlineFirst.execute(async move { done.send(()).unwrap() });
        assert!(finished.await.is_ok());
    }

    /// A loopback connection's server end, wrapped, after the client sent `first`.
    async fn served_after(first: &[u8]) -> Unvectored<TcpStream> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        client.write_all(first).await.unwrap();
        let mut conn = Unvectored::io(listener.accept().await.unwrap().0).into_inner();
        let mut buf = vec![0; first.len()];
        conn.read_exact(&mut buf).await.unwrap();
        conn
    }

    #[tokio::test]
    async fn only_an_http2_connection_declines_vectored_writes() {
        let h2 = served_after(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
        assert!(!h2.is_write_vectored());
        for http1 in [&b"GET / HTTP/1.1\r\n"[..], b"PUT /x HTTP/1.1\r\n", b"PRIV"] {
            assert!(served_after(http1).await.is_write_vectored(), "{http1:?}");
        }
    }
}
