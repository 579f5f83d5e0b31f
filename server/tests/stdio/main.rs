//! The STDIO binding against the real `ptyhost stdio` child process: handshake, framing,
//! unary and streaming requests, cancellation, errors and exit codes. Stdout is read only
//! through the frame reader, so anything else on it fails the test.
//!
//! Raw JSON on purpose: these tests pin the STDIO binding's member names as the specs write
//! them, apart from the `wire` types the server encodes with.

#[path = "../common/mod.rs"]
mod common;

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};
use server::bindings::stdio::METADATA_KEY;
use server::framing::{FrameReader, Incoming, frame, frame_with};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

mod json;
mod proto;

struct Parent {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: FrameReader<ChildStdout>,
    _dir: tempfile::TempDir,
}

impl Parent {
    /// Spawns `ptyhost stdio ARGS` with a session id (or none) and a clean environment.
    fn spawn(session_id: Option<&str>, args: &[&str]) -> Parent {
        Parent::spawn_env(session_id, args, &[])
    }

    /// `spawn`, with these variables set too.
    fn spawn_env(session_id: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Parent {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(bin());
        cmd.arg("stdio")
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .env("A2A_LOG_LEVEL", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("stderr.log")).unwrap(),
            ))
            .kill_on_drop(true);
        if let Some(id) = session_id {
            cmd.env("A2A_SESSION_ID", id);
        }
        cmd.envs(env.iter().copied());
        let mut child = cmd.spawn().expect("ptyhost stdio starts");
        let stdin = child.stdin.take();
        let frames = FrameReader::new(child.stdout.take().unwrap(), 16 * 1024 * 1024);
        Parent {
            child,
            stdin,
            frames,
            _dir: dir,
        }
    }

    /// Spawns with the conformance executor and completes the handshake.
    async fn ready(args: &[&str]) -> Parent {
        Parent::ready_env(args, &[]).await
    }

    async fn ready_env(args: &[&str], env: &[(&str, &str)]) -> Parent {
        let mut p = Parent::spawn_env(Some("sess-1"), args, env);
        let hello = p.next().await;
        assert_eq!(hello["type"], "handshake");
        p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-1", "selectVariant": "stdio-json", "accept": true }))
            .await;
        p
    }

    async fn send(&mut self, v: &Value) {
        self.send_raw(&frame(v.to_string().as_bytes())).await;
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn request(&mut self, id: Value, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
    }

    async fn next(&mut self) -> Value {
        match tokio::time::timeout(WAIT, self.frames.next())
            .await
            .expect("a frame in time")
        {
            Incoming::Frame(body) => serde_json::from_slice(&body).expect("a JSON body"),
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Frames until one with `id` satisfies `done`; returns those with `id`.
    async fn until(&mut self, id: &Value, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut mine = Vec::new();
        loop {
            let f = self.next().await;
            if f["id"] == *id {
                let stop = done(&f);
                mine.push(f);
                if stop {
                    return mine;
                }
            }
        }
    }

    async fn exit(&mut self) -> ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the child exits")
            .unwrap()
    }

    /// Reads stdout to its end: it must hold only whole frames.
    async fn rest(&mut self) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            match self.frames.next().await {
                Incoming::Frame(b) => got.push(serde_json::from_slice(&b).unwrap()),
                Incoming::Eof => return got,
                other => panic!("stdout is not clean frames: {other:?}"),
            }
        }
    }
}

fn message(id: &str, text: &str) -> Value {
    json!({ "message": { "messageId": id, "role": "ROLE_USER", "parts": [{ "text": text }] } })
}

impl Parent {
    /// Sends a `stdio-proto` request: the method in the headers, the params as protobuf.
    async fn proto_request(&mut self, id: &str, method: &str, type_name: &str, params: Value) {
        let body = server::bindings::proto::encode(type_name, &params).unwrap();
        let headers = [
            ("A2A-Kind", "request"),
            ("A2A-Id", id),
            ("A2A-Method", method),
        ];
        self.send_raw(&frame_with("application/x-protobuf", &headers, &body))
            .await;
    }

    /// The next `stdio-proto` frame: (kind, id, body).
    async fn proto_next(&mut self) -> (String, String, Vec<u8>) {
        match tokio::time::timeout(WAIT, self.frames.next())
            .await
            .expect("a frame in time")
        {
            Incoming::Frame(body) => (
                self.frames.header("A2A-Kind").unwrap_or("").to_owned(),
                self.frames.header("A2A-Id").unwrap_or("").to_owned(),
                body,
            ),
            other => panic!("expected a frame, got {other:?}"),
        }
    }
}
