//! pty-extensions/v1 §9 conformance scenarios, one test each, against the real server.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn kinds(frames: &[serde_json::Value]) -> Vec<&str> {
    frames.iter().map(kind).collect()
}

#[tokio::test]
async fn ext_scenario_1_single_controller_join_input_output_resize_leave() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let init = c.join("controller").await;
    assert_eq!(
        kinds(&init),
        ["RoleAssigned", "MembershipChanged", "Keyframe"]
    );
    let me = init[0]["payload"]["client_id"].as_str().unwrap().to_owned();
    assert_eq!(init[0]["payload"]["role"], "controller");
    assert_eq!(
        init[1]["payload"]["controllers"][0]["client_id"],
        me.as_str()
    );
    assert!(seq(&init[0]) < seq(&init[1]) && seq(&init[1]) < seq(&init[2]));
    assert_eq!(
        init[2]["payload"]["anchor_sequence"].as_u64(),
        Some(seq(&init[2]) - 1)
    );
    assert_eq!(
        init[2]["payload"]["snapshot_format"],
        "vt100-screen-state-v1"
    );

    c.input("hello pty\n").await;
    c.output_until("hello pty").await;

    c.send("pty.session_resize", json!({ "cols": 100, "rows": 30 }))
        .await;
    let r = c.expect_kind("Resize").await;
    assert_eq!(
        (r["payload"]["cols"].as_u64(), r["payload"]["rows"].as_u64()),
        (Some(100), Some(30))
    );
    let view = s.session(&sid).await;
    assert_eq!(
        (view["cols"].as_u64(), view["rows"].as_u64()),
        (Some(100), Some(30))
    );

    c.send("pty.leave_session", json!({})).await;
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1000));
    let last = frames
        .iter()
        .rev()
        .find(|f| kind(f) == "MembershipChanged")
        .unwrap();
    assert_eq!(last["payload"]["controllers"], json!([]));
    assert_eq!(
        s.session(&sid).await["state"],
        "running",
        "the session survives a leave"
    );
}

#[tokio::test]
async fn ext_scenario_2_observer_input_is_refused_with_permission_denied() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut ctl = s.attach(&sid, ADMIN).await;
    ctl.join("controller").await;
    let mut obs = s.attach(&sid, ADMIN).await;
    obs.join("observer").await;

    let id = obs.input("FORBIDDEN\n").await;
    let e = obs.expect_op("Error").await;
    assert_eq!(e["id"], id.as_str());
    assert_eq!(e["payload"]["code"], "PERMISSION_DENIED");
    assert_eq!(e["payload"]["a2a_error"]["status"], "PERMISSION_DENIED");
    let id = obs
        .send("pty.session_resize", json!({ "cols": 10, "rows": 10 }))
        .await;
    let e = obs.expect_op("Error").await;
    assert_eq!(
        (e["id"].as_str(), e["payload"]["code"].as_str()),
        (Some(id.as_str()), Some("PERMISSION_DENIED"))
    );

    ctl.input("allowed\n").await;
    let frames = ctl.output_until("allowed").await;
    let text = output_text(&frames);
    assert!(
        !text.contains("FORBIDDEN"),
        "observer input reached the PTY: {text:?}"
    );
}

#[tokio::test]
async fn ext_scenario_3_capacity_downgrade_makes_the_extra_controller_an_observer() {
    let s = TestServer::start(&["--max-controllers", "1"]).await;
    let sid = cat_session(&s).await;
    let mut first = s.attach(&sid, ADMIN).await;
    assert_eq!(
        first.join("controller").await[0]["payload"]["role"],
        "controller"
    );

    let mut second = s.attach(&sid, ADMIN).await;
    let init = second.join("controller").await;
    let assigned = &init[0]["payload"];
    assert_eq!(assigned["kind"], "RoleAssigned");
    assert_eq!(assigned["role"], "observer");
    assert_eq!(assigned["downgraded"], true);
    assert!(assigned["reason"].as_str().unwrap().contains("capacity"));

    // A promotion request while the role is held is downgraded the same way.
    second
        .send("pty.request_role", json!({ "role": "controller" }))
        .await;
    let again = second.expect_kind("RoleAssigned").await;
    assert_eq!(
        (
            again["payload"]["role"].as_str(),
            again["payload"]["downgraded"].as_bool()
        ),
        (Some("observer"), Some(true))
    );

    // Once the first releases it, the second can take it.
    first.send("pty.release_role", json!({})).await;
    assert_eq!(
        first.expect_kind("RoleAssigned").await["payload"]["role"],
        "observer"
    );
    second
        .send("pty.request_role", json!({ "role": "controller" }))
        .await;
    let granted = second.expect_kind("RoleAssigned").await;
    assert_eq!(granted["payload"]["role"], "controller");
    assert!(granted["payload"].get("downgraded").is_none());
    second.input("now mine\n").await;
    second.output_until("now mine").await;
}

#[tokio::test]
async fn ext_scenario_4_membership_is_broadcast_on_every_join_and_leave() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut a = s.attach(&sid, ADMIN).await;
    a.join_with(
        json!({ "role": "controller", "client_label": "alice" }),
        json!({}),
    )
    .await;
    let mut b = s.attach(&sid, ADMIN).await;
    let b_init = b
        .join_with(
            json!({ "role": "observer", "client_label": "bob" }),
            json!({}),
        )
        .await;
    let b_id = b_init[0]["payload"]["client_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let m = a.expect_kind("MembershipChanged").await;
    assert_eq!(m["payload"]["controllers"][0]["label"], "alice");
    assert_eq!(m["payload"]["observers"][0]["label"], "bob");

    let mut c = s.attach(&sid, ADMIN).await;
    c.join("observer").await;
    for client in [&mut a, &mut b] {
        let m = client.expect_kind("MembershipChanged").await;
        assert_eq!(m["payload"]["observers"].as_array().unwrap().len(), 2);
    }

    b.send("pty.leave_session", json!({})).await;
    b.until_close().await;
    for client in [&mut a, &mut c] {
        let m = client.expect_kind("MembershipChanged").await;
        let observers = m["payload"]["observers"].as_array().unwrap();
        assert_eq!(observers.len(), 1);
        assert_ne!(observers[0]["client_id"], b_id.as_str());
    }

    drop(c); // a dropped connection is a leave too
    let m = a.expect_kind("MembershipChanged").await;
    assert_eq!(m["payload"]["observers"], json!([]));
    assert_eq!(m["payload"]["controllers"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn ext_scenario_5_mid_session_observer_join_gets_role_membership_keyframe_then_live() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut ctl = s.attach(&sid, ADMIN).await;
    ctl.join("controller").await;
    ctl.input("before the observer\n").await;
    ctl.output_until("before the observer").await;

    let mut obs = s.attach(&sid, ADMIN).await;
    let init = obs.join("observer").await;
    assert_eq!(
        kinds(&init),
        ["RoleAssigned", "MembershipChanged", "Keyframe"]
    );
    let keyframe = &init[2];
    assert!(keyframe["payload"]["anchor_sequence"].as_u64().unwrap() > 0);
    assert!(String::from_utf8_lossy(&snapshot(keyframe)).contains("before the observer"));

    ctl.input("live line\n").await;
    let frames = obs.output_until("live line").await;
    assert!(frames.iter().all(|f| seq(f) > seq(keyframe)));
}

#[tokio::test]
async fn ext_scenario_6_replay_within_window_sends_missed_frames_then_keyframe_then_live() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut first = s.attach(&sid, ADMIN).await;
    first.join("controller").await;
    first.input("one\n").await;
    let seen = first.output_until("one\r\none").await;
    let n = seq(seen.last().unwrap());
    drop(first);
    // The server notices the dropped socket and releases its role.
    s.wait_until(&sid, |v| v["controllers"] == 0).await;

    let mut other = s.attach(&sid, ADMIN).await;
    // The dropped controller's role is released, so this joiner gets it.
    assert_eq!(
        other.join("controller").await[0]["payload"]["role"],
        "controller"
    );
    other.input("two\n").await;
    other.output_until("two\r\ntwo").await;

    let mut back = s.attach(&sid, ADMIN).await;
    let init = back
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": n }))
        .await;
    assert_eq!(kind(&init[0]), "RoleAssigned");
    let replayed = &init[1..init.len() - 2];
    assert_eq!(
        kinds(&init[init.len() - 2..]),
        ["Keyframe", "MembershipChanged"]
    );
    assert!(!replayed.is_empty());
    assert!(
        replayed.windows(2).all(|w| seq(&w[0]) < seq(&w[1])),
        "in order"
    );
    assert!(
        replayed
            .iter()
            .all(|f| seq(f) > n && seq(f) < seq(&init[0]))
    );
    let text = output_text(replayed);
    assert!(
        text.contains("two\r\ntwo"),
        "missed output replayed: {text:?}"
    );
    assert!(
        !text.contains("one"),
        "nothing at or before replay_from: {text:?}"
    );

    other.input("three\n").await;
    back.output_until("three").await;

    // §8.4: the cursor is bound to the session, so another client gets the same frames.
    let mut twin = s.attach(&sid, ADMIN).await;
    let twin_init = twin
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": n }))
        .await;
    assert_eq!(&twin_init[1..1 + replayed.len()], replayed);
}

#[tokio::test]
async fn ext_scenario_7_replay_out_of_range_sends_error_then_keyframe() {
    let s = TestServer::start(&["--replay-frames", "5", "--replay-retention", "0"]).await;
    let sid = cat_session(&s).await;
    let mut ctl = s.attach(&sid, ADMIN).await;
    ctl.join("controller").await;
    for i in 0..30 {
        ctl.input(&format!("line {i}\n")).await;
        ctl.output_until(&format!("line {i}\r\nline {i}")).await;
    }
    s.wait_until(&sid, |v| v["replay_floor"].as_u64() > Some(1))
        .await;
    let mut late = s.attach(&sid, ADMIN).await;
    let init = late
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": 1 }))
        .await;
    assert_eq!(kind(&init[0]), "RoleAssigned");
    assert_eq!(init[1]["op"], "Error");
    assert_eq!(init[1]["payload"]["code"], "REPLAY_OUT_OF_RANGE");
    assert!(
        init[1]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("frames after sequence")
    );
    assert_eq!(kind(&init[2]), "Keyframe");
    assert!(String::from_utf8_lossy(&snapshot(&init[2])).contains("line 29"));

    // A cursor beyond the current sequence is out of range as well.
    let mut future = s.attach(&sid, ADMIN).await;
    let init = future
        .join_with(
            json!({ "role": "observer" }),
            json!({ "replay_from": 1_000_000 }),
        )
        .await;
    assert_eq!(init[1]["payload"]["code"], "REPLAY_OUT_OF_RANGE");
    assert_eq!(kind(&init[2]), "Keyframe");
}

#[tokio::test]
async fn ext_scenario_8_keyframe_cadence_under_sustained_output() {
    // By frames: never more than N Output frames between keyframes.
    let s = TestServer::start(&[
        "--keyframe-interval-frames",
        "5",
        "--keyframe-interval-secs",
        "60",
    ])
    .await;
    let sid = s
        .command_session(
            "sleep 0.5; for i in $(seq 1 60); do echo tick $i; sleep 0.02; done; sleep 30",
        )
        .await;
    let mut obs = s.attach(&sid, ADMIN).await;
    obs.join("observer").await;
    let frames = obs.output_until("tick 60").await;
    let mut since = 0;
    let mut keyframes = 0;
    for f in &frames {
        match kind(f) {
            "Output" => {
                since += 1;
                assert!(since <= 5, "more than 5 Output frames without a keyframe");
            }
            "Keyframe" => {
                assert_eq!(since, 5, "keyframe after exactly the frame bound");
                since = 0;
                keyframes += 1;
            }
            _ => {}
        }
    }
    assert!(
        keyframes >= 2,
        "keyframes under sustained output: {keyframes}"
    );

    // By seconds: slow output still gets a keyframe about every interval.
    let s = TestServer::start(&[
        "--keyframe-interval-frames",
        "1000",
        "--keyframe-interval-secs",
        "1",
    ])
    .await;
    let sid = s
        .command_session("while true; do echo slow; sleep 0.2; done")
        .await;
    let mut obs = s.attach(&sid, ADMIN).await;
    obs.join("observer").await;
    let start = Instant::now();
    let mut stamps = Vec::new();
    while stamps.len() < 3 {
        obs.expect_kind("Keyframe").await;
        stamps.push(start.elapsed());
    }
    for w in stamps.windows(2) {
        let gap = w[1] - w[0];
        assert!(
            gap <= Duration::from_millis(2100),
            "keyframe gap {gap:?} exceeds the 1 s cadence"
        );
    }
}

#[tokio::test]
async fn ext_scenario_9_resize_is_broadcast_to_every_client() {
    let s = TestServer::start(&[]).await;
    // Each line typed makes the program print its terminal's size.
    let sid = s.command_session("while read l; do stty size; done").await;
    let mut ctl = s.attach(&sid, ADMIN).await;
    ctl.join("controller").await;
    let mut o1 = s.attach(&sid, ADMIN).await;
    o1.join("observer").await;
    let mut o2 = s.attach(&sid, ADMIN).await;
    o2.join("observer").await;

    ctl.send("pty.session_resize", json!({ "cols": 132, "rows": 43 }))
        .await;
    let mut seen = Vec::new();
    for c in [&mut ctl, &mut o1, &mut o2] {
        let r = c.expect_kind("Resize").await;
        assert_eq!(
            (r["payload"]["cols"].as_u64(), r["payload"]["rows"].as_u64()),
            (Some(132), Some(43))
        );
        seen.push(seq(&r));
    }
    assert!(
        seen.iter().all(|s| *s == seen[0]),
        "one frame, one sequence: {seen:?}"
    );
    // The program's terminal has the new size, and so has the emulator behind keyframes.
    ctl.input("\n").await;
    o1.output_until("43 132").await;
    let mut sized = s.attach(&sid, ADMIN).await;
    let init = sized.join("observer").await;
    assert_eq!(init[2]["payload"]["snapshot_cols"], 132);
}

/// Reads every frame up to the close and checks there was exactly one `Closed`.
async fn exactly_one_closed(c: &mut Client) -> serde_json::Value {
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1000));
    let closed: Vec<_> = frames.iter().filter(|f| kind(f) == "Closed").collect();
    assert_eq!(closed.len(), 1, "exactly one Closed: {frames:?}");
    let i = frames.iter().position(|f| kind(f) == "Closed").unwrap();
    assert!(
        frames[i + 1..]
            .iter()
            .all(|f| !matches!(kind(f), "Output" | "Resize"))
    );
    assert_eq!(frames.last().unwrap()["op"], "binding_goodbye");
    closed[0].clone()
}

/// A late joiner's replay of the whole session holds the same single `Closed`.
async fn closed_is_retained(s: &TestServer, sid: &str, closed: &serde_json::Value) {
    let mut late = s.attach(sid, ADMIN).await;
    late.send_env(
        "pty.join_session",
        json!({ "role": "observer" }),
        json!({ "replay_from": 0 }),
    )
    .await;
    let (_, frames) = late.until_close().await;
    let replayed: Vec<_> = frames.iter().filter(|f| kind(f) == "Closed").collect();
    assert_eq!(replayed, vec![closed], "all frames: {frames:?}");
}

#[tokio::test]
async fn observer_capacity_is_enforced_and_frees_up_when_one_leaves() {
    let s = TestServer::start(&["--max-observers", "1"]).await;
    let sid = cat_session(&s).await;
    let mut first = s.attach(&sid, ADMIN).await;
    first.join("observer").await;
    let mut second = s.attach(&sid, ADMIN).await;
    let id = second
        .send("pty.join_session", json!({ "role": "observer" }))
        .await;
    let e = second.next().await;
    assert_eq!(
        (e["id"].as_str(), e["payload"]["code"].as_str()),
        (Some(id.as_str()), Some("RATE_LIMITED"))
    );
    assert!(
        e["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("capacity")
    );
    // The controller seat is separate from observer capacity.
    let mut ctl = s.attach(&sid, ADMIN).await;
    assert_eq!(
        ctl.join("controller").await[0]["payload"]["role"],
        "controller"
    );
    first.send("pty.leave_session", json!({})).await;
    first.until_close().await;
    second.join("observer").await;
}

#[tokio::test]
async fn ext_scenario_10_close_lifecycle_emits_exactly_one_closed_each_way() {
    let s = TestServer::start(&[]).await;

    // Command exit.
    let sid = s.command_session("read x; echo bye; exit 7").await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    c.input("\n").await;
    let closed = exactly_one_closed(&mut c).await;
    assert_eq!(
        (
            closed["payload"]["exit_code"].as_i64(),
            closed["payload"]["reason"].as_str()
        ),
        (Some(7), Some("normal"))
    );
    assert_eq!(s.wait_closed(&sid).await["exit_code"], 7);
    closed_is_retained(&s, &sid, &closed).await;

    // PTY EOF: Ctrl-D ends cat.
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    c.input("\u{4}").await;
    let closed = exactly_one_closed(&mut c).await;
    assert_eq!(closed["payload"]["exit_code"], 0);
    closed_is_retained(&s, &sid, &closed).await;

    // Start failure.
    let failed = s
        .create_session(json!({ "argv": ["/nonexistent/program"] }))
        .await;
    assert_eq!(
        (failed["state"].as_str(), failed["close_reason"].as_str()),
        (Some("closed"), Some("error"))
    );
    let sid = failed["session_id"].as_str().unwrap();
    let mut c = s.attach(sid, ADMIN).await;
    c.send("pty.join_session", json!({ "role": "observer" }))
        .await;
    let closed = exactly_one_closed(&mut c).await;
    assert_eq!(closed["payload"]["reason"], "error");
    assert!(
        closed["payload"]["detail"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/program")
    );

    // Explicit close.
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("observer").await;
    let (status, view) = s.delete(&format!("/sessions/{sid}"), ADMIN).await;
    assert_eq!(status, 200);
    assert_eq!(
        (view["state"].as_str(), view["close_reason"].as_str()),
        (Some("closed"), Some("killed"))
    );
    let closed = exactly_one_closed(&mut c).await;
    assert_eq!(closed["payload"]["reason"], "killed");
    closed_is_retained(&s, &sid, &closed).await;
}

#[tokio::test]
async fn ext_scenario_10_teardown_emits_one_closed_then_goodbye_and_keeps_it_after_restart() {
    let mut s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("controller").await;
    let stopping = tokio::spawn(async move {
        let status = s.stop().await;
        (s, status)
    });
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1000));
    let closed: Vec<_> = frames.iter().filter(|f| kind(f) == "Closed").collect();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0]["payload"]["reason"], "instance_terminated");
    let goodbye = frames.last().unwrap();
    assert_eq!(
        (
            goodbye["op"].as_str(),
            goodbye["payload"]["reason"].as_str()
        ),
        (Some("binding_goodbye"), Some("server_shutdown"))
    );
    let (s, status) = stopping.await.unwrap();
    assert!(status.success(), "orderly shutdown exits 0");

    let s2 = TestServer::start_in(&s.dir, &[]).await;
    assert_eq!(
        s2.session(&sid).await["close_reason"],
        "instance_terminated"
    );
    closed_is_retained(&s2, &sid, closed[0]).await;
}

/// A session that floods `bytes` of 'a' once its controller sends a line.
async fn flood_session(s: &TestServer, bytes: usize) -> String {
    let script = format!("read x; head -c {bytes} /dev/zero | tr '\\0' a; sleep 60");
    let v = s
        .create_session(json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 24 }))
        .await;
    v["session_id"].as_str().unwrap().to_owned()
}

fn count_a(frames: &[serde_json::Value]) -> usize {
    frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| output_bytes(f).iter().filter(|b| **b == b'a').count())
        .sum()
}

#[tokio::test]
async fn a_viewer_that_acknowledges_gets_at_most_its_window_or_the_smaller_one_it_asked_for_then_a_keyframe_once_caught_up()
 {
    // A keyframe every other output: the periodic ones come during the flood.
    let s = TestServer::start(&["--keyframe-interval-frames", "2"]).await;
    let sid = flood_session(&s, 2_000_000).await;
    let mut fast = s.attach(&sid, ADMIN).await;
    fast.join("controller").await;
    let mut acking = s.attach(&sid, ADMIN).await;
    let joined = acking.join("observer").await;
    let window = acking.hello["payload"]["flow_control"]["window_bytes"]
        .as_u64()
        .unwrap() as usize;
    let flow = &acking.hello["payload"]["flow_control"];
    assert_eq!(flow["ack_op"], "ptyhost.ack");
    // The card says what the hello says, the smallest window a client may ask for included.
    let (_, card) = s.get("/.well-known/agent-card.json", ADMIN).await;
    let declared = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == flow["extension"])
        .unwrap_or_else(|| panic!("the card declares flow control: {card}"));
    for param in ["window_bytes", "min_window_bytes", "resume_bytes"] {
        assert_eq!(declared["params"][param], flow[param], "{param}");
    }
    assert_eq!(flow["min_window_bytes"], 4096);
    let last = joined.iter().map(seq).max().unwrap();
    acking
        .send("ptyhost.ack", json!({ "sequence": last }))
        .await;
    // A viewer that only glances (a tile of the wall) asks for a smaller window.
    let mut glancing = s.attach(&sid, ADMIN).await;
    let joined = glancing.join("observer").await;
    let glanced = joined.iter().map(seq).max().unwrap();
    let small = 16 * 1024;
    glancing
        .send(
            "ptyhost.ack",
            json!({ "sequence": glanced, "window_bytes": small }),
        )
        .await;
    fast.input("go\n").await;

    // The fast viewer, which never acknowledges, gets every byte.
    let mut received = 0;
    while received < 2_000_000 {
        let f = fast.next().await;
        received += count_a(std::slice::from_ref(&f));
    }
    assert_eq!(received, 2_000_000);

    // The acknowledging viewer got at most its window, then nothing more.
    let mut frames = Vec::new();
    while let Some(f) = acking.try_next(Duration::from_millis(300)).await {
        frames.push(f);
    }
    let got = frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| output_bytes(f).len())
        .sum::<usize>();
    assert!(
        got <= window,
        "{got} bytes in flight past a window of {window}"
    );
    assert!(got > 0);
    // Past its window it skipped the periodic keyframes too.
    let last_output = frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(seq)
        .max()
        .unwrap();
    let late: Vec<u64> = frames
        .iter()
        .filter(|f| kind(f) == "Keyframe" && seq(f) > last_output)
        .map(seq)
        .collect();
    // (One may fall between its last output and the first it skipped.)
    assert!(late.len() <= 1, "keyframes past the window: {late:?}");

    // Acknowledging what it has catches it up with a keyframe of the flooded screen.
    let newest = frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(seq)
        .max()
        .unwrap();
    acking
        .send("ptyhost.ack", json!({ "sequence": newest }))
        .await;
    let keyframe = acking.expect_kind("Keyframe").await;
    let screen = String::from_utf8_lossy(&snapshot(&keyframe)).into_owned();
    // Rows of 'a' (avt writes a row as the character and a repeat, CSI 79 b).
    assert!(screen.matches("a\u{1b}[79b").count() >= 20, "{screen:?}");

    // The glancing viewer got no more than the window it asked for, and its ack brings the
    // flooded screen.
    let mut glimpse = Vec::new();
    while let Some(f) = glancing.try_next(Duration::from_millis(300)).await {
        glimpse.push(f);
    }
    let got: usize = glimpse
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| output_bytes(f).len())
        .sum();
    assert!(got <= small, "{got} bytes past a window of {small}");
    let newest = glimpse.iter().map(seq).max().unwrap_or(glanced);
    glancing
        .send(
            "ptyhost.ack",
            json!({ "sequence": newest, "window_bytes": small }),
        )
        .await;
    let keyframe = glancing.expect_kind("Keyframe").await;
    let screen = String::from_utf8_lossy(&snapshot(&keyframe)).into_owned();
    assert!(screen.matches("a\u{1b}[79b").count() >= 20, "{screen:?}");

    // Acknowledging what was never sent is refused.
    acking
        .send("ptyhost.ack", json!({ "sequence": u64::MAX }))
        .await;
    assert_eq!(
        acking.expect_op("Error").await["payload"]["code"],
        "INVALID_REQUEST"
    );
}

#[tokio::test]
async fn a_viewer_that_stops_reading_gets_lagged_and_a_keyframe_while_a_fast_one_gets_every_byte() {
    const FLOOD: usize = 24_000_000;
    let s = TestServer::start(&[]).await;
    let sid = flood_session(&s, FLOOD).await;
    let mut fast = s.attach(&sid, ADMIN).await;
    fast.join("controller").await;
    let mut slow = s.attach(&sid, ADMIN).await;
    slow.join("observer").await;
    fast.input("go\n").await;
    let mut received = 0;
    while received < FLOOD {
        let f = fast.next().await;
        received += count_a(std::slice::from_ref(&f));
    }
    assert_eq!(
        received, FLOOD,
        "the fast viewer is never slowed or skipped"
    );

    // The slow viewer, reading only now, finds it was skipped and repainted.
    let lagged = loop {
        let f = slow.next().await;
        if f["payload"]["code"] == "PTY_OUTPUT_LAGGED" {
            break f;
        }
    };
    let keyframe = slow.next().await;
    assert_eq!(kind(&keyframe), "Keyframe", "after {lagged}");
}

#[tokio::test]
async fn a_viewer_that_is_behind_when_the_session_ends_still_gets_a_keyframe_and_its_closed() {
    const FLOOD: usize = 24_000_000;
    let s = TestServer::start(&[]).await;
    let script = format!("read x; head -c {FLOOD} /dev/zero | tr '\\0' a");
    let v = s
        .create_session(json!({ "argv": ["sh", "-c", script], "cols": 80, "rows": 24 }))
        .await;
    let sid = v["session_id"].as_str().unwrap().to_owned();
    let mut fast = s.attach(&sid, ADMIN).await;
    fast.join("controller").await;
    let mut slow = s.attach(&sid, ADMIN).await;
    slow.join("observer").await;
    fast.input("go\n").await;
    fast.expect_kind("Closed").await;
    // The slow viewer reads only now: whatever it missed, it ends with a keyframe and Closed.
    let (code, frames) = slow.until_close().await;
    assert_eq!(code, Some(1000));
    let kinds: Vec<&str> = frames.iter().map(kind).filter(|k| !k.is_empty()).collect();
    assert_eq!(
        kinds.last(),
        Some(&"Closed"),
        "{:?}",
        &kinds[kinds.len().saturating_sub(5)..]
    );
    assert_eq!(kinds[kinds.len() - 2], "Keyframe");
    assert_eq!(frames.last().unwrap()["op"], "binding_goodbye");
}
