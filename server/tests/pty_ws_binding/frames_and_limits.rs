use super::*;

#[tokio::test]
async fn replay_survives_a_server_restart_and_a_crash() {
    for crash in [false, true] {
        let mut s = TestServer::start(&[]).await;
        let sid = cat_session(&s).await;
        let mut c = s.attach(&sid, ADMIN).await;
        c.join("controller").await;
        c.input("persisted line\n").await;
        let live = c.output_until("persisted line\r\npersisted line").await;
        if crash {
            tokio::time::sleep(Duration::from_millis(300)).await; // the write-behind interval
            s.kill().await;
        } else {
            s.stop().await;
        }
        drop(c);
        let s2 = TestServer::start_in(&s.dir, &[]).await;
        let view = s2.session(&sid).await;
        assert_eq!(
            (view.state.as_str(), view.close_reason.as_deref()),
            ("closed", Some("instance_terminated"))
        );

        let mut late = s2.attach(&sid, ADMIN).await;
        late.send_env(
            "pty.join_session",
            json!({ "role": "observer" }),
            json!({ "replay_from": 0 }),
        )
        .await;
        let (code, frames) = late.until_close().await;
        assert_eq!(code, Some(1000));
        let text = output_text(&frames);
        assert!(
            text.contains("persisted line\r\npersisted line"),
            "crash={crash}: {text:?}"
        );
        // Output is stored as its bytes: the replay renders each envelope as it went out.
        for f in live.iter().filter(|f| kind(f) == "Output") {
            assert!(
                frames.contains(f),
                "crash={crash}: {f} not replayed as sent"
            );
        }
        assert_eq!(frames.iter().filter(|f| kind(f) == "Closed").count(), 1);
        let keyframe = frames.iter().rev().find(|f| kind(f) == "Keyframe").unwrap();
        assert!(String::from_utf8_lossy(&snapshot(keyframe)).contains("persisted line"));
        let seqs: Vec<u64> = frames.iter().filter_map(|f| typed(f).sequence).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    }
}

#[tokio::test]
async fn a_late_joiners_keyframe_repaints_a_full_screen_program_cell_for_cell() {
    let s = TestServer::start(&[]).await;
    let script = r#"printf '\033[?1049h\033[H\033[2J\033[1;37;44m top - 10:00 \033[K\033[0m\r\n\033[7m PID USER \033[27m\r\n\033[3;6r\033[3;1H\033[32m 101 root\033[0m\r\n 102 app \033[38;5;202m\342\226\210\033[38;2;1;2;3m\344\270\255\033[0m\033[6;3H\033[4mU\033[24m\033[?25l\033[5;9H'; sleep 60"#;
    let sid = s
        .create_session(json!({ "command": script, "cols": 40, "rows": 8 }))
        .await
        .session_id;
    let mut first = s.attach(&sid, ADMIN).await;
    first.join("observer").await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut late = s.attach(&sid, ADMIN).await;
    let init = late
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": 0 }))
        .await;
    let mut from_output = server::sessions::screen::Screen::new(40, 8);
    for f in init.iter().filter(|f| kind(f) == "Output") {
        from_output.feed(&output_bytes(f));
    }
    let keyframe = init.iter().rev().find(|f| kind(f) == "Keyframe").unwrap();
    let mut from_keyframe = server::sessions::screen::Screen::new(40, 8);
    from_keyframe.feed(b"stale content\x1b[1m");
    from_keyframe.feed(&snapshot(keyframe));
    assert!(from_output.text()[0].contains("top - 10:00"));
    assert_eq!(from_keyframe.cells(), from_output.cells());
    assert_eq!(from_keyframe.cursor(), from_output.cursor());
    assert!(from_keyframe.alternate_screen());
}

#[tokio::test]
async fn binding_scenario_9_binary_output_is_pw1o_frames_of_raw_pty_bytes() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut bin = Client::connect_binary(&s.ws_url(&sid), ADMIN).await;
    assert_eq!(
        bin.protocol, "pty-ws.v1.binary",
        "only the selected token is echoed"
    );
    assert_eq!(bin.hello["payload"]["payload_mode"]["binary"], true);
    bin.join("controller").await;
    let mut json = s.attach(&sid, ADMIN).await;
    assert_eq!(json.hello["payload"]["payload_mode"]["binary"], false);
    json.join("observer").await;

    // The tty echoes ESC as "^["; cat's own output has the raw byte.
    bin.input("é € 中 \u{1b}[1mbold\n").await;
    let (outputs, others) = binary_output_until(&mut bin, "\u{1b}[1mbold").await;
    assert!(
        others.iter().all(|f| kind(f) != "Output"),
        "no JSON/base64 output frames for a binary client: {others:?}"
    );
    assert!(outputs.iter().all(|(_, stream, _)| *stream == 1));
    let raw: Vec<u8> = outputs.iter().flat_map(|(_, _, d)| d.clone()).collect();
    assert!(
        String::from_utf8(raw)
            .unwrap()
            .contains("é € 中 \u{1b}[1mbold"),
        "raw bytes, not base64"
    );

    // The JSON viewer gets the same frames, same sequences, as base64.
    let frames = json.output_until("\u{1b}[1mbold").await;
    let as_json: Vec<(u64, Vec<u8>)> = frames
        .iter()
        .filter(|f| kind(f) == "Output")
        .map(|f| (seq(f), output_bytes(f)))
        .collect();
    let as_binary: Vec<(u64, Vec<u8>)> = outputs.into_iter().map(|(s, _, d)| (s, d)).collect();
    assert_eq!(
        as_binary, as_json,
        "one counter, one content, two encodings"
    );
}

#[tokio::test]
async fn binding_scenario_10_binary_input_is_raw_pty_input_and_needs_control() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut ctl = Client::connect_binary(&s.ws_url(&sid), ADMIN).await;
    ctl.join("controller").await;
    ctl.send_binary(wire::binary_input("typed-in-binary \u{e9}\n".as_bytes()))
        .await;
    binary_output_until(&mut ctl, "typed-in-binary é").await;

    // An observer's PW1I is refused and never reaches the PTY.
    let observe = s.token("pty:observe", None).await;
    let mut obs = Client::connect_binary(&s.ws_url(&sid), &observe).await;
    obs.join("observer").await;
    obs.send_binary(wire::binary_input(b"observer-wrote\n"))
        .await;
    let refused = loop {
        match obs.next_frame(WAIT).await.expect("a frame") {
            Frame::Json(f) if f["op"] == "Error" => break f,
            _ => continue,
        }
    };
    assert_eq!(refused["payload"]["code"], "PERMISSION_DENIED", "{refused}");
    ctl.send_binary(wire::binary_input(b"after\n")).await;
    let (outputs, _) = binary_output_until(&mut ctl, "after").await;
    let text: Vec<u8> = outputs.into_iter().flat_map(|(_, _, d)| d).collect();
    assert!(!String::from_utf8_lossy(&text).contains("observer-wrote"));

    // Binary frames that are not PW1I, or on a JSON connection, are invalid requests.
    ctl.send_binary(b"PW1Oxxxxxxxxx".to_vec()).await;
    let e = loop {
        match ctl.next_frame(WAIT).await.expect("a frame") {
            Frame::Json(f) if f["op"] == "Error" => break f,
            _ => continue,
        }
    };
    assert_eq!(e["payload"]["code"], "INVALID_REQUEST");
    let mut json = s.attach(&sid, ADMIN).await;
    json.send_binary(wire::binary_input(b"x")).await;
    assert_error(&json.next().await, None, "INVALID_REQUEST");
}

#[tokio::test]
async fn a_token_opening_connections_too_fast_gets_429_and_other_tokens_still_attach() {
    let s = TestServer::start(&["--rate-limit-connections", "2"]).await;
    let sid = cat_session(&s).await;
    let url = s.ws_url(&sid);
    let protocols = bearer_protocols(ADMIN);
    let mut refused = 0;
    let mut open = Vec::new();
    for _ in 0..10 {
        match upgrade_status(&url, &[("Sec-WebSocket-Protocol", &protocols)]).await {
            Ok(ws) => open.push(ws),
            Err(status) => {
                assert_eq!(status, 429);
                refused += 1;
            }
        }
    }
    // A burst of two seconds' worth (and one more if the attempts took half a second).
    assert!((4..=5).contains(&open.len()), "{} admitted", open.len());
    assert_eq!(refused, 10 - open.len());
    let r = s
        .http
        .get(url.replace("ws://", "http://"))
        .bearer_auth(ADMIN)
        .header("Sec-WebSocket-Protocol", "pty-ws.v1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(error_code(&body), "rate_limited");
    let other = s.token("pty:control", None).await;
    Client::connect(&url, &other).await;
}

#[tokio::test]
async fn a_frame_flood_is_rate_limited_then_closed_with_4429() {
    use futures_util::SinkExt;
    let s = TestServer::start(&["--rate-limit-frames", "20"]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let ping = json!({ "op": "ping", "id": "p", "ts": "2026-11-29T00:00:00Z", "payload": { "client_ts": "t" } }).to_string();
    for _ in 0..700 {
        if c.ws
            .send(tokio_tungstenite::tungstenite::Message::Text(
                ping.clone().into(),
            ))
            .await
            .is_err()
        {
            break;
        }
    }
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(4429));
    let pongs = frames.iter().filter(|f| op_of(f) == "pong").count();
    assert!(
        (40..=45).contains(&pongs),
        "the burst is served, the rest is not: {pongs}"
    );
    let limited = frames
        .iter()
        .filter(|f| op_of(f) == "Error")
        .map(error_of)
        .find(|e| e.code == wire::ErrorCode::RateLimited)
        .expect("a RATE_LIMITED error before the close");
    assert!(limited.retryable);
    assert!(limited.retry_after_ms.is_some());
}

#[tokio::test]
async fn an_oversized_frame_is_an_invalid_request_and_closes_1009() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.send_raw(&"x".repeat(1024 * 1024 + 1)).await;
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1009));
    assert_eq!(
        error_of(frames.last().unwrap()).code,
        wire::ErrorCode::InvalidRequest
    );
}

#[tokio::test]
async fn a_4_mib_frame_is_refused_with_1009_not_dropped() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.send_raw(&"x".repeat(4 * 1024 * 1024)).await;
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1009));
    assert_eq!(
        error_of(frames.last().unwrap()).code,
        wire::ErrorCode::InvalidRequest
    );
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_closes_1007() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    let frame = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    c.ws.send(tokio_tungstenite::tungstenite::Message::Frame(frame))
        .await
        .unwrap();
    let (code, frames) = c.until_close().await;
    assert_eq!(code, Some(1007));
    assert_eq!(
        error_of(frames.last().unwrap()).code,
        wire::ErrorCode::InvalidRequest
    );
}

#[tokio::test]
async fn a_client_close_is_answered_with_a_close() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("observer").await;
    let bye = CloseFrame {
        code: 1000.into(),
        reason: "done".into(),
    };
    c.ws.send(Message::Close(Some(bye))).await.unwrap();
    let reply = tokio::time::timeout(WAIT, async {
        loop {
            match c.ws.next().await {
                Some(Ok(Message::Close(frame))) => return Ok(frame.map(|f| u16::from(f.code))),
                Some(Ok(_)) => continue,
                other => return Err(format!("{other:?}")),
            }
        }
    })
    .await
    .expect("the server answers");
    assert_eq!(reply, Ok(Some(1000)));
    assert!(c.ws.next().await.is_none(), "then the socket ends cleanly");
}

#[tokio::test]
async fn a_flood_that_never_stops_still_reads_its_4429() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let s = TestServer::start(&["--rate-limit-frames", "20"]).await;
    let sid = cat_session(&s).await;
    let c = s.attach(&sid, ADMIN).await;
    let (mut tx, mut rx) = c.ws.split();
    let ping = json!({ "op": "ping", "id": "p", "ts": "2026-11-29T00:00:00Z", "payload": { "client_ts": "t" } }).to_string();
    let flood =
        tokio::spawn(
            async move { while tx.send(Message::Text(ping.clone().into())).await.is_ok() {} },
        );
    let code = tokio::time::timeout(WAIT, async {
        loop {
            match rx.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .expect("the server closes");
    flood.abort();
    assert_eq!(code, Some(4429));
}

/// An observer of `sid` with a small receive buffer, joined: what it has not read waits
/// on the server.
async fn slow_observer(
    s: &TestServer,
    sid: &str,
) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let tcp = socket.connect(s.addr.parse().unwrap()).await.unwrap();
    let mut req = s.ws_url(sid).into_client_request().unwrap();
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        bearer_protocols(ADMIN).parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
    let join = json!({ "op": "pty.join_session", "id": "j", "ts": "2026-12-06T00:00:00Z",
        "payload": { "role": "observer" } });
    ws.send(Message::Text(join.to_string().into()))
        .await
        .unwrap();
    ws
}

#[tokio::test]
async fn a_slow_viewer_without_acks_skips_stale_output_for_a_keyframe_and_is_not_reaped() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let s = TestServer::start(&["--heartbeat-interval", "0.5", "--heartbeat-timeout", "1.5"]).await;
    let sid = s.command_session("yes slow-viewer-line").await;
    let mut ws = slow_observer(&s, &sid).await;

    let (mut lagged, mut keyframe_after) = (false, false);
    let mut latest_lateness = Duration::ZERO;
    let mut outputs = 0;
    // How soon the viewer lags depends on the machine's load: read until it has, then a
    // second more, to see output arrive fresh after the keyframe.
    let mut end = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let f: Value = match ws.next().await {
            Some(Ok(Message::Text(t))) => serde_json::from_str(&t).unwrap(),
            Some(Ok(Message::Close(c))) => panic!("closed while reading: {c:?}"),
            Some(Ok(_)) => continue,
            other => panic!("the connection failed: {other:?}"),
        };
        match kind(&f) {
            "Error" if is_lagged(&f) => lagged = true,
            "Keyframe" if lagged && !keyframe_after => {
                keyframe_after = true;
                end = std::time::Instant::now() + Duration::from_secs(1);
            }
            "Output" => {
                outputs += 1;
                let ts = time::OffsetDateTime::parse(
                    &typed(&f).ts,
                    &time::format_description::well_known::Rfc3339,
                )
                .unwrap();
                let late = time::OffsetDateTime::now_utc() - ts;
                latest_lateness = Duration::from_secs_f64(late.as_seconds_f64().max(0.0));
            }
            _ => {}
        }
    }
    assert!(
        lagged && keyframe_after,
        "PTY_OUTPUT_LAGGED, then a keyframe ({latest_lateness:?} late, {outputs} outputs)"
    );
    assert!(
        latest_lateness < Duration::from_secs(4),
        "output arrives {latest_lateness:?} late"
    );
}

#[tokio::test]
async fn a_viewer_still_behind_when_the_session_ends_gets_every_byte_before_closed() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let s = TestServer::start(&["--heartbeat-interval", "1", "--heartbeat-timeout", "20"]).await;
    let lines = 200_000;
    let sid = s
        .command_session(&format!("sleep 0.5; seq 1 {lines}; sleep 0.5"))
        .await;
    let mut ws = slow_observer(&s, &sid).await;
    // The viewer reads nothing until the session has ended, by which time the output it
    // is behind on has waited longer than the connection lets live output wait.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (mut bytes, mut lagged, mut keyframe_after) = (0, false, false);
    loop {
        let next = tokio::time::timeout(WAIT, ws.next()).await.expect("frames");
        let f: Value = match next {
            Some(Ok(Message::Text(t))) => serde_json::from_str(&t).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("the connection ended before Closed: {other:?}"),
        };
        match kind(&f) {
            "Output" => bytes += output_bytes(&f).len(),
            "Error" if is_lagged(&f) => lagged = true,
            "Keyframe" if lagged => keyframe_after = true,
            "Closed" => break,
            _ => {}
        }
    }
    // Each line as the terminal prints it: its digits, CR, LF. A viewer gets them all,
    // or (when even its queue in the session filled up) is told it lagged and gets the
    // last screen.
    let printed: usize = (1..=lines).map(|i: u32| i.to_string().len() + 2).sum();
    assert!(
        (bytes == printed && !lagged) || (lagged && keyframe_after),
        "{bytes} of {printed} bytes, lagged {lagged}, keyframe after it {keyframe_after}"
    );
}

#[tokio::test]
async fn a_session_takes_a_bounded_number_of_connections() {
    let s = TestServer::start(&["--max-connections-per-session", "2"]).await;
    let sid = cat_session(&s).await;
    let a = s.attach(&sid, ADMIN).await;
    let _b = s.attach(&sid, ADMIN).await;
    let third = upgrade_status(
        &s.ws_url(&sid),
        &[("Sec-WebSocket-Protocol", &bearer_protocols(ADMIN))],
    )
    .await;
    assert_eq!(third.err(), Some(429));
    let other = cat_session(&s).await;
    s.attach(&other, ADMIN).await;
    drop(a);
    tokio::time::timeout(WAIT, async {
        while upgrade_status(
            &s.ws_url(&sid),
            &[("Sec-WebSocket-Protocol", &bearer_protocols(ADMIN))],
        )
        .await
        .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a slot frees when a connection ends");
}
