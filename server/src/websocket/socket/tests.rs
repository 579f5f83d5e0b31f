use super::*;

use futures_util::{SinkExt, StreamExt};
use tokio::io::DuplexStream;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;

/// A server socket and a tungstenite client on the two ends of a pipe of `capacity` bytes.
async fn pair(capacity: usize) -> (Socket<DuplexStream>, WebSocketStream<DuplexStream>) {
    let (server, client) = tokio::io::duplex(capacity);
    let server = Socket::server(server, WebSocketConfig::default()).await;
    let client = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
    (server, client)
}

fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[tokio::test]
async fn large_and_small_messages_arrive_whole_and_in_order_through_a_narrow_pipe() {
    let (mut server, mut client) = pair(1024).await;
    let sent = vec![
        Message::text("hello"),
        Message::Binary(pattern(200 * 1024)),
        Message::text("between"),
        Message::text("x".repeat(50 * 1024)),
        Message::Binary(pattern(DIRECT_BYTES)),
        Message::Binary(pattern(DIRECT_BYTES - 1)),
        Message::Close(Some(CloseFrame {
            code: 1000.into(),
            reason: "done".into(),
        })),
    ];
    let expected = sent.clone();
    let writer = tokio::spawn(async move {
        for (i, m) in sent.into_iter().enumerate() {
            // Some queued behind others, some flushed one by one.
            match i % 2 {
                0 => server.feed(m).await.unwrap(),
                _ => server.send(m).await.unwrap(),
            }
        }
        server.flush().await.unwrap();
        server
    });
    let mut got = Vec::new();
    while got.len() < expected.len() {
        got.push(client.next().await.unwrap().unwrap());
    }
    assert_eq!(got, expected);
    // Nothing may follow the Close.
    let mut server = writer.await.unwrap();
    let after = server.send(Message::Binary(pattern(DIRECT_BYTES))).await;
    assert!(matches!(
        after,
        Err(Error::Protocol(ProtocolError::SendAfterClosing))
    ));
}

#[tokio::test]
async fn no_large_message_follows_the_answer_to_a_clients_close() {
    let (mut server, mut client) = pair(64 * 1024).await;
    client.send(Message::Close(None)).await.unwrap();
    assert!(matches!(server.next().await, Some(Ok(Message::Close(_)))));
    let after = server.send(Message::Binary(pattern(DIRECT_BYTES))).await;
    assert!(matches!(
        after,
        Err(Error::Protocol(ProtocolError::SendAfterClosing))
    ));
    // The client sees the answering Close and nothing after it.
    server.flush().await.unwrap();
    assert!(matches!(client.next().await, Some(Ok(Message::Close(_)))));
    drop(server);
    assert!(client.next().await.is_none());
}

#[tokio::test]
async fn a_pong_answered_while_a_large_frame_is_half_written_follows_that_frame() {
    let (server, mut client) = pair(1024).await;
    let (mut sink, mut stream) = server.split();
    let big = pattern(1024 * 1024);
    let writer = tokio::spawn({
        let big = big.clone();
        async move {
            sink.send(Message::Binary(big)).await.unwrap();
            sink
        }
    });
    // The frame fills the pipe; then the client pings, and the server reads the Ping
    // (queueing its Pong) while the frame is still going out.
    tokio::task::yield_now().await;
    client
        .send(Message::Ping(Bytes::from_static(b"p")))
        .await
        .unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        Message::Ping(Bytes::from_static(b"p"))
    );
    assert_eq!(client.next().await.unwrap().unwrap(), Message::Binary(big));
    let mut sink = writer.await.unwrap();
    sink.flush().await.unwrap();
    assert_eq!(
        client.next().await.unwrap().unwrap(),
        Message::Pong(Bytes::from_static(b"p"))
    );
}

/// The writing half of a connection, recording the address and length of every slice
/// written to it.
struct Recorder {
    inner: tokio::io::WriteHalf<DuplexStream>,
    slices: std::sync::Arc<std::sync::Mutex<Vec<(usize, usize)>>>,
}

impl AsyncWrite for Recorder {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut slices = this.slices.lock().unwrap();
        slices.extend(bufs.iter().map(|b| (b.as_ptr() as usize, b.len())));
        drop(slices);
        let whole: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &whole))?;
        assert_eq!(n, whole.len(), "the test's pipe takes every write whole");
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_large_message_is_written_from_its_own_bytes_and_a_small_one_is_copied() {
    let (server, client) = tokio::io::duplex(4 * 1024 * 1024);
    let (read, write) = tokio::io::split(server);
    let slices = std::sync::Arc::default();
    let recorder = Recorder {
        inner: write,
        slices: std::sync::Arc::clone(&slices),
    };
    let io = tokio::io::join(read, recorder);
    let mut server = Socket::server(io, WebSocketConfig::default()).await;
    let mut client = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
    let (large, small) = (pattern(128 * 1024), pattern(DIRECT_BYTES - 1));
    server.send(Message::Binary(large.clone())).await.unwrap();
    server.send(Message::Binary(small.clone())).await.unwrap();
    let slices = slices.lock().unwrap().clone();
    // The large payload went out as it was: one slice at its own address, after a
    // header of 10 bytes (127 and a 64-bit length).
    assert_eq!(slices[0].1, 10);
    assert_eq!(slices[1], (large.as_ptr() as usize, large.len()));
    assert!(
        slices[2..]
            .iter()
            .all(|&(at, _)| at != small.as_ptr() as usize)
    );
    assert_eq!(
        client.next().await.unwrap().unwrap(),
        Message::Binary(large)
    );
    assert_eq!(
        client.next().await.unwrap().unwrap(),
        Message::Binary(small)
    );
}
