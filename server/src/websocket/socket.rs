//! The server's WebSocket: tungstenite's, except that a text or binary message of
//! `DIRECT_BYTES` or more is written from its own bytes, its frame header and payload in one
//! vectored write, instead of being copied into the library's write buffer first.
//!
//! PTY output is made once per frame and shared by every viewer (`Bytes`); with a hundred
//! viewers of a flood, copying each 128 KiB frame into each viewer's write buffer was a
//! tenth of the server's CPU. The library's buffer now holds only small frames, so it
//! also stays small after a large keyframe or member list (it keeps the capacity of the
//! largest frame it ever held, for as long as the connection lives).
//!
//! Frames never interleave: a direct frame is handed to the connection (`Io`) only once
//! everything the library queued before it is written, and `Io` finishes it before it
//! takes another byte from the library (a Pong the reading side answers with, say).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_util::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error, Message};

/// Text and binary messages this large or larger are written from their own bytes.
const DIRECT_BYTES: usize = 4 * 1024;

/// A server-side WebSocket over `S` (the upgraded connection).
pub struct Socket<S> {
    ws: WebSocketStream<Io<S>>,
    /// A large message `start_send` took, handed to `Io` once the library's queue is out.
    queued: Option<Direct>,
    /// A Close was sent, or received (the library answers it): no data may follow it.
    closing: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Socket<S> {
    pub async fn server(inner: S, config: WebSocketConfig) -> Self {
        let io = Io {
            inner,
            direct: None,
        };
        Socket {
            ws: WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await,
            queued: None,
            closing: false,
        }
    }

    /// Hands the queued direct frame to `Io` once the library has written what it holds.
    fn poll_hand_over(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if self.queued.is_some() {
            ready!(Pin::new(&mut self.ws).poll_flush(cx))?;
            self.ws.get_mut().direct = self.queued.take();
        }
        Poll::Ready(Ok(()))
    }

    fn queue(&mut self, payload: Bytes, data: Data) -> Result<(), Error> {
        if self.closing {
            return Err(Error::Protocol(ProtocolError::SendAfterClosing));
        }
        self.queued = Some(Direct::new(payload, data)?);
        Ok(())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Sink<Message> for Socket<S> {
    type Error = Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let this = self.get_mut();
        ready!(this.poll_hand_over(cx))?;
        Pin::new(&mut this.ws).poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), Error> {
        let this = self.get_mut();
        match item {
            Message::Text(text) if text.len() >= DIRECT_BYTES => {
                this.queue(text.into(), Data::Text)
            }
            Message::Binary(data) if data.len() >= DIRECT_BYTES => this.queue(data, Data::Binary),
            item => {
                this.closing |= matches!(item, Message::Close(_));
                Pin::new(&mut this.ws).start_send(item)
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let this = self.get_mut();
        ready!(this.poll_hand_over(cx))?;
        Pin::new(&mut this.ws).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let this = self.get_mut();
        ready!(this.poll_hand_over(cx))?;
        this.closing = true;
        Pin::new(&mut this.ws).poll_close(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Stream for Socket<S> {
    type Item = Result<Message, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let next = ready!(Pin::new(&mut this.ws).poll_next(cx));
        this.closing |= matches!(next, Some(Ok(Message::Close(_))));
        Poll::Ready(next)
    }
}

/// The longest header of a server's frame: two bytes and a 64-bit length, no mask.
const MAX_HEADER: usize = 10;

/// One unfragmented data frame, written from its payload's own bytes.
struct Direct {
    header: [u8; MAX_HEADER],
    header_len: usize,
    payload: Bytes,
    /// How much of header and payload is written.
    written: usize,
}

impl Direct {
    fn new(payload: Bytes, data: Data) -> Result<Self, Error> {
        let mut header = [0; MAX_HEADER];
        let mut out = &mut header[..];
        let frame = FrameHeader {
            opcode: OpCode::Data(data),
            ..FrameHeader::default()
        };
        frame.format(payload.len() as u64, &mut out)?;
        let header_len = MAX_HEADER - out.len();
        Ok(Direct {
            header,
            header_len,
            payload,
            written: 0,
        })
    }

    /// What is left to write, of the header and of the payload.
    fn rest(&self) -> [IoSlice<'_>; 2] {
        let head = &self.header[self.written.min(self.header_len)..self.header_len];
        let body = &self.payload[self.written.saturating_sub(self.header_len)..];
        [IoSlice::new(head), IoSlice::new(body)]
    }

    fn done(&self) -> bool {
        self.written == self.header_len + self.payload.len()
    }
}

/// The connection under the library, with the direct frame in flight: written before
/// anything else the library writes, flushes or shuts down.
struct Io<S> {
    inner: S,
    direct: Option<Direct>,
}

impl<S: AsyncWrite + Unpin> Io<S> {
    fn poll_direct(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(direct) = &mut self.direct {
            let n = ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, &direct.rest()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            direct.written += n;
            if direct.done() {
                self.direct = None;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Io<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Io<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_direct(cx))?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_direct(cx))?;
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_direct(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_direct(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
