//! A session as an asciicast v2 recording (`GET B/sessions/{sid}/recording.cast`, `ptyhost
//! session export`): its output, its resizes and its tasks' starts, played back by the real
//! asciinema with the very bytes the session printed.

mod common;

use common::*;
use serde_json::{Value, json};
use wire::SessionFrame;
use wire::control::FramePage;
use wire::server::ServerFrame;

/// The asciinema the test command installs (PyPI's `asciinema`, in the tests' virtualenv).
fn asciinema() -> std::path::PathBuf {
    let venv = std::env::var_os("PTYHOST_VENV").unwrap_or_else(|| "/var/cache/ptyhost/venv".into());
    std::path::Path::new(&venv).join("bin/asciinema")
}

async fn run_task(s: &TestServer, sid: &str, command: &str) {
    let body = json!({ "message": { "messageId": uuid::Uuid::now_v7().to_string(), "role": "ROLE_USER",
        "contextId": sid, "parts": [{ "text": command }] } });
    let req = s
        .http
        .post(s.url("/message:send"))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(body.to_string());
    let (status, answer) = s.call(req, ADMIN).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        task_in(&answer).status.state,
        TaskState::Completed,
        "{answer}"
    );
}

#[tokio::test]
async fn a_recording_has_the_output_resizes_and_task_starts_and_asciinema_plays_its_bytes() {
    let s = TestServer::start(&["--shell-pool", "0"]).await;
    let sid = s
        .create_session(json!({ "cols": 90, "rows": 20 }))
        .await
        .session_id;
    let mut controller = s.attach(&sid, ADMIN).await;
    controller.join("controller").await;
    run_task(&s, &sid, "printf 'héllo wörld ✓\\n'").await;
    controller
        .send("pty.session_resize", json!({ "cols": 100, "rows": 30 }))
        .await;
    controller.expect_kind("Resize").await;
    run_task(&s, &sid, "echo after-the-resize").await;
    let (status, _) = s.delete(&format!("/sessions/{sid}"), ADMIN).await;
    assert_eq!(status, 200);
    s.wait_closed(&sid).await;

    let resp = s
        .http
        .get(s.url(&format!("/sessions/{sid}/recording.cast")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-asciicast");
    let cast = resp.text().await.unwrap();
    // Raw JSON on purpose: this pins asciicast v2, which asciinema reads below.
    let mut lines = cast.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["version"], 2);
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(90), Some(20))
    );
    let events: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |code: &str| -> Vec<&Value> { events.iter().filter(|e| e[1] == code).collect() };
    assert_eq!(
        of("r")
            .iter()
            .map(|e| e[2].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["100x30"]
    );
    let markers: Vec<&str> = of("m").iter().map(|e| e[2].as_str().unwrap()).collect();
    assert_eq!(markers.len(), 2, "{markers:?}");
    assert!(
        markers[0].ends_with("printf 'héllo wörld ✓\\n'")
            && markers[1].ends_with("echo after-the-resize")
    );
    let times: Vec<f64> = events.iter().map(|e| e[0].as_f64().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "events in time order"
    );

    // The bytes the session printed, as its replay has them.
    let printed: Vec<u8> = s
        .replay_closed(&sid, 0)
        .await
        .iter()
        .filter(|f| kind(f) == "Output")
        .flat_map(output_bytes)
        .collect();
    let written: String = of("o").iter().map(|e| e[2].as_str().unwrap()).collect();
    assert_eq!(written.as_bytes(), &printed[..]);
    assert!(written.contains("héllo wörld ✓"));

    let file = s.dir.join("session.cast");
    let export = tokio::process::Command::new(bin())
        .args(["session", "export", &sid, "--out"])
        .arg(&file)
        .arg("--data-dir")
        .arg(&s.dir)
        .output()
        .await
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        cast,
        "the CLI writes the same recording"
    );
    let played = std::process::Command::new(asciinema())
        .arg("cat")
        .arg(&file)
        .output()
        .expect("asciinema runs (the test command installs it)");
    assert!(
        played.status.success(),
        "{}",
        String::from_utf8_lossy(&played.stderr)
    );
    assert_eq!(
        played.stdout, printed,
        "asciinema cat prints the session's bytes"
    );
}

#[tokio::test]
async fn frames_page_by_sequence_and_by_time_and_a_seek_starts_at_the_keyframe_before_it() {
    let s = TestServer::start(&["--keyframe-interval-frames", "5", "--shell-pool", "0"]).await;
    let sid = s
        .command_session("for i in $(seq 1 60); do echo line-$i; sleep 0.005; done")
        .await;
    s.wait_closed(&sid).await;
    let page = |query: String| {
        let s = &s;
        let sid = sid.clone();
        async move {
            s.get_as::<FramePage>(&format!("/sessions/{sid}/frames?{query}"), ADMIN)
                .await
        }
    };

    let first = page("after=0&limit=10".into()).await;
    let frames = &first.frames;
    assert_eq!(frames.len(), 10);
    let seqs: Vec<u64> = frames.iter().map(seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(first.next_after, Some(seqs[9]));
    let next = page(format!("after={}&limit=10", seqs[9])).await;
    assert!(seq(&next.frames[0]) > seqs[9]);

    // Every frame, then a seek by time into the middle, from its keyframe.
    let all = page("after=0".into()).await.frames;
    assert_eq!(all.last().map(kind), Some("Closed"));
    let middle = &all[all.len() / 2];
    let at = chrono_ms(&middle.ts);
    let seek = page(format!("at={at}&keyframe=true&limit=50")).await;
    let head = &seek.frames[0];
    assert_eq!(kind(head), "Keyframe", "{head:?}");
    assert!(seq(head) <= seq(middle));
    assert!(seek.frames.iter().any(|f| seq(f) == seq(middle)));

    // Before any keyframe, a seek starts at the first retained frame: only all of it paints
    // that screen.
    let early = all
        .iter()
        .take_while(|f| kind(f) != "Keyframe")
        .nth(1)
        .unwrap_or(&all[0]);
    let at = chrono_ms(&early.ts);
    let seek = page(format!("at={at}&keyframe=true&limit=5")).await;
    assert_eq!(seq(&seek.frames[0]), seq(&all[0]), "{seek:?}");

    // An observer of the session may page it; a token bound to another session sees nothing.
    let link = s.share(&sid, json!({})).await;
    let (status, _) = s
        .get(
            &format!("/sessions/{sid}/frames?after=0&limit=1"),
            &link.token,
        )
        .await;
    assert_eq!(status, 200);
    let other = s.command_session("true").await;
    let bound = s.token("pty:observe", Some(&other)).await;
    let (status, _) = s.get(&format!("/sessions/{sid}/frames"), &bound).await;
    assert_eq!(status, 404);
    let (status, _) = s
        .get(&format!("/sessions/{sid}/frames?after=1&at=2"), ADMIN)
        .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn frames_of_the_marked_kinds_page_the_joins_role_changes_and_resizes_in_order() {
    let s = TestServer::start(&["--shell-pool", "0"]).await;
    let sid = s.create_session(json!({})).await.session_id;
    let mut ops = s.attach(&sid, ADMIN).await;
    ops.join("observer").await;
    ops.send("pty.request_role", json!({ "role": "controller" }))
        .await;
    ops.expect_kind("RoleAssigned").await;
    ops.send("pty.session_resize", json!({ "cols": 100, "rows": 30 }))
        .await;
    ops.expect_kind("Resize").await;
    let mut link = s.attach(&sid, ADMIN).await;
    link.join("observer").await;
    let (status, _) = s.delete(&format!("/sessions/{sid}"), ADMIN).await;
    assert_eq!(status, 200);
    s.wait_closed(&sid).await;

    let marked = |query: &str| {
        let (s, sid, query) = (&s, sid.clone(), query.to_owned());
        async move {
            s.get_as::<FramePage>(&format!("/sessions/{sid}/frames?{query}"), ADMIN)
                .await
        }
    };
    let page = marked("after=0&kind=Resize,MembershipChanged").await;
    let frames = &page.frames;
    let kinds: Vec<&str> = frames.iter().map(kind).collect();
    assert!(
        kinds
            .iter()
            .all(|k| ["Resize", "MembershipChanged"].contains(k)),
        "{kinds:?}"
    );
    // The observer's join, its taking control, the resize, the second join, in that order.
    let members = |f: &ServerFrame| match session_frame(f) {
        Some(SessionFrame::MembershipChanged {
            controllers,
            observers,
        }) => (Some(controllers.len()), Some(observers.len())),
        _ => (None, None),
    };
    let story: Vec<(&str, Option<usize>, Option<usize>)> = frames
        .iter()
        .map(|f| {
            let (controllers, observers) = members(f);
            (kind(f), controllers, observers)
        })
        .collect();
    let expected = [
        ("MembershipChanged", Some(0), Some(1)),
        ("MembershipChanged", Some(1), Some(0)),
        ("Resize", None, None),
        ("MembershipChanged", Some(1), Some(1)),
    ];
    assert_eq!(&story[..4], &expected, "{story:?}");
    let seqs: Vec<u64> = frames.iter().map(seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // Pages of one frame walk the same list.
    let one = marked("after=0&kind=Resize,MembershipChanged&limit=1").await;
    assert_eq!(seq(&one.frames[0]), seqs[0]);
    let next = marked(&format!(
        "after={}&kind=Resize,MembershipChanged&limit=1",
        one.next_after.unwrap()
    ))
    .await;
    assert_eq!(seq(&next.frames[0]), seqs[1]);

    for bad in [
        "after=0&kind=Output",
        "after=0&kind=Resize,Nope",
        "kind=Resize&keyframe=true",
    ] {
        let (status, body) = s.get(&format!("/sessions/{sid}/frames?{bad}"), ADMIN).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

/// Unix ms of an RFC 3339 timestamp with milliseconds (`2026-12-01T12:00:00.123Z`).
fn chrono_ms(ts: &str) -> i64 {
    let t =
        time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).unwrap();
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}
