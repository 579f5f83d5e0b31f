//! The STDIO binding against the real `ptyhost stdio` child process: handshake, framing,
//! unary and streaming requests, cancellation, errors and exit codes. Stdout is read only
//! through the frame reader, so anything else on it fails the test.

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

#[tokio::test]
async fn stdio_without_a_session_id_is_denied_with_exit_4() {
    let mut p = Parent::spawn(None, &[]);
    assert_eq!(p.exit().await.code(), Some(4));
    assert!(p.rest().await.is_empty(), "nothing on stdout");
}

#[tokio::test]
async fn stdio_handshake_unary_concurrent_and_streaming_requests_carry_the_session_stamp() {
    let mut p = Parent::spawn(Some("sess-1"), &["--executor", "conformance"]);
    let hello = p.next().await;
    assert_eq!(hello["protocol"], "a2a-stdio");
    assert_eq!(hello["protocolVersion"], "1.0");
    assert_eq!(hello["sessionId"], "sess-1");
    assert_eq!(hello["supportedVariants"][0], "stdio-json");
    assert!(hello["pid"].as_u64().is_some());
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-1", "selectVariant": "stdio-json", "accept": true }))
        .await;
    p.send(&json!({ "type": "heartbeat", "sessionId": "sess-1", "ts": 1 }))
        .await;

    // Two requests in flight at once; answers carry their ids.
    p.request(
        json!("a"),
        "SendMessage",
        message("tck-complete-task-1", "hi"),
    )
    .await;
    p.request(json!(2), "ListTasks", json!({})).await;
    let (mut sent, mut listed) = (None, None);
    while sent.is_none() || listed.is_none() {
        let f = p.next().await;
        match &f["id"] {
            id if *id == json!("a") => sent = Some(f),
            id if *id == json!(2) => listed = Some(f),
            _ => {}
        }
    }
    let task = &sent.unwrap()["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let stamp = &task["metadata"][METADATA_KEY];
    assert_eq!(
        (stamp["sessionId"].as_str(), stamp["variant"].as_str()),
        (Some("sess-1"), Some("stdio-json"))
    );
    assert_eq!(
        task["history"][0]["metadata"][METADATA_KEY]["sessionId"],
        "sess-1"
    );
    assert!(listed.unwrap()["result"]["tasks"].is_array());
    let id = task["id"].as_str().unwrap().to_owned();
    p.request(json!(3), "GetTask", json!({ "id": id })).await;
    assert_eq!(
        p.until(&json!(3), |_| true).await[0]["result"]["id"],
        id.as_str()
    );

    // A stream: results shaped like unary ones, then streamEnd.
    p.request(
        json!(7),
        "SendStreamingMessage",
        message("tck-stream-001", "go"),
    )
    .await;
    let frames = p.until(&json!(7), |f| f.get("streamEnd").is_some()).await;
    assert!(frames[0]["result"]["task"].is_object());
    assert_eq!(
        frames[frames.len() - 2]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Events carry the task's metadata (runtime/v1's), not the session stamp.
    assert!(
        frames[frames.len() - 2]["result"]["statusUpdate"]["metadata"]
            .get(METADATA_KEY)
            .is_none()
    );

    // system/shutdown answers, then the process exits 0 with nothing more on stdout.
    p.request(json!(9), "system/shutdown", json!({})).await;
    assert_eq!(p.until(&json!(9), |_| true).await[0]["result"], json!({}));
    assert_eq!(p.exit().await.code(), Some(0));
    p.rest().await;
}

#[tokio::test]
async fn stdio_cancel_stream_ends_the_stream_but_not_the_task() {
    let mut p = Parent::ready(&["--executor", "conformance"]).await;
    p.request(
        json!(1),
        "SendStreamingMessage",
        message("test-resubscribe-message-id-1", "long"),
    )
    .await;
    let first = p.until(&json!(1), |_| true).await.remove(0);
    let task_id = first["result"]["task"]["id"].as_str().unwrap().to_owned();
    p.send(&json!({ "jsonrpc": "2.0", "id": 1, "cancelStream": true }))
        .await;
    p.until(&json!(1), |f| f.get("streamEnd") == Some(&json!(true)))
        .await;
    p.request(json!(2), "GetTask", json!({ "id": task_id }))
        .await;
    let task = p.until(&json!(2), |_| true).await.remove(0);
    assert_ne!(
        task["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{task}"
    );
    // EOF is the shutdown signal.
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
}

#[tokio::test]
async fn a_required_extension_is_activated_by_the_a2a_sp_variable() {
    const A202: &str = "https://schemas.a202.org/a2a-ext/commercial/0.1";
    let args = ["--executor", "conformance", "--a202-required"];
    let mut bare = Parent::ready(&args).await;
    bare.request(json!(1), "ListTasks", json!({})).await;
    let e = bare.until(&json!(1), |_| true).await.remove(0);
    assert_eq!(e["error"]["code"], -32008, "{e}");
    let mut activated = Parent::ready_env(&args, &[("A2A_SP_A2A_EXTENSIONS", A202)]).await;
    activated.request(json!(1), "ListTasks", json!({})).await;
    let ok = activated.until(&json!(1), |_| true).await.remove(0);
    assert!(ok["result"]["tasks"].is_array(), "{ok}");
}

#[tokio::test]
async fn stdio_errors_keep_ids_unknown_methods_go_on_and_a_parse_error_ends_with_exit_2() {
    let mut p = Parent::ready(&[]).await;
    p.request(json!(1), "Teleport", json!({})).await;
    let e = p.until(&json!(1), |_| true).await.remove(0);
    assert_eq!(e["error"]["code"], -32601);
    p.request(json!(2), "GetTask", json!({ "id": "nope" }))
        .await;
    let e = p.until(&json!(2), |_| true).await.remove(0);
    assert_eq!(
        (
            e["error"]["code"].as_i64(),
            e["error"]["data"][0]["reason"].as_str()
        ),
        (Some(-32001), Some("TASK_NOT_FOUND"))
    );
    p.send(&json!({ "jsonrpc": "2.0", "method": "GetTask" }))
        .await;
    assert_eq!(p.next().await["error"]["code"], -32600);
    p.send_raw(&frame(b"{not json")).await;
    let e = p.next().await;
    assert_eq!(
        (e["error"]["code"].as_i64(), &e["id"]),
        (Some(-32700), &Value::Null)
    );
    assert_eq!(p.exit().await.code(), Some(2));
}

#[tokio::test]
async fn stdio_an_oversized_frame_is_refused_and_ends_with_exit_2() {
    let mut p = Parent::ready(&["--max-frame-bytes", "100"]).await;
    p.request(json!(1), "GetTask", json!({ "id": "x".repeat(200) }))
        .await;
    let e = p.next().await;
    assert_eq!(
        (e["error"]["code"].as_i64(), e["error"]["message"].as_str()),
        (Some(-32000), Some("Message too large"))
    );
    assert_eq!(p.exit().await.code(), Some(2));
}

#[tokio::test]
async fn stdio_handshake_refusals_have_their_exit_codes() {
    let mut declined = Parent::spawn(Some("s"), &[]);
    declined.next().await;
    declined
        .send(&json!({ "type": "handshakeAck", "sessionId": "s", "selectVariant": "stdio-json", "accept": false }))
        .await;
    assert_eq!(declined.exit().await.code(), Some(0));

    let mut unoffered = Parent::spawn(Some("s"), &[]);
    unoffered.next().await;
    unoffered
        .send(&json!({ "type": "handshakeAck", "sessionId": "s", "selectVariant": "stdio-xml", "accept": true }))
        .await;
    assert_eq!(unoffered.exit().await.code(), Some(2));

    let mut stranger = Parent::spawn(Some("s"), &[]);
    stranger.next().await;
    stranger
        .send(&json!({ "type": "handshakeAck", "sessionId": "another", "selectVariant": "stdio-json", "accept": true }))
        .await;
    assert_eq!(
        stranger.exit().await.code(),
        Some(2),
        "a handshakeAck for another session"
    );

    let mut twice = Parent::ready(&[]).await;
    twice
        .send(&json!({ "type": "handshake", "protocol": "a2a-stdio" }))
        .await;
    assert_eq!(twice.exit().await.code(), Some(2));

    let mut left = Parent::spawn(Some("s"), &[]);
    left.next().await;
    drop(left.stdin.take());
    assert_eq!(
        left.exit().await.code(),
        Some(0),
        "the parent left before the ack"
    );
}

#[tokio::test]
async fn stdio_runs_shell_commands_as_tasks() {
    let mut p = Parent::ready(&[]).await;
    p.request(
        json!(1),
        "SendMessage",
        message("m1", "echo from-stdio-$((40+2))"),
    )
    .await;
    let reply = p.until(&json!(1), |_| true).await.remove(0);
    let task = &reply["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "from-stdio-42\r\n"
    );
    assert_eq!(
        task["artifacts"][0]["metadata"][METADATA_KEY]["sessionId"],
        "sess-1"
    );
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn stdio_cancel_task_cancels_a_running_task() {
    let mut p = Parent::ready(&["--executor", "conformance"]).await;
    let mut params = message("test-resubscribe-message-id-2", "long");
    params["configuration"] = json!({ "returnImmediately": true });
    p.request(json!(1), "SendMessage", params).await;
    let sent = p.until(&json!(1), |_| true).await.remove(0);
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    p.request(json!(2), "CancelTask", json!({ "id": id })).await;
    let canceled = p.until(&json!(2), |_| true).await.remove(0);
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
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

#[tokio::test]
async fn stdio_proto_carries_the_same_operations_in_protobuf_bodies() {
    use server::bindings::proto::decode;
    let mut p = Parent::spawn(Some("sess-p"), &["--executor", "conformance"]);
    let hello = p.next().await;
    assert_eq!(
        hello["supportedVariants"],
        json!(["stdio-json", "stdio-proto"])
    );
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-p", "selectVariant": "stdio-proto", "accept": true }))
        .await;
    p.send(&json!({ "type": "heartbeat", "sessionId": "sess-p", "ts": 1 }))
        .await;

    p.proto_request(
        "1",
        "SendMessage",
        "lf.a2a.v1.SendMessageRequest",
        message("tck-complete-task-p", "hi"),
    )
    .await;
    let (kind, id, body) = p.proto_next().await;
    assert_eq!((kind.as_str(), id.as_str()), ("response", "1"));
    let sent = decode("lf.a2a.v1.SendMessageResponse", &body).unwrap();
    assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        sent["task"]["metadata"][METADATA_KEY]["sessionId"],
        "sess-p"
    );
    let task_id = sent["task"]["id"].as_str().unwrap().to_owned();

    p.proto_request(
        "2",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": task_id }),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "response");
    assert_eq!(
        decode("lf.a2a.v1.Task", &body).unwrap()["id"],
        task_id.as_str()
    );

    // The same error mapping as stdio-json.
    p.proto_request(
        "3",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": "nope" }),
    )
    .await;
    let (kind, id, body) = p.proto_next().await;
    assert_eq!((kind.as_str(), id.as_str()), ("error", "3"));
    let e = decode("ptyhost.stdio.Error", &body).unwrap();
    assert_eq!(
        (e["code"].as_i64(), e["reason"].as_str()),
        (Some(-32001), Some("TASK_NOT_FOUND"))
    );

    // A stream: stream frames of StreamResponse, then streamEnd.
    p.proto_request(
        "4",
        "SendStreamingMessage",
        "lf.a2a.v1.SendMessageRequest",
        message("tck-stream-001", "go"),
    )
    .await;
    let mut states = Vec::new();
    loop {
        let (kind, id, body) = p.proto_next().await;
        assert_eq!(id, "4");
        if kind == "streamEnd" {
            break;
        }
        assert_eq!(kind, "stream");
        let event = decode("lf.a2a.v1.StreamResponse", &body).unwrap();
        if let Some(s) = event["statusUpdate"]["status"]["state"].as_str() {
            states.push(s.to_owned());
        }
    }
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );

    // cancel ends a stream, not its task.
    p.proto_request(
        "5",
        "SendStreamingMessage",
        "lf.a2a.v1.SendMessageRequest",
        message("test-resubscribe-message-id-p", "long"),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "stream");
    let long = decode("lf.a2a.v1.StreamResponse", &body).unwrap()["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    p.send_raw(&frame_with(
        "application/x-protobuf",
        &[("A2A-Kind", "cancel"), ("A2A-Id", "5")],
        &[],
    ))
    .await;
    loop {
        let (kind, id, _) = p.proto_next().await;
        if (kind.as_str(), id.as_str()) == ("streamEnd", "5") {
            break;
        }
    }
    p.proto_request(
        "6",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": long }),
    )
    .await;
    let (_, _, body) = p.proto_next().await;
    assert_ne!(
        decode("lf.a2a.v1.Task", &body).unwrap()["status"]["state"],
        "TASK_STATE_CANCELED"
    );

    p.proto_request("7", "system/shutdown", "google.protobuf.Empty", json!({}))
        .await;
    let (kind, id, _) = p.proto_next().await;
    assert_eq!((kind.as_str(), id.as_str()), ("response", "7"));
    assert_eq!(p.exit().await.code(), Some(0));
}

#[tokio::test]
async fn stdio_proto_runs_requests_concurrently_cancels_tasks_and_refuses_oversize_frames() {
    use server::bindings::proto::decode;
    let mut p = Parent::spawn(
        Some("sess-q"),
        &["--executor", "conformance", "--max-frame-bytes", "4096"],
    );
    p.next().await;
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-q", "selectVariant": "stdio-proto", "accept": true }))
        .await;
    let mut long = message("test-resubscribe-message-id-q", "long");
    long["configuration"] = json!({ "returnImmediately": true });
    // Two requests in flight; answers carry their ids.
    p.proto_request("a", "SendMessage", "lf.a2a.v1.SendMessageRequest", long)
        .await;
    p.proto_request("b", "ListTasks", "lf.a2a.v1.ListTasksRequest", json!({}))
        .await;
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let (kind, id, body) = p.proto_next().await;
        assert_eq!(kind, "response");
        answers.insert(id, body);
    }
    let sent = decode("lf.a2a.v1.SendMessageResponse", &answers["a"]).unwrap();
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    assert!(decode("lf.a2a.v1.ListTasksResponse", &answers["b"]).is_ok());

    p.proto_request(
        "c",
        "CancelTask",
        "lf.a2a.v1.CancelTaskRequest",
        json!({ "id": id }),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "response");
    assert_eq!(
        decode("lf.a2a.v1.Task", &body).unwrap()["status"]["state"],
        "TASK_STATE_CANCELED"
    );

    // An oversized frame is answered with an Error and ends the session with exit 2.
    p.proto_request(
        "d",
        "GetTask",
        "lf.a2a.v1.GetTaskRequest",
        json!({ "id": "x".repeat(5000) }),
    )
    .await;
    let (kind, _, body) = p.proto_next().await;
    assert_eq!(kind, "error");
    let e = decode("ptyhost.stdio.Error", &body).unwrap();
    assert_eq!(
        (e["code"].as_i64(), e["message"].as_str()),
        (Some(-32000), Some("Message too large"))
    );
    assert_eq!(p.exit().await.code(), Some(2));
}

#[tokio::test]
async fn stdio_proto_ends_on_eof() {
    let mut p = Parent::spawn(Some("sess-r"), &[]);
    p.next().await;
    p.send(&json!({ "type": "handshakeAck", "sessionId": "sess-r", "selectVariant": "stdio-proto", "accept": true }))
        .await;
    drop(p.stdin.take());
    assert_eq!(p.exit().await.code(), Some(0));
    assert!(p.rest().await.is_empty());
}

#[tokio::test]
async fn stdio_a_file_part_is_written_before_its_command_and_referenced_by_a_file_url() {
    let mut p = Parent::ready(&[]).await;
    let script = "echo stdio-$((6*7))\n";
    let params = json!({ "message": { "messageId": "f1", "role": "ROLE_USER", "parts": [
        { "raw": base64::engine::general_purpose::STANDARD.encode(script), "filename": "s.sh" },
        { "text": "sh s.sh" },
    ] } });
    p.request(json!(1), "SendMessage", params).await;
    let answer = p.until(&json!(1), |_| true).await.remove(0);
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    let output = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(output.contains("stdio-42"), "{output}");
    let url = task["history"][0]["parts"][0]["url"].as_str().unwrap();
    let path = url.strip_prefix("file://").expect("a file: URL");
    assert_eq!(std::fs::read_to_string(path).unwrap(), script);
}
