//! A message's files over A2A: a FilePart is written into the session's working directory
//! before its command runs (the history keeps a reference to it, not its bytes), and a data
//! part's `outputs` come back as FilePart artifacts, in the 1.0 and 0.3 shapes alike.

mod common;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::*;
use serde_json::{Value, json};
use wire::a2a::{Content, Part};
use wire::control::SessionList;
use wire::rpc::StatusBody;

const SCRIPT: &str = "echo from-script; echo result-$((6*7)) > report.txt\n";

async fn post(s: &TestServer, path: &str, version: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = s
        .http
        .post(s.url(path))
        .header("Content-Type", "application/json")
        .body(body.to_string());
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    s.call(req, ADMIN).await
}

/// The first part of the task's artifact `id`.
fn artifact<'a>(task: &'a Task, id: &str) -> &'a Part {
    task.artifacts
        .iter()
        .flatten()
        .find(|a| a.artifact_id == id)
        .and_then(|a| a.parts.first())
        .unwrap_or_else(|| panic!("no artifact {id}: {task:?}"))
}

fn text(part: &Part) -> &str {
    match &part.content {
        Content::Text(t) => t,
        other => panic!("not text: {other:?}"),
    }
}

fn bytes(part: &Part) -> &[u8] {
    match &part.content {
        Content::Raw(b) => b,
        other => panic!("not raw bytes: {other:?}"),
    }
}

#[tokio::test]
async fn a_file_part_runs_as_a_script_and_its_outputs_come_back_over_http_json() {
    let s = TestServer::start(&[]).await;
    let send = json!({ "message": {
        "messageId": "files-1", "role": "ROLE_USER",
        "parts": [
            { "raw": STANDARD.encode(SCRIPT), "filename": "script.sh", "mediaType": "text/x-shellscript" },
            { "text": "sh script.sh" },
            { "data": { "outputs": ["report.txt", "absent.txt"] } },
        ],
    }});
    let (status, body) = post(&s, "/message:send", Some("1.0"), send).await;
    assert_eq!(status, 200, "{body}");
    let task = &task_in(&body);
    assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    let output = text(artifact(task, "output"));
    assert!(output.contains("from-script"), "{output}");
    let report = artifact(task, "file:report.txt");
    assert_eq!(report.filename.as_deref(), Some("report.txt"));
    assert_eq!(report.media_type.as_deref(), Some("text/plain"));
    assert_eq!(bytes(report), b"result-42\n");
    let said = task.status.message.as_ref().unwrap().text();
    assert!(
        said.contains("absent.txt"),
        "a missing output is named: {said}"
    );

    // The history keeps where the script went, not its bytes; the reference reads it back.
    let Content::Url(url) = &task.history[0].parts[0].content else {
        panic!("the history keeps bytes: {:?}", task.history[0]);
    };
    let sid = &task.context_id;
    assert!(
        url.ends_with(&format!("/sessions/{sid}/files/script.sh")),
        "{url}"
    );
    let script = s.http.get(url).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(script.text().await.unwrap(), SCRIPT);
    let (status, stored) = s
        .a2a(
            "GET",
            &format!("/agents/local/tasks/{}", task.id),
            ADMIN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{stored}");
    let stored = task_in(&stored);
    assert!(
        matches!(stored.history[0].parts[0].content, Content::Url(_)),
        "{stored:?}"
    );
}

#[tokio::test]
async fn a_file_part_runs_as_a_script_and_its_outputs_come_back_over_jsonrpc_0_3() {
    let s = TestServer::start(&[]).await;
    let params = json!({ "message": {
        "kind": "message", "messageId": "files-03", "role": "user",
        "parts": [
            { "kind": "file", "file": { "bytes": STANDARD.encode(SCRIPT), "name": "script.sh" } },
            { "kind": "text", "text": "sh script.sh" },
            { "kind": "data", "data": { "outputs": ["report.txt"] } },
        ],
    }});
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params });
    let (status, v) = post(&s, "/jsonrpc", None, body).await;
    assert_eq!(status, 200, "{v}");
    // Raw JSON on purpose: this pins the 0.3 part shapes.
    let task = &v["result"];
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let report = task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["artifactId"] == "file:report.txt")
        .map(|a| &a["parts"][0])
        .unwrap_or_else(|| panic!("no report: {task}"));
    assert_eq!(report["kind"], "file");
    assert_eq!(report["file"]["name"], "report.txt");
    assert_eq!(
        STANDARD
            .decode(report["file"]["bytes"].as_str().unwrap())
            .unwrap(),
        b"result-42\n"
    );
    let sent = &task["history"][0]["parts"][0]["file"];
    assert!(
        sent.get("bytes").is_none() && sent["uri"].is_string(),
        "{sent}"
    );
}

#[tokio::test]
async fn file_parts_that_would_leave_the_working_directory_or_need_a_fetch_are_refused() {
    let s = TestServer::start(&[]).await;
    let send = |part: Value| {
        json!({ "message": { "messageId": format!("bad-{part}"), "role": "ROLE_USER",
            "parts": [part, { "text": "true" }] } })
    };
    for (part, says) in [
        (json!({ "raw": "eA==", "filename": "../escape.sh" }), "`..`"),
        (
            json!({ "raw": "eA==", "filename": "/tmp/escape.sh" }),
            "relative",
        ),
        (json!({ "raw": "eA==" }), "filename"),
        (
            json!({ "url": "http://127.0.0.1:1/x", "filename": "x" }),
            "--fetch-file-urls",
        ),
    ] {
        let (status, body) = post(&s, "/message:send", Some("1.0"), send(part.clone())).await;
        assert_eq!(status, 400, "{part}: {body}");
        let refusal: StatusBody = serde_json::from_value(body).unwrap();
        let message = refusal.error.message;
        assert!(message.contains(says), "{part}: {message}");
    }
    assert!(!std::path::Path::new("/tmp/escape.sh").exists());
    let listed: SessionList = s.get_as("/sessions", ADMIN).await;
    assert_eq!(listed.sessions, [], "no session was started for them");
}

/// Serves `body` once over plain HTTP on a loopback port; its URL.
async fn serve_once(body: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = conn.read(&mut request).await;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(body.as_bytes()).await.unwrap();
    });
    format!("http://{addr}/input.txt")
}

#[tokio::test]
async fn with_fetch_file_urls_a_file_part_url_is_fetched_into_the_working_directory() {
    let s = TestServer::start(&["--fetch-file-urls"]).await;
    let url = serve_once("fetched-content\n").await;
    let send = json!({ "message": { "messageId": "fetch-1", "role": "ROLE_USER", "parts": [
        { "url": url, "filename": "in/input.txt" },
        { "text": "cat in/input.txt" },
    ] } });
    let (status, body) = post(&s, "/message:send", Some("1.0"), send).await;
    assert_eq!(status, 200, "{body}");
    let task = task_in(&body);
    let output = text(artifact(&task, "output"));
    assert!(output.contains("fetched-content"), "{output}");
    assert_eq!(task.history[0].parts[0].content, Content::Url(url));
}

#[tokio::test]
async fn a_file_part_sent_over_pty_ws_lands_in_the_attached_session() {
    let s = TestServer::start(&[]).await;
    let sid = s.create_session(json!({})).await.session_id;
    let mut c = s.attach(&sid, ADMIN).await;
    let send = json!({ "message": { "messageId": "ws-file", "role": "ROLE_USER", "parts": [
        { "raw": STANDARD.encode(SCRIPT), "filename": "script.sh" },
        { "text": "sh script.sh" },
        { "data": { "outputs": ["report.txt"] } },
    ] } });
    c.send("SendMessage", send).await;
    let task = task_of(&c.expect_op("SendMessage.Response").await);
    assert_eq!(task.context_id, sid);
    assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    assert_eq!(bytes(artifact(&task, "file:report.txt")), b"result-42\n");
}
