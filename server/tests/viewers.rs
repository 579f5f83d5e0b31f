//! Many viewers: a thousand idle binary observers join one session and leave, and the
//! session and the server hold nothing of them afterwards.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn after_a_thousand_idle_viewers_join_and_leave_no_viewer_or_connection_is_left() {
    const VIEWERS: usize = 1000;
    server::sys::raise_open_files_limit();
    let most = VIEWERS.to_string();
    let s = TestServer::start(&[
        "--max-observers",
        &most,
        "--max-connections-per-session",
        &most,
        "--rate-limit-connections",
        "100000",
    ])
    .await;
    let sid = s.command_session("exec cat").await;
    let mut viewers = Vec::with_capacity(VIEWERS);
    for _ in 0..VIEWERS {
        let mut c = Client::connect_binary(&s.ws_url(&sid), ADMIN).await;
        c.send(
            "pty.join_session",
            serde_json::json!({ "role": "observer" }),
        )
        .await;
        viewers.push(c);
    }
    let joined = s.wait_until(&sid, |v| v.observers == VIEWERS).await;
    assert_eq!(joined.observers, VIEWERS);
    assert_eq!(s.metric("ptyhost_pty_ws_connections").await, VIEWERS as u64);

    drop(viewers);
    let left = s.wait_until(&sid, |v| v.observers == 0).await;
    assert_eq!(left.controllers, 0);
    tokio::time::timeout(Duration::from_secs(20), async {
        while s.metric("ptyhost_pty_ws_connections").await != 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every connection is gone");
    // The session goes on serving: a new viewer joins and sees its screen.
    let mut late = s.attach(&sid, ADMIN).await;
    late.join("observer").await;
}
