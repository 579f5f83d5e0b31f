//! How frames reach the client: with a deadline, in the connection's dialect; and how the
//! socket closes.

use std::time::Duration;
use wire::server::{Goodbye, ServerOp};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use wire::ErrorCode;

use super::{Admit, Connection, Ended, Sink, Stream};
use crate::bindings::pty_ws::executor::Dialect;
use crate::bindings::pty_ws::{MAX_FRAME_BYTES, error_frame, executor, server_frame};

impl Connection {
    /// A final `Error` frame, then the close code.
    pub(super) async fn fatal(
        &self,
        sink: &mut Sink,
        code: ErrorCode,
        message: &str,
        close_code: u16,
    ) -> Admit {
        if self
            .send(sink, error_frame(None, code, message))
            .await
            .is_ok()
        {
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                close(sink, close_code, code.as_str()),
            )
            .await;
        }
        Admit::Stop
    }

    /// Sends a message, with a deadline: a peer that takes longer than the heartbeat
    /// timeout to take one frame is treated as gone. A viewer that keeps up with a flood
    /// takes it in large frames.
    pub(super) async fn send_message(&self, sink: &mut Sink, msg: Message) -> Result<(), Ended> {
        match tokio::time::timeout(self.state.heartbeat_timeout, sink.send(msg)).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Ended),
        }
    }

    /// Sends any other frame (a membership list, a keyframe, a replay page) in the
    /// connection's dialect; same deadline.
    pub(super) async fn send_frame(&self, sink: &mut Sink, json: Utf8Bytes) -> Result<(), Ended> {
        let json = match self.dialect {
            Dialect::Spec => json,
            Dialect::Executor => match transcode(json.as_bytes()) {
                Some(text) => text.into(),
                None => return Ok(()),
            },
        };
        self.send_message(sink, Message::Text(json)).await
    }

    pub(super) async fn send(&self, sink: &mut Sink, text: String) -> Result<(), Ended> {
        self.send_frame(sink, text.into()).await
    }

    pub(super) async fn send_bytes(&self, sink: &mut Sink, json: Bytes) -> Result<(), Ended> {
        let text = Utf8Bytes::try_from(json).map_err(|_| Ended)?;
        self.send_frame(sink, text).await
    }

    pub(super) async fn goodbye(&self, sink: &mut Sink, reason: &str) {
        if self.dialect == Dialect::Executor {
            // The executor's clients know only the close: a normal one after the session
            // ended, else "going away", after which they reconnect with replay_from.
            let code = if reason == "session_closed" {
                1000
            } else {
                1001
            };
            let _ = tokio::time::timeout(Duration::from_secs(2), close(sink, code, reason)).await;
            return;
        }
        let frame = server_frame(
            None,
            None,
            ServerOp::Goodbye(Goodbye {
                reason: reason.into(),
            }),
        );
        if self.send(sink, frame).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(2), close(sink, 1000, reason)).await;
        }
    }
}

/// A frame in the spec's shape as the executor's clients take it (`None`: they have no
/// counterpart of it).
pub(super) fn transcode(spec: &[u8]) -> Option<String> {
    executor::encode(std::str::from_utf8(spec).ok()?)
}

/// The close code and message for a socket error the client caused: 1007 for a text frame
/// that is not UTF-8, 1009 for a frame too large to read, 1002 for a protocol violation;
/// none when the socket itself failed.
pub(super) fn close_for(e: &WsError) -> Option<(u16, String)> {
    match e {
        WsError::Utf8(_) => Some((1007, "text frames must be UTF-8".into())),
        WsError::Capacity(_) => Some((
            1009,
            format!("frames are limited to {MAX_FRAME_BYTES} bytes"),
        )),
        WsError::Protocol(p) => Some((1002, format!("WebSocket protocol error: {p}"))),
        _ => None,
    }
}

/// Ends the socket cleanly whoever closed it: a Close the client sent is answered
/// (closing flushes the reply), and what the client still sends is read until its Close
/// (or `CLOSE_WAIT`), so that our close frame is not lost to a TCP reset.
pub(super) async fn finish(sink: &mut Sink, stream: &mut Stream) {
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        let _ = sink.close().await;
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
}

/// How long `finish` waits for the client's side of the close.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

pub(super) async fn close(sink: &mut Sink, code: u16, reason: &str) -> Result<(), WsError> {
    sink.send(Message::Close(Some(CloseFrame {
        code: code.into(),
        reason: reason.into(),
    })))
    .await
}
