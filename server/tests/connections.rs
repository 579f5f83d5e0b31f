//! What the server does with connections that do not behave: a partial request head is
//! closed after the header-read timeout, an address holds a bounded number of
//! unauthenticated connections, and a full server makes room by evicting the oldest of
//! those; the turned-away get an HTTP answer that says why.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A TCP connection to the server from the loopback address `from`.
async fn connect_from(s: &TestServer, from: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(s.addr.parse().unwrap()).await.unwrap()
}

/// Reads until the server closes; what it sent, and how long that took.
async fn until_closed(tcp: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(WAIT, tcp.read_to_end(&mut got)).await;
    (String::from_utf8_lossy(&got).into_owned(), start.elapsed())
}

/// A request head that never ends.
async fn partial(tcp: &mut TcpStream) {
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_partial_request_head_and_an_idle_keep_alive_are_closed_after_the_timeout() {
    let s = TestServer::start(&["--header-read-timeout", "1"]).await;
    let mut slow = connect_from(&s, "127.0.0.2").await;
    partial(&mut slow).await;
    let (_, took) = until_closed(&mut slow).await;
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(3)).contains(&took),
        "{took:?}"
    );

    let mut idle = connect_from(&s, "127.0.0.2").await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, took) = until_closed(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn an_address_holds_a_bounded_number_of_unauthenticated_connections() {
    let s = TestServer::start(&["--max-unauthenticated-per-address", "2"]).await;
    // A connection that authenticated a request no longer counts against its address.
    let _signed_in = signed_in(&s, "127.0.0.2").await;

    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = connect_from(&s, "127.0.0.2").await;
        partial(&mut c).await;
        held.push(c);
    }
    let mut turned = connect_from(&s, "127.0.0.2").await;
    turned
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = until_closed(&mut turned).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("\"rate_limited\""), "{answer}");

    // Another address is served meanwhile.
    let (status, _) = s.get("/me", ADMIN).await;
    assert_eq!(status, 200);
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut again = connect_from(&s, "127.0.0.2").await;
    again
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = until_closed(&mut again).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A connection from `from` whose request authenticated, kept alive.
async fn signed_in(s: &TestServer, from: &str) -> TcpStream {
    let mut c = connect_from(s, from).await;
    let me = format!("GET /me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n\r\n");
    c.write_all(me.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    c
}

#[tokio::test]
async fn a_full_server_evicts_the_oldest_unauthenticated_connection_then_answers_503() {
    let s = TestServer::start(&["--max-connections", "3"]).await;
    let mut slow = connect_from(&s, "127.0.1.1").await;
    partial(&mut slow).await;
    let _a = signed_in(&s, "127.0.1.2").await;
    let _b = signed_in(&s, "127.0.1.3").await;

    // Full: the newcomer takes the place of the oldest connection that never signed in.
    let mut newcomer = connect_from(&s, "127.0.1.4").await;
    partial(&mut newcomer).await;
    let (answer, took) = until_closed(&mut slow).await;
    assert_eq!(answer, "", "evicted without an answer");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let _c = signed_in(&s, "127.0.1.5").await;
    let (answer, _) = until_closed(&mut newcomer).await;
    assert_eq!(answer, "");

    // Every connection signed in: one more is turned away, and told why.
    let mut turned = connect_from(&s, "127.0.1.6").await;
    partial(&mut turned).await;
    let (answer, _) = until_closed(&mut turned).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"unavailable\""), "{answer}");
    assert!(answer.to_lowercase().contains("retry-after: 1"), "{answer}");
}
