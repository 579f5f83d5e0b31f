use super::*;

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
    let refusal = error_of(&e);
    assert_eq!((id_of(&e), refusal.code.as_str()), (id, "RATE_LIMITED"));
    assert!(refusal.message.contains("capacity"));
    // The controller seat is separate from observer capacity.
    let mut ctl = s.attach(&sid, ADMIN).await;
    assert_eq!(
        role_of(&ctl.join("controller").await[0]).0,
        Role::Controller
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
    assert_eq!(s.wait_closed(&sid).await.exit_code, Some(7));
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
        (failed.state.as_str(), failed.close_reason.as_deref()),
        ("closed", Some("error"))
    );
    let sid = &failed.session_id;
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
        s2.session(&sid).await.close_reason.as_deref(),
        Some("instance_terminated")
    );
    closed_is_retained(&s2, &sid, closed[0]).await;
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
    let ServerOp::Hello(hello) = typed(&acking.hello).op else {
        panic!("no hello");
    };
    let flow = hello.flow_control;
    let window = flow.window_bytes as usize;
    assert_eq!(flow.ack_op, "ptyhost.ack");
    // The card says what the hello says, the smallest window a client may ask for included.
    let card: SupersetCard = s.get_as("/.well-known/agent-card.json", ADMIN).await;
    let declared = card
        .card
        .capabilities
        .extensions
        .iter()
        .find(|e| e.uri == flow.extension)
        .unwrap_or_else(|| panic!("the card declares flow control: {card:?}"));
    let declared: FlowParams = serde_json::from_value(declared.params.clone()).unwrap();
    assert_eq!(
        (
            declared.window_bytes as u64,
            declared.min_window_bytes as u64,
            declared.resume_bytes as u64
        ),
        (flow.window_bytes, flow.min_window_bytes, flow.resume_bytes)
    );
    assert_eq!(flow.min_window_bytes, 4096);
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
        error_of(&acking.expect_op("Error").await).code,
        wire::ErrorCode::InvalidRequest
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
        if is_lagged(&f) {
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
    let sid = v.session_id;
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
    assert_eq!(op_of(frames.last().unwrap()), "binding_goodbye");
}
