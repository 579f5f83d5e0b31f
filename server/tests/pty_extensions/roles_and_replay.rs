use super::*;

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
    assert_eq!((view.cols, view.rows), (100, 30));

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
        s.session(&sid).await.state,
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
    s.wait_until(&sid, |v| v.controllers == 0).await;

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
    s.wait_until(&sid, |v| v.replay_floor > 1).await;
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
