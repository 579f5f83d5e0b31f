use super::*;

#[tokio::test]
async fn sessions_are_created_listed_shown_and_terminated_with_uuidv7_ids() {
    let s = TestServer::start(&[]).await;
    // Not the data dir itself: a sandboxed session's workspace may not hold it.
    let cwd = s.dir.join("work").to_str().unwrap().to_owned();
    std::fs::create_dir(&cwd).unwrap();
    let (status, created) = s.post(
        "/sessions",
        ADMIN,
        json!({ "argv": ["sh", "-c", "pwd; echo $GREETING; sleep 60"], "cwd": cwd, "env": { "GREETING": "hi there" }, "cols": 90, "rows": 20, "label": "build" }),
    )
    .await;
    assert_eq!(status, 201);
    assert!(
        created.get("env").is_none(),
        "env may hold secrets and is not echoed"
    );
    let created: control::Session = serde_json::from_value(created).unwrap();
    let sid = created.session_id.clone();
    assert_eq!(uuid::Uuid::parse_str(&sid).unwrap().get_version_num(), 7);
    assert_eq!((created.cols, created.rows), (90, 20));
    assert_eq!(
        (
            created.session_backend.as_str(),
            created.session_class.as_str()
        ),
        ("native", "direct")
    );
    assert_eq!(created.attach_url, s.ws_url(&sid));

    let mut c = s.attach(&sid, ADMIN).await;
    let init = c
        .join_with(json!({ "role": "observer" }), json!({ "replay_from": 0 }))
        .await;
    let mut text = output_text(&init);
    if !text.contains("hi there") {
        text.push_str(&output_text(&c.output_until("hi there").await));
    }
    assert!(text.contains(&cwd) && text.contains("hi there"), "{text:?}");

    let (_, list) = s.get("/sessions", ADMIN).await;
    let list: control::SessionList = serde_json::from_value(list).unwrap();
    let listed = &list.sessions[0];
    assert_eq!(listed.session_id, sid);
    assert_eq!((listed.state.as_str(), listed.observers), ("running", 1));
    assert_eq!(listed.label.as_deref(), Some("build"));

    assert_eq!(s.delete(&format!("/sessions/{sid}"), ADMIN).await.0, 200);
    let (_, shown) = s.get(&format!("/sessions/{sid}"), ADMIN).await;
    let shown: control::Session = serde_json::from_value(shown).unwrap();
    assert_eq!(
        (shown.state.as_str(), shown.close_reason.as_deref()),
        ("closed", Some("killed"))
    );
    assert!(shown.closed_at.unwrap().ends_with('Z'));
    // Also at the root for the default instance.
    let root = s.http.get(format!("http://{}/sessions/{sid}", s.addr));
    assert_eq!(s.call(root, ADMIN).await.0, 200);
}

#[tokio::test]
async fn bad_session_requests_get_typed_errors_and_create_nothing() {
    let s = TestServer::start(&[]).await;
    for (body, code) in [
        (
            json!({ "session_backend": "screen", "session_class": "managed" }),
            "session_backend.not_implemented",
        ),
        (
            json!({ "session_backend": "native", "session_class": "managed" }),
            "session_class.not_implemented",
        ),
        (
            json!({ "backend": "zellij" }),
            "session_backend.not_implemented",
        ),
        (json!({ "argv": [] }), "invalid_argument"),
        (
            json!({ "argv": ["ls"], "command": "ls" }),
            "invalid_argument",
        ),
        (json!({ "cwd": "/no/such/dir" }), "invalid_argument"),
        (json!({ "cols": 0 }), "invalid_argument"),
        (json!({ "cols": 5000 }), "invalid_argument"),
        (json!({ "shell": "bash" }), "invalid_argument"),
        (json!("not an object"), "invalid_argument"),
    ] {
        let (status, err) = s.post("/sessions", ADMIN, body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(error_code(&err), code, "{body}: {err}");
    }
    let list: control::SessionList = s.get_as("/sessions", ADMIN).await;
    assert_eq!(list.sessions, []);
}

#[tokio::test]
async fn scopes_gate_the_control_plane_and_bound_tokens_see_only_their_session() {
    let s = TestServer::start(&[]).await;
    let (status, err) = s.post("/sessions", "wrong", json!({})).await;
    assert_eq!(
        (status, error_code(&err).as_str()),
        (401, "unauthenticated")
    );
    let r = s.http.get(s.url("/sessions")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let r = s
        .http
        .get(s.url(&format!("/sessions?token={ADMIN}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "a token in the query is refused");

    let mine = cat_session(&s).await;
    let theirs = cat_session(&s).await;
    let observe = s.token("pty:observe", None).await;
    let (status, err) = s.post("/sessions", &observe, json!({})).await;
    assert_eq!(
        (status, error_code(&err).as_str()),
        (403, "permission_denied")
    );
    let r = s
        .http
        .delete(s.url(&format!("/sessions/{mine}")))
        .bearer_auth(&observe)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let seen: control::SessionList = s.get_as("/sessions", &observe).await;
    assert_eq!(seen.sessions.len(), 2);

    let bound = s.token("pty:control", Some(&mine)).await;
    let list: control::SessionList = s.get_as("/sessions", &bound).await;
    let ids: Vec<&str> = list
        .sessions
        .iter()
        .map(|v| v.session_id.as_str())
        .collect();
    assert_eq!(ids, vec![mine.as_str()]);
    assert_eq!(
        s.get(&format!("/sessions/{theirs}"), &bound).await.0,
        404,
        "never 403"
    );
    assert_eq!(s.get(&format!("/sessions/{mine}"), &bound).await.0, 200);
    assert_eq!(s.post("/sessions", &bound, json!({})).await.0, 403);
    let r = s
        .http
        .get(format!("http://{}/agents/nope/sessions", s.addr))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "unknown instance");
}

#[tokio::test]
async fn an_observer_link_attaches_read_only_until_it_is_revoked() {
    let s = TestServer::start(&["--public-url", "https://pty.example/"]).await;
    let sid = cat_session(&s).await;
    let (status, link) = s
        .post(
            &format!("/sessions/{sid}/share"),
            ADMIN,
            json!({ "ttl_secs": 600, "label": "for bob" }),
        )
        .await;
    assert_eq!(status, 201);
    let link: control::NewLink = serde_json::from_value(link).unwrap();
    let token = link.token.clone();
    assert_eq!(
        link.url,
        format!("https://pty.example/sessions/{sid}#token={token}")
    );
    assert!(link.expires_at.as_ref().unwrap().ends_with('Z'));

    let (_, links) = s.get(&format!("/sessions/{sid}/share"), ADMIN).await;
    assert!(
        !links.to_string().contains(&token),
        "listing never shows a token"
    );
    let links: control::ShareLinks = serde_json::from_value(links).unwrap();
    assert_eq!(links.links[0].id, link.id);
    assert_eq!(links.links[0].label.as_deref(), Some("for bob"));

    let mut ctl = s.attach(&sid, ADMIN).await;
    ctl.join("controller").await;
    let mut viewer = s.attach(&sid, &token).await;
    let id = viewer
        .send("pty.join_session", json!({ "role": "controller" }))
        .await;
    assert_eq!(id_of(&viewer.next().await), id);
    viewer.join("observer").await;
    let id = viewer.input("nope").await;
    let e = viewer.expect_op("Error").await;
    assert_eq!(
        (id_of(&e), error_of(&e).code.as_str()),
        (id, "PERMISSION_DENIED")
    );
    ctl.input("shared view\n").await;
    viewer.output_until("shared view").await;

    // Bound to its session, observe-only on the control plane too.
    let other = cat_session(&s).await;
    assert_eq!(bearer_refusal(&s.ws_url(&other), &token).await, Some(404));
    assert_eq!(
        s.post(&format!("/sessions/{sid}/share"), &token, json!({}))
            .await
            .0,
        403
    );
    for bad in [
        json!({ "ttl_secs": 0 }),
        json!({ "ttl_secs": 99_999_999 }),
        json!({ "expires": 5 }),
    ] {
        assert_eq!(
            s.post(&format!("/sessions/{sid}/share"), ADMIN, bad)
                .await
                .0,
            400
        );
    }

    let link_id = &link.id;
    assert_eq!(
        s.delete(&format!("/sessions/{sid}/share/{link_id}"), ADMIN)
            .await
            .0,
        204
    );
    // Revoked here, so refused at once, and the link's open connection is cut.
    assert_eq!(bearer_refusal(&s.ws_url(&sid), &token).await, Some(401));
    let (code, _) = viewer
        .until_close_within(std::time::Duration::from_millis(100))
        .await;
    assert_eq!(code, Some(4401));
    assert_eq!(
        s.delete(&format!("/sessions/{sid}/share/{link_id}"), ADMIN)
            .await
            .0,
        404
    );
    let links: control::ShareLinks = s.get_as(&format!("/sessions/{sid}/share"), ADMIN).await;
    assert_eq!(links.links, []);
}

#[tokio::test]
async fn token_cli_creates_lists_and_revokes_and_stores_only_hashes() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let out = s
        .token_cli(&[
            "create",
            "--scope",
            "pty:observe",
            "--session",
            &sid,
            "--ttl",
            "1h",
            "--label",
            "ci",
        ])
        .await;
    let token = out.trim();
    assert!(token.starts_with("pth_") && token.len() > 40);
    let list = s.token_cli(&["list"]).await;
    let row = list.lines().find(|l| l.contains("\tci\t")).unwrap();
    let cols: Vec<&str> = row.split('\t').collect();
    assert_eq!((cols[1], cols[2]), ("pty:observe", sid.as_str()));
    assert!(!list.contains(token) && !list.contains(ADMIN));
    let db = std::fs::read(s.dir.join("ptyhost.db")).unwrap();
    let wal = std::fs::read(s.dir.join("ptyhost.db-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "the token itself is stored"
        );
    }
    s.token_cli(&["revoke", cols[0]]).await;
    assert!(
        s.token_cli(&["list"])
            .await
            .lines()
            .find(|l| l.starts_with(cols[0]))
            .unwrap()
            .split('\t')
            .nth(6)
            != Some("-")
    );

    let bad = tokio::process::Command::new(bin())
        .args(["token", "create", "--scope", "pty:root", "--data-dir"])
        .arg(&s.dir)
        .output()
        .await
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scope"));
}

#[tokio::test]
async fn first_start_without_a_token_prints_one_admin_link_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = || async {
        let mut child = tokio::process::Command::new(bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let listening = lines.next_line().await.unwrap().unwrap();
        let next =
            tokio::time::timeout(std::time::Duration::from_millis(500), lines.next_line()).await;
        child.kill().await.unwrap();
        (listening, next.ok().and_then(|l| l.ok().flatten()))
    };
    let (listening, open) = run().await;
    let addr = listening.strip_prefix("listening on ").unwrap();
    let open = open.expect("an open line on first start");
    let token = open
        .strip_prefix(&format!("open {addr}/#token="))
        .expect(&open);
    assert!(token.starts_with("pth_"));
    let (_, again) = run().await;
    assert_eq!(again, None, "printed only on the first start");
}

/// Raw JSON on purpose: this pins the A2A 1.0 and 0.3 card member names.
#[tokio::test]
async fn agent_cards_advertise_the_pty_binding_and_extension_with_real_settings() {
    let s = TestServer::start(&[
        "--max-observers",
        "7",
        "--replay-frames",
        "1234",
        "--keyframe-interval-frames",
        "50",
    ])
    .await;
    let pure: Value = s
        .public(format!("http://{}/.well-known/agent-card.json", s.addr))
        .await;
    for field in [
        "name",
        "description",
        "version",
        "supportedInterfaces",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
    ] {
        assert!(!pure[field].is_null(), "{field}");
    }
    assert!(
        pure.get("bindings").is_none() && pure.get("url").is_none(),
        "the root card is pure 1.0"
    );
    let rest = &pure["supportedInterfaces"][0];
    assert_eq!(
        (
            rest["protocolBinding"].as_str(),
            rest["protocolVersion"].as_str()
        ),
        (Some("HTTP+JSON"), Some("1.0"))
    );
    assert_eq!(rest["url"], format!("http://{}/agents/local", s.addr));
    assert_eq!(pure["supportedInterfaces"][1]["protocolBinding"], "JSONRPC");
    assert_eq!(
        pure["supportedInterfaces"][1]["url"],
        format!("http://{}/agents/local/jsonrpc", s.addr)
    );
    let grpc = &pure["supportedInterfaces"][3];
    assert_eq!(
        (
            grpc["protocolBinding"].as_str(),
            grpc["protocolVersion"].as_str()
        ),
        (Some("GRPC"), Some("1.0"))
    );
    assert_eq!(grpc["url"], s.addr.as_str(), "a gRPC target: host and port");
    let iface = &pure["supportedInterfaces"][2];
    assert_eq!(
        iface["protocolBinding"],
        "https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1"
    );
    assert_eq!(
        iface["url"],
        format!(
            "ws://{}/agents/local/sessions/{{session_id}}/attach",
            s.addr
        )
    );
    assert_eq!(
        pure["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    let ext = &pure["capabilities"]["extensions"][0];
    assert_eq!(
        ext["uri"],
        "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"
    );
    assert_eq!(
        (
            ext["params"]["max_observers"].as_u64(),
            ext["params"]["replay_buffer_frames"].as_u64()
        ),
        (Some(7), Some(1234))
    );
    assert_eq!(ext["params"]["keyframe_interval_frames"], 50);

    let superset: Value = s.public(s.url("/.well-known/agent-card.json")).await;
    assert_eq!(superset["supportedInterfaces"], pure["supportedInterfaces"]);
    assert_eq!(
        superset["bindings"][0]["uri"],
        "https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1"
    );
    assert_eq!(superset["bindings"][0]["preference"], "secondary");
    assert_eq!(superset["protocolVersion"], "0.3.0");
    let missing = s
        .http
        .get(format!(
            "http://{}/agents/other/.well-known/agent-card.json",
            s.addr
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}
