//! The baseline of `pty_bench`'s echo and flood: a bare WebSocket ↔ PTY relay, on the same
//! runtime (Tokio, multi-threaded) and WebSocket library (tokio-tungstenite) as ptyhost,
//! that does nothing else. Each connection gets a fresh PTY running the command; binary
//! messages go to the PTY as they are, and what the PTY prints comes back as binary
//! messages. Its figures are what any WebSocket terminal on this machine can reach.
//!
//!     cargo run --release -p server --example pty_relay -- COMMAND [ARG…]
//!
//! prints `listening on 127.0.0.1:PORT`, then serves until killed.

use std::io::{Read, Write};

use futures_util::{SinkExt, StreamExt};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use tokio_tungstenite::tungstenite::Message;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(!argv.is_empty(), "usage: pty_relay COMMAND [ARG…]");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let argv = argv.clone();
        tokio::spawn(async move {
            if let Err(e) = relay(tcp, argv).await {
                eprintln!("pty_relay: {e}");
            }
        });
    }
}

async fn relay(tcp: tokio::net::TcpStream, argv: Vec<String>) -> anyhow::Result<()> {
    let ws = tokio_tungstenite::accept_async(tcp).await?;
    let size = PtySize {
        rows: 30,
        cols: 120,
        pixel_width: 0,
        pixel_height: 0,
    };
    let pair = native_pty_system().openpty(size)?;
    let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
    cmd.env("TERM", "xterm-256color");
    let mut child = pair.slave.spawn_command(cmd)?;
    drop(pair.slave);
    let fd = pair
        .master
        .as_raw_fd()
        .expect("a PTY master has a descriptor");
    let file = std::fs::File::from(server::sys::dup(fd)?);
    server::sys::set_nonblocking(&file)?;
    let pty = server::sys::registered(file)?;
    let (mut sink, mut stream) = ws.split();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            readable = pty.readable() => {
                let mut guard = readable?;
                match guard.try_io(|f| f.get_ref().read(&mut buf)) {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    Ok(Ok(n)) => sink.send(Message::binary(buf[..n].to_vec())).await?,
                    Err(_would_block) => {}
                }
            }
            message = stream.next() => match message {
                Some(Ok(Message::Binary(data))) => {
                    let mut rest = &data[..];
                    while !rest.is_empty() {
                        let mut guard = pty.writable().await?;
                        if let Ok(n) = guard.try_io(|f| f.get_ref().write(rest)) {
                            rest = &rest[n?..];
                        }
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
    let _ = sink.send(Message::Close(None)).await;
    let _ = child.kill();
    Ok(())
}
