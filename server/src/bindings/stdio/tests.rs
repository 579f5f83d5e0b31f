use super::*;
use serde_json::json;

async fn read_all(input: &[u8]) -> Vec<Incoming> {
    let mut r = FrameReader::new(input, 64);
    let mut got = Vec::new();
    loop {
        let next = r.next().await;
        let stop = !matches!(next, Incoming::Frame(_));
        got.push(next);
        if stop {
            return got;
        }
    }
}

#[tokio::test]
async fn frames_are_read_with_strict_headers() {
    let two = b"Content-Length: 2\r\n\r\n{}content-length:3\r\nX-Other: y\r\n\r\n[1]";
    assert_eq!(
        read_all(two).await,
        [
            Incoming::Frame(b"{}".to_vec()),
            Incoming::Frame(b"[1]".to_vec()),
            Incoming::Eof
        ]
    );
    for bad in [
        &b"Content-Length : 2\r\n\r\n{}"[..],
        b"Content-Length: 2\r\n x\r\n\r\n{}",
        b"Content-Length: 2\n\n{}",
        b"Content-Length: -2\r\n\r\n{}",
        b"X: y\r\n\r\n{}",
        b"Content-Length: 5\r\n\r\n{}",
        b"Content-Length: 2\r\n",
    ] {
        let got = read_all(bad).await;
        assert!(
            matches!(got.last(), Some(Incoming::Malformed(_))),
            "{:?}: {got:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(
        read_all(b"Content-Length: 65\r\n\r\n").await,
        [Incoming::TooLarge(65)]
    );
}

#[test]
fn service_params_come_from_a2a_sp_variables() {
    let p = service_params(
        [
            ("A2A_SP_A2A_EXTENSIONS".to_owned(), "a, b ,c".to_owned()),
            ("A2A_SESSION_ID".to_owned(), "s".to_owned()),
        ]
        .into_iter(),
    );
    assert_eq!(
        Value::Object(p),
        json!({ "a2a-extensions": ["a", "b", "c"] })
    );
}

#[test]
fn tasks_messages_and_artifacts_are_stamped_once_status_updates_are_not() {
    let mark = json!({ "sessionId": "s" });
    let mut v = json!({
        "statusUpdate": { "taskId": "t", "contextId": "c", "status": { "state": "TASK_STATE_WORKING",
            "message": { "messageId": "m", "role": "ROLE_AGENT", "parts": [] } } },
        "task": { "id": "t", "contextId": "c", "status": {}, "history": [{ "messageId": "u", "role": "ROLE_USER", "parts": [],
            "metadata": { (METADATA_KEY): { "sessionId": "earlier" } } }],
            "artifacts": [{ "artifactId": "a", "parts": [] }] },
    });
    stamp(&mut v, &mark);
    assert!(v["statusUpdate"].get("metadata").is_none());
    assert_eq!(
        v["statusUpdate"]["status"]["message"]["metadata"][METADATA_KEY],
        mark
    );
    assert_eq!(v["task"]["metadata"][METADATA_KEY], mark);
    assert_eq!(v["task"]["artifacts"][0]["metadata"][METADATA_KEY], mark);
    assert_eq!(
        v["task"]["history"][0]["metadata"][METADATA_KEY]["sessionId"],
        "earlier"
    );
}
