//! The connection loop over channels instead of a socket: what a client sees for what it
//! sends, without HTTP or a network.

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_tungstenite::tungstenite;
use wire::Envelope;

use super::*;
use crate::auth::Scope;
use crate::bindings::pty_ws::MAX_FRAME_BYTES;
use crate::clock;
use crate::sessions::{JoinRequest, SpecRequest};
use crate::{auth, sessions};
use serde_json::json;

/// A server's state in `dir` and a new session of it running `cat`.
async fn cat_session(dir: &tempfile::TempDir) -> (AppState, String) {
    let state = crate::state::for_tests(dir.path(), &[]).await;
    let spec = SpecRequest {
        argv: Some(vec!["cat".into()]),
        ..SpecRequest::default()
    };
    let spec = spec.into_spec(state.sessions.settings()).unwrap();
    let sid = state.sessions.create(spec).await.unwrap().id;
    (state, sid)
}

/// A client at the other end of a `Connection`: what it sends, what it receives.
struct Peer {
    to_server: UnboundedSender<Result<Message, WsError>>,
    from_server: UnboundedReceiver<Message>,
    _dir: tempfile::TempDir,
}

impl Peer {
    /// A connection with a new token of `scope` on a new session running `cat`.
    async fn connect(scope: Scope) -> Peer {
        let dir = tempfile::tempdir().unwrap();
        let (state, sid) = cat_session(&dir).await;
        let request = auth::TokenRequest {
            scope,
            session_id: None,
            label: None,
            ttl: None,
            kind: "cli",
            secret: None,
        };
        let token = auth::issue(&state.store, request).await.unwrap();
        let principal = state
            .revocations
            .authenticate(&state.store, Some(&token.secret))
            .await
            .unwrap();
        let slot = state.limits.session_slot(&sid).unwrap();
        let connection = Connection::new(state, principal, sid.into(), false, slot);
        let (to_server, from_client) = unbounded_channel();
        let (to_client, from_server) = unbounded_channel();
        let sink = futures_util::sink::unfold(to_client, |tx, m: Message| async move {
            tx.send(m).map_err(|_| WsError::ConnectionClosed)?;
            Ok::<_, WsError>(tx)
        });
        let stream = futures_util::stream::unfold(from_client, |mut rx| async move {
            rx.recv().await.map(|m| (m, rx))
        });
        tokio::spawn(connection.over(Box::pin(sink), Box::pin(stream)));
        Peer {
            to_server,
            from_server,
            _dir: dir,
        }
    }

    fn send(&self, op: &str, payload: Value) {
        let env = Envelope::new(op, format!("c-{op}"), clock::now_rfc3339(), payload);
        self.send_raw(env.to_text());
    }

    fn send_raw(&self, text: String) {
        self.to_server.send(Ok(Message::Text(text.into()))).unwrap();
    }

    /// The next text frame as an envelope; a close frame's code as `Err`.
    async fn next(&mut self) -> Result<Envelope, Option<u16>> {
        loop {
            let wait = Duration::from_secs(10);
            match tokio::time::timeout(wait, self.from_server.recv()).await {
                Ok(Some(Message::Text(t))) => return Ok(serde_json::from_str(&t).unwrap()),
                Ok(Some(Message::Close(c))) => return Err(c.map(|c| c.code.into())),
                Ok(Some(_)) => continue,
                Ok(None) => return Err(None),
                Err(_) => panic!("no frame within {wait:?}"),
            }
        }
    }

    /// The next frame that is not a session frame (output, keyframes, membership).
    async fn next_reply(&mut self) -> Result<Envelope, Option<u16>> {
        loop {
            match self.next().await {
                Ok(e) if e.op == wire::OP_SESSION_FRAME => continue,
                other => return other,
            }
        }
    }
}

fn error_code(env: &Envelope) -> &str {
    assert_eq!(env.op, "Error", "{env:?}");
    env.payload["code"].as_str().unwrap()
}

#[tokio::test]
async fn the_first_frame_is_binding_hello_naming_the_session() {
    let mut peer = Peer::connect(Scope::Observe).await;
    let hello = peer.next().await.unwrap();
    assert_eq!(hello.op, "binding_hello");
    assert_eq!(hello.payload["binding_uri"], wire::BINDING_URI);
    assert!(hello.payload["session"]["session_id"].is_string());
}

#[tokio::test]
async fn a_frame_that_is_not_json_is_refused_and_the_connection_goes_on() {
    let mut peer = Peer::connect(Scope::Observe).await;
    peer.next().await.unwrap();
    peer.send_raw("{not json".into());
    assert_eq!(error_code(&peer.next().await.unwrap()), "INVALID_REQUEST");
    peer.send("ping", json!({ "client_ts": "t" }));
    let pong = peer.next().await.unwrap();
    assert_eq!(
        (pong.op.as_str(), pong.id.as_str()),
        ("pong", "c-ping"),
        "{pong:?}"
    );
}

#[tokio::test]
async fn an_oversized_frame_gets_an_error_then_close_1009() {
    let mut peer = Peer::connect(Scope::Observe).await;
    peer.next().await.unwrap();
    peer.send_raw("x".repeat(MAX_FRAME_BYTES + 1));
    assert_eq!(error_code(&peer.next().await.unwrap()), "INVALID_REQUEST");
    assert_eq!(peer.next().await.unwrap_err(), Some(1009));
}

#[tokio::test]
async fn a_frame_too_large_to_read_gets_an_error_then_close_1009() {
    let mut peer = Peer::connect(Scope::Observe).await;
    peer.next().await.unwrap();
    let too_long = tungstenite::error::CapacityError::MessageTooLong {
        size: MAX_FRAME_BYTES + 1,
        max_size: MAX_FRAME_BYTES,
    };
    peer.to_server
        .send(Err(WsError::Capacity(too_long)))
        .unwrap();
    assert_eq!(error_code(&peer.next().await.unwrap()), "INVALID_REQUEST");
    assert_eq!(peer.next().await.unwrap_err(), Some(1009));
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_gets_close_1007() {
    let mut peer = Peer::connect(Scope::Observe).await;
    peer.next().await.unwrap();
    let bad = WsError::Utf8("invalid utf-8 sequence".into());
    peer.to_server.send(Err(bad)).unwrap();
    assert_eq!(error_code(&peer.next().await.unwrap()), "INVALID_REQUEST");
    assert_eq!(peer.next().await.unwrap_err(), Some(1007));
}

#[tokio::test]
async fn a_client_close_ends_the_connection_and_the_socket_is_closed() {
    let mut peer = Peer::connect(Scope::Observe).await;
    peer.next().await.unwrap();
    peer.to_server.send(Ok(Message::Close(None))).unwrap();
    // The sink is closed (which flushes the socket's reply to the Close); nothing follows.
    assert_eq!(peer.next().await.unwrap_err(), None);
}

#[tokio::test]
async fn an_observer_token_s_input_is_refused_even_after_joining() {
    let mut peer = Peer::connect(Scope::Observe).await;
    peer.next().await.unwrap();
    peer.send(wire::OP_JOIN, json!({ "role": "observer" }));
    peer.send("pty.session_input", json!({ "data": "aGk=" }));
    let refusal = loop {
        let env = peer.next_reply().await.unwrap();
        if env.op == "Error" {
            break env;
        }
    };
    assert_eq!(error_code(&refusal), "PERMISSION_DENIED");
    assert_eq!(refusal.id, "c-pty.session_input");
}

#[tokio::test]
async fn a_burst_of_joins_leaves_a_viewer_that_reads_nothing_one_membership_list_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let (state, sid) = cat_session(&dir).await;
    let handle = state.sessions.live(&SessionId::from(&sid)).unwrap();
    let mut queues = Vec::new();
    for _ in 0..21 {
        let (out, queue) = sessions::viewer_queue();
        let request = JoinRequest {
            role: Role::Observer,
            scope: Scope::Observe,
            label: None,
            replay_from: None,
            size: None,
            out,
            output: sessions::OutputEncoding::Binary,
        };
        handle
            .ask(|r| SessionCommand::Join(request, r))
            .await
            .unwrap()
            .unwrap();
        queues.push(queue);
    }
    let mut lists = Vec::new();
    while let Ok(out) = queues[0].try_recv() {
        if let Outbound::Membership(slot) = out {
            lists.extend(slot.lock().unwrap().take());
        }
    }
    assert_eq!(lists.len(), 1, "20 joins, one list waiting");
    let list: Value = serde_json::from_slice(&lists[0]).unwrap();
    assert_eq!(list["payload"]["observers"].as_array().unwrap().len(), 21);
}
