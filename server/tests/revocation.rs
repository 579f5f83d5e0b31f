//! A token stops working everywhere at once: revocation and expiry cut every open
//! connection it authenticated (pty-ws with an Error frame and close 4401, SSE streams with
//! an UNAUTHENTICATED error event), and each cut is an audit record.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use wire::control::{AuditDetail, AuditRecord, AuditRecords};
use wire::rpc::{JsonRpcResponse, Outcome};

/// The close code and the frames before it, and how long the close took from `since`.
async fn cut(client: &mut Client, since: Instant) -> (Option<u16>, Vec<Value>, Duration) {
    let (code, frames) = client.until_close().await;
    (code, frames, since.elapsed())
}

fn last_error_code(frames: &[Value]) -> Option<&'static str> {
    frames
        .iter()
        .rev()
        .find(|f| op_of(f) == "Error")
        .map(|f| error_of(f).code.as_str())
}

fn cut_of(connection: &str, reason: &str) -> AuditDetail {
    AuditDetail::Cut {
        connection: connection.into(),
        reason: reason.into(),
    }
}

async fn audit_cuts(s: &TestServer, sid: &str) -> Vec<AuditRecord> {
    tokio::time::timeout(WAIT, async {
        loop {
            let log: AuditRecords = s.get_as(&format!("/audit?session_id={sid}"), ADMIN).await;
            let cuts: Vec<AuditRecord> = log
                .records
                .into_iter()
                .filter(|r| r.event == "connection_cut")
                .collect();
            if !cuts.is_empty() {
                return cuts;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the cut is audited")
}

#[tokio::test]
async fn revoking_a_control_token_cuts_its_open_connection_with_4401_within_a_second() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let token = s.token("pty:control", None).await;
    let mut ctl = s.attach(&sid, &token).await;
    ctl.join("controller").await;
    let mut watcher = s.attach(&sid, ADMIN).await;
    watcher.join("observer").await;

    let list = s.token_cli(&["list"]).await;
    let id = list.lines().last().unwrap().split('\t').next().unwrap();
    s.token_cli(&["revoke", id]).await;
    let revoked = Instant::now();
    let (code, frames, took) = cut(&mut ctl, revoked).await;
    assert_eq!(code, Some(4401));
    assert_eq!(last_error_code(&frames), Some("UNAUTHENTICATED"));
    assert!(took < Duration::from_secs(1), "cut after {took:?}");

    // The session goes on for everyone else, and the cut names the token, never its value.
    // The controller role is free once the cut connection has left.
    loop {
        let id = watcher
            .send("pty.request_role", json!({ "role": "controller" }))
            .await;
        let answer = loop {
            let f = watcher.next().await;
            if kind(&f) == "RoleAssigned" || (op_of(&f) == "Error" && id_of(&f) == id) {
                break f;
            }
        };
        // Until the cut connection has left, the role is downgraded to observer.
        if kind(&answer) == "RoleAssigned" && role_of(&answer).0 == wire::Role::Controller {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    watcher.input("still here\n").await;
    watcher.output_until("still here").await;
    let cuts = audit_cuts(&s, &sid).await;
    assert_eq!(cuts[0].token_id.as_deref(), Some(id));
    assert_eq!(cuts[0].detail, cut_of("pty-ws", "revoked"));
    assert!(!format!("{:?}", cuts[0]).contains(&token));
}

#[tokio::test]
async fn an_expired_share_links_viewer_is_cut() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let link = s.share(&sid, json!({ "ttl_secs": 1 })).await;
    let mut viewer = s.attach(&sid, &link.token).await;
    viewer.join("observer").await;
    let (code, frames, took) = cut(&mut viewer, Instant::now()).await;
    assert_eq!(code, Some(4401));
    assert_eq!(last_error_code(&frames), Some("UNAUTHENTICATED"));
    assert!(took < Duration::from_secs(2), "cut after {took:?}");
    assert_eq!(
        audit_cuts(&s, &sid).await[0].detail,
        cut_of("pty-ws", "expired")
    );
}

#[tokio::test]
async fn revoking_a_share_link_disconnects_its_viewer() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let link = s.share(&sid, json!({})).await;
    let mut viewer = s.attach(&sid, &link.token).await;
    viewer.join("observer").await;
    let link_id = &link.id;
    let path = format!("/sessions/{sid}/share/{link_id}");
    assert_eq!(s.delete(&path, ADMIN).await.0, 204);
    let (code, _, took) = cut(&mut viewer, Instant::now()).await;
    assert_eq!(code, Some(4401));
    assert!(took < Duration::from_secs(1), "cut after {took:?}");
}

#[tokio::test]
async fn a_task_stream_ends_with_unauthenticated_when_its_token_is_revoked() {
    let s = TestServer::start(&[]).await;
    let token = s.token("pty:control", None).await;
    let list = s.token_cli(&["list"]).await;
    let id = list
        .lines()
        .last()
        .unwrap()
        .split('\t')
        .next()
        .unwrap()
        .to_owned();
    let body = json!({ "message": { "messageId": "m-long", "role": "ROLE_USER",
        "parts": [{ "text": "sleep 30" }] } });
    let rest = s
        .http
        .post(s.url("/message:stream"))
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send();
    let rpc_body = json!({ "jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage",
        "params": { "message": { "messageId": "m-long-rpc", "role": "ROLE_USER",
        "parts": [{ "text": "sleep 30" }] } } });
    let rpc = s
        .http
        .post(s.url("/jsonrpc"))
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(rpc_body.to_string())
        .send();
    let (rest, rpc) = tokio::join!(rest, rpc);
    let (rest, rpc) = (rest.unwrap(), rpc.unwrap());
    assert_eq!((rest.status().as_u16(), rpc.status().as_u16()), (200, 200));
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.token_cli(&["revoke", &id]).await;
    let revoked = Instant::now();
    let (rest, rpc) = tokio::time::timeout(WAIT, async { tokio::join!(rest.text(), rpc.text()) })
        .await
        .expect("both streams end");
    assert!(
        revoked.elapsed() < Duration::from_secs(1),
        "{:?}",
        revoked.elapsed()
    );
    let rest = rest.unwrap();
    let last = rest.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: error"), "{rest}");
    assert!(last.contains("UNAUTHENTICATED"), "{last}");
    let rpc = rpc.unwrap();
    let last = rpc.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: error"), "{rpc}");
    let data: JsonRpcResponse<Value> =
        serde_json::from_str(last.split_once("data: ").unwrap().1.trim()).unwrap();
    assert_eq!(data.id, json!(7));
    assert!(
        matches!(&data.outcome, Outcome::Error(e) if e.code == -32000),
        "{data:?}"
    );
}
