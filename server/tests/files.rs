//! Files in and out of a session over `PUT|GET|DELETE B/sessions/{sid}/files/{path}`:
//! streamed both ways, held beneath the session's working directory, refused in
//! google.rpc.Status terms, audited.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wire::control::{AuditRecords, FileCreated, FileKind, FileList};
use wire::rpc::{RpcStatus, StatusBody};

/// A session started in a fresh directory under the test's data dir.
async fn session_in(s: &TestServer, name: &str) -> (String, PathBuf) {
    let dir = s.dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let v = s
        .create_session(json!({ "command": "sleep 600", "cwd": dir }))
        .await;
    (v.session_id, dir)
}

fn files_url(s: &TestServer, sid: &str, path: &str) -> String {
    s.url(&format!("/sessions/{sid}/files/{path}"))
}

async fn put(s: &TestServer, sid: &str, path: &str, token: &str, body: Vec<u8>) -> (u16, Value) {
    let r = s.http.put(files_url(s, sid, path)).body(body);
    s.call(r, token).await
}

async fn get_bytes(s: &TestServer, sid: &str, path: &str, token: &str) -> (u16, Vec<u8>) {
    let r = s
        .http
        .get(files_url(s, sid, path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// A refusal's google.rpc.Status.
fn refusal(body: &Value) -> RpcStatus {
    serde_json::from_value::<StatusBody>(body.clone())
        .unwrap_or_else(|e| panic!("not a google.rpc.Status ({e}): {body}"))
        .error
}

/// The google.rpc.Status reason of a refusal.
fn reason(body: &Value) -> String {
    refusal(body).details[0].reason.clone()
}

/// Deterministic bytes that do not compress: chunk `i` of a xorshift stream.
fn chunk(i: u64, len: usize) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len / 8)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect()
}

fn entries(list: &FileList) -> Vec<&str> {
    list.entries.iter().map(|e| e.name.as_str()).collect()
}

#[tokio::test]
async fn a_100_mib_file_round_trips_byte_for_byte_streamed_in_bounded_memory() {
    const CHUNK: usize = 1 << 20;
    const CHUNKS: u64 = 100;
    let s = TestServer::start(&[]).await;
    let (sid, dir) = session_in(&s, "work").await;
    let before = s.rss_mib();

    let mut sent = Sha256::new();
    for i in 0..CHUNKS {
        sent.update(chunk(i, CHUNK));
    }
    let body =
        futures_util::stream::iter(0..CHUNKS).map(|i| Ok::<_, std::io::Error>(chunk(i, CHUNK)));
    let put = s
        .http
        .put(files_url(&s, &sid, "data/big.bin"))
        .bearer_auth(ADMIN)
        .body(reqwest::Body::wrap_stream(body))
        .send();
    let mut peak = before;
    let resp = tokio::select! {
        r = put => r.unwrap(),
        _ = async { loop {
            peak = peak.max(s.rss_mib());
            tokio::time::sleep(Duration::from_millis(20)).await;
        } } => unreachable!(),
    };
    assert_eq!(resp.status(), 201);
    let created: FileCreated = resp.json().await.unwrap();
    assert_eq!(created.size, CHUNK as u64 * CHUNKS);
    assert_eq!(
        std::fs::metadata(dir.join("data/big.bin")).unwrap().len(),
        CHUNK as u64 * CHUNKS
    );

    let resp = s
        .http
        .get(files_url(&s, &sid, "data/big.bin"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut got = Sha256::new();
    let mut stream = resp.bytes_stream();
    let mut len = 0;
    loop {
        let next = tokio::select! {
            c = stream.next() => c,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                peak = peak.max(s.rss_mib());
                continue;
            }
        };
        let Some(c) = next else { break };
        let c = c.unwrap();
        len += c.len();
        got.update(&c);
    }
    assert_eq!(len as u64, CHUNK as u64 * CHUNKS);
    assert_eq!(got.finalize(), sent.finalize(), "the bytes that came back");
    assert!(
        peak - before < 64.0,
        "a 100 MiB round trip grew the server from {before:.0} to {peak:.0} MiB"
    );
}

#[tokio::test]
async fn reads_list_directories_answer_ranges_and_revalidate_by_etag_and_deletes_remove() {
    let s = TestServer::start(&[]).await;
    let (sid, dir) = session_in(&s, "work").await;
    let (status, _) = put(&s, &sid, "notes/a.txt", ADMIN, b"0123456789".to_vec()).await;
    assert_eq!(status, 201);
    let (status, _) = put(&s, &sid, "notes/a.txt", ADMIN, b"abcdefghij".to_vec()).await;
    assert_eq!(status, 204, "a replaced file");
    std::fs::create_dir(dir.join("notes/sub")).unwrap();

    let list: FileList = s
        .get_as(&format!("/sessions/{sid}/files/notes"), ADMIN)
        .await;
    assert_eq!(entries(&list), ["a.txt", "sub"]);
    let a = &list.entries[0];
    assert_eq!((a.size, a.kind), (10, FileKind::File));
    assert_eq!(a.mode & 0o600, 0o600);
    assert!(a.mtime.ends_with('Z'));
    assert_eq!(list.entries[1].kind, FileKind::Dir);
    let root: FileList = s.get_as(&format!("/sessions/{sid}/files"), ADMIN).await;
    assert_eq!(entries(&root), ["notes"]);

    let url = files_url(&s, &sid, "notes/a.txt");
    let r = s
        .http
        .get(&url)
        .bearer_auth(ADMIN)
        .header("range", "bytes=2-4")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.headers()["content-range"], "bytes 2-4/10");
    let etag = r.headers()["etag"].clone();
    assert_eq!(&r.bytes().await.unwrap()[..], b"cde");
    let r = s
        .http
        .get(&url)
        .bearer_auth(ADMIN)
        .header("if-none-match", etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    let r = s
        .http
        .get(&url)
        .bearer_auth(ADMIN)
        .header("range", "bytes=20-30")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);

    let (status, _) = s
        .delete(&format!("/sessions/{sid}/files/notes/a.txt"), ADMIN)
        .await;
    assert_eq!(status, 204);
    assert!(!dir.join("notes/a.txt").exists());
    let (status, body) = s
        .get(&format!("/sessions/{sid}/files/notes/a.txt"), ADMIN)
        .await;
    assert_eq!((status, refusal(&body).status.as_str()), (404, "NOT_FOUND"));
    let (status, body) = s
        .delete(&format!("/sessions/{sid}/files/notes/sub"), ADMIN)
        .await;
    assert_eq!((status, reason(&body).as_str()), (400, "IS_A_DIRECTORY"));

    let log: AuditRecords = s.get_as(&format!("/audit?session_id={sid}"), ADMIN).await;
    let events: Vec<&str> = log
        .records
        .iter()
        .map(|r| r.event.as_str())
        .filter(|e| e.starts_with("file_"))
        .collect();
    for e in ["file_written", "file_read", "file_deleted"] {
        assert!(events.contains(&e), "{e} is audited: {events:?}");
    }
}

#[tokio::test]
async fn the_working_directory_follows_the_shell_as_it_changes_directory() {
    let s = TestServer::start(&[]).await;
    let home = s.dir.join("home-dir");
    std::fs::create_dir_all(home.join("inner")).unwrap();
    let sid = s.create_session(json!({ "cwd": home })).await.session_id;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    c.input("cd inner && echo moved-$((6*7))\n").await;
    c.output_until("moved-42").await;
    let (status, _) = put(&s, &sid, "here.txt", ADMIN, b"x".to_vec()).await;
    assert_eq!(status, 201);
    assert!(home.join("inner/here.txt").is_file());
}

#[tokio::test]
async fn every_escape_from_the_working_directory_is_refused_and_touches_nothing_outside() {
    let s = TestServer::start(&[]).await;
    let (sid, dir) = session_in(&s, "work").await;
    let outside = s.dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("etc")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();

    for (path, status, why) in [
        ("..%2Foutside%2Fplanted", 400, "INVALID_PATH"),
        ("a/..%2F..%2Fplanted", 400, "INVALID_PATH"),
        ("%2Ftmp%2Fplanted", 400, "INVALID_PATH"),
        ("etc/planted", 403, "PERMISSION_DENIED"),
        ("out/planted", 403, "PERMISSION_DENIED"),
    ] {
        let (got, body) = put(&s, &sid, path, ADMIN, b"x".to_vec()).await;
        assert_eq!(
            (got, reason(&body).as_str()),
            (status, why),
            "PUT {path}: {body}"
        );
        assert_eq!(refusal(&body).code, status, "a google.rpc.Status");
    }
    let (status, body) = s
        .get(&format!("/sessions/{sid}/files/etc/passwd"), ADMIN)
        .await;
    assert_eq!((status, reason(&body).as_str()), (403, "PERMISSION_DENIED"));
    let (status, _) = s.get(&format!("/sessions/{sid}/files/out"), ADMIN).await;
    assert_eq!(status, 403);
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert!(!Path::new("/tmp/planted").exists());
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_mid_upload_does_not_redirect_the_upload() {
    let s = TestServer::start(&[]).await;
    let (sid, dir) = session_in(&s, "work").await;
    let outside = s.dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();

    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let upload = s
        .http
        .put(files_url(&s, &sid, "sub/file"))
        .bearer_auth(ADMIN)
        .body(reqwest::Body::wrap_stream(futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|c| (c, rx)) },
        )))
        .send();
    let swap = async {
        tx.send(Ok(b"first half ".to_vec())).await.unwrap();
        // The upload has resolved `sub` once its hidden file is there.
        while std::fs::read_dir(dir.join("sub")).unwrap().count() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        std::fs::rename(dir.join("sub"), dir.join("sub.orig")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("sub")).unwrap();
        tx.send(Ok(b"second half".to_vec())).await.unwrap();
        drop(tx);
    };
    let (resp, ()) = tokio::join!(upload, swap);
    assert_eq!(resp.unwrap().status(), 201);
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing outside"
    );
    assert_eq!(
        std::fs::read(dir.join("sub.orig/file")).unwrap(),
        b"first half second half"
    );
}

#[tokio::test]
async fn observers_never_write_and_read_only_when_downloads_are_allowed_to_them() {
    for allowed in [false, true] {
        let flags: &[&str] = if allowed {
            &["--observer-downloads"]
        } else {
            &[]
        };
        let s = TestServer::start(flags).await;
        let (sid, dir) = session_in(&s, "work").await;
        std::fs::write(dir.join("result.txt"), "42").unwrap();
        let link = s.share(&sid, json!({})).await;
        let observer = &link.token;

        let (status, body) = put(&s, &sid, "planted", observer, b"x".to_vec()).await;
        assert_eq!((status, reason(&body).as_str()), (403, "PERMISSION_DENIED"));
        let (status, _) = s
            .delete(&format!("/sessions/{sid}/files/result.txt"), observer)
            .await;
        assert_eq!(status, 403);
        assert!(!dir.join("planted").exists() && dir.join("result.txt").exists());
        let (status, bytes) = get_bytes(&s, &sid, "result.txt", observer).await;
        match allowed {
            true => assert_eq!((status, &bytes[..]), (200, &b"42"[..])),
            false => assert_eq!(status, 403),
        }
    }
}

#[tokio::test]
async fn a_revoked_token_a_foreign_session_and_an_oversized_file_are_refused() {
    let s = TestServer::start(&["--max-file-bytes", "1KiB"]).await;
    let (sid, dir) = session_in(&s, "work").await;
    let (other, _) = session_in(&s, "other").await;

    let (status, body) = put(&s, &sid, "big", ADMIN, vec![b'x'; 2048]).await;
    assert_eq!((status, reason(&body).as_str()), (413, "FILE_TOO_LARGE"));
    let stream = futures_util::stream::iter([Ok::<_, std::io::Error>(vec![b'x'; 2048])]);
    let r = s
        .http
        .put(files_url(&s, &sid, "streamed"))
        .bearer_auth(ADMIN)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        413,
        "a body without a length is counted as it streams"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing is left behind"
    );

    let bound = s.token("pty:control", Some(&sid)).await;
    let (status, body) = put(&s, &other, "x", &bound, b"x".to_vec()).await;
    assert_eq!((status, refusal(&body).status.as_str()), (404, "NOT_FOUND"));

    let token = s.token("pty:control", None).await;
    assert_eq!(put(&s, &sid, "ok", &token, b"x".to_vec()).await.0, 201);
    let list = s.token_cli(&["list"]).await;
    let id = list.lines().last().unwrap().split('\t').next().unwrap();
    s.token_cli(&["revoke", id]).await;
    s.until_refused(&token).await;
    let (status, body) = put(&s, &sid, "after", &token, b"x".to_vec()).await;
    assert_eq!(
        (status, refusal(&body).status.as_str()),
        (401, "UNAUTHENTICATED")
    );
    assert!(!dir.join("after").exists());
}

/// Runs `ptyhost files ARGS` against the server with the admin token, `stdin` piped in.
async fn files_cli(s: &TestServer, args: &[&str], stdin: &[u8]) -> std::process::Output {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(bin())
        .arg("files")
        .args(args)
        .args(["--url", &s.url(""), "--token", ADMIN])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

#[tokio::test]
async fn the_files_command_puts_lists_gets_and_removes_over_the_routes() {
    let s = TestServer::start(&[]).await;
    let (sid, dir) = session_in(&s, "work").await;
    let out = files_cli(&s, &["put", &sid, "in dir/hello.txt"], b"hello\n").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(dir.join("in dir/hello.txt")).unwrap(),
        b"hello\n"
    );

    let out = files_cli(&s, &["ls", &sid], b"").await;
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(listing.trim_end().ends_with("\tin dir/"), "{listing}");
    let out = files_cli(&s, &["get", &sid, "in dir/hello.txt"], b"").await;
    assert_eq!(out.stdout, b"hello\n");

    let out = files_cli(&s, &["get", &sid, "../etc/passwd"], b"").await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`..` is not allowed"), "{err}");
    let out = files_cli(&s, &["get", &sid, "missing.txt"], b"").await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("404 NOT_FOUND"), "{err}");

    let out = files_cli(&s, &["rm", &sid, "in dir/hello.txt"], b"").await;
    assert!(out.status.success());
    assert!(!dir.join("in dir/hello.txt").exists());
}
