//! A pty-ws connection to a session another node runs: relayed to that node as it is
//! (`cluster::forward`), and ended in this binding's words when that node is lost.

use std::time::Duration;
use wire::server::{Goodbye, ServerOp};

use futures_util::SinkExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;

use super::server_frame;
use crate::cluster::forward::{self, Ended, OwnerSocket};
use crate::sessions::is_task_update;
use crate::state::AppState;
use crate::store::FrameBody;
use crate::websocket::Socket;

/// Relays the client's socket to the owner's; when the owner's node is lost, waits for a
/// surviving node to close the session and ends the client's connection with its last
/// frames, as a session that closed ends it. When this node stops, it says goodbye to the
/// client as its own connections do.
pub async fn run(state: AppState, mut client: Socket, mut owner: OwnerSocket, sid: String) {
    let quiet = state.heartbeat_timeout + state.heartbeat_interval;
    let ended = tokio::select! {
        ended = forward::relay(&mut client, &mut owner, quiet) => ended,
        _ = state.shutdown.cancelled() => {
            let _ = owner.close(None).await;
            goodbye(&mut client, "server_shutdown").await;
            return;
        }
    };
    if ended == Ended::OwnerLost {
        tracing::warn!(session_id = %sid, "lost the node running a forwarded session");
        let within = state.node.timeout() * 2 + Duration::from_secs(5);
        finish_lost(client, &state, &sid, within).await;
    }
}

/// A `binding_goodbye` and a normal close.
async fn goodbye(client: &mut Socket, reason: &str) {
    let goodbye = server_frame(
        None,
        None,
        ServerOp::Goodbye(Goodbye {
            reason: reason.into(),
        }),
    );
    if client.send(Message::Text(goodbye.into())).await.is_ok() {
        let _ = client.send(close(1000, reason)).await;
    }
}

/// Waits (up to `within`) until a surviving node has closed the session, then sends its
/// last frames (the final keyframe and `Closed`, numbered above all the lost node handed
/// out), a goodbye and a normal close.
async fn finish_lost(mut client: Socket, state: &AppState, sid: &str, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match state.store.sessions().get(sid).await {
            Ok(Some(row)) if row.state != "running" => break,
            _ if tokio::time::Instant::now() >= deadline => {
                let _ = client.send(close(1011, "node_lost")).await;
                return;
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    if let Ok(frames) = state.store.frames().from_last_keyframe(sid).await {
        for f in frames.into_iter().filter(|f| !is_task_update(f)) {
            if let FrameBody::Envelope { text, .. } = f.body
                && let Ok(text) = text.try_into()
                && client.send(Message::Text(text)).await.is_err()
            {
                return;
            }
        }
    }
    goodbye(&mut client, "session_closed").await;
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code: code.into(),
        reason: reason.into(),
    }))
}
