use super::*;

#[tokio::test]
async fn health_and_readiness_answer_and_the_ui_page_is_served() {
    let s = TestServer::start(&[]).await;
    for path in ["/healthz", "/readyz"] {
        let r = s
            .http
            .get(format!("http://{}{path}", s.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let page = s
        .http
        .get(format!("http://{}/", s.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("Sign in") && html.contains("Access token"),
        "server-rendered sign-in"
    );
    assert!(html.contains("/pkg/ptyhost.") && html.contains(r#""xterm":"/vendor/xterm.mjs""#));
}

#[tokio::test]
async fn me_tells_the_callers_scope_and_binding() {
    let s = TestServer::start(&[]).await;
    let (status, me) = s.get("/me", ADMIN).await;
    assert!(me.get("token").is_none());
    let me: control::Me = serde_json::from_value(me).unwrap();
    assert_eq!(
        (status, me.scope.as_str(), me.label.as_deref()),
        (200, "pty:admin", Some("bootstrap"))
    );
    assert!(me.can_control());
    let sid = cat_session(&s).await;
    let bound = s.token("pty:observe", Some(&sid)).await;
    let (_, me) = s.get("/me", &bound).await;
    let me: control::Me = serde_json::from_value(me).unwrap();
    assert_eq!(
        (me.scope.as_str(), me.session_id.as_deref()),
        ("pty:observe", Some(sid.as_str()))
    );
    assert!(!me.can_control());
    assert_eq!(s.get("/me", "nope").await.0, 401);
}

#[tokio::test]
async fn a_browser_navigating_to_a_session_gets_the_page_and_an_api_client_the_json() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let url = format!("http://{}/sessions/{sid}", s.addr);
    let page = s
        .http
        .get(&url)
        .header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.text().await.unwrap().contains("importmap"));
    let json: Value = s
        .http
        .get(&url)
        .bearer_auth(ADMIN)
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let json: Session = serde_json::from_value(json).unwrap();
    assert_eq!(json.session_id, sid);
    assert_eq!(
        s.http.get(&url).send().await.unwrap().status(),
        401,
        "no Accept: the API answers"
    );
}

#[tokio::test]
async fn metrics_count_running_sessions_and_connections() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("observer").await;
    let resp = s
        .http
        .get(format!("http://{}/metrics", s.addr))
        .send()
        .await
        .unwrap();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().await.unwrap();
    for line in [
        "ptyhost_sessions_running 1",
        "ptyhost_pty_ws_connections 1",
        "ptyhost_tasks_running 0",
        "# TYPE ptyhost_sessions_running gauge",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

#[tokio::test]
async fn tokens_never_reach_the_logs() {
    let mut s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let control = s.token("pty:control", None).await;
    let link = s.share(&sid, json!({})).await;
    let share = link.token;
    let mut c = s.attach(&sid, &control).await;
    c.join("controller").await;
    let mut v = s.attach(&sid, &share).await;
    v.join("observer").await;
    let _ = upgrade_status(
        &s.ws_url(&sid),
        &[(
            "Sec-WebSocket-Protocol",
            &bearer_protocols("pth_wrong-secret"),
        )],
    )
    .await;
    let _ = s
        .http
        .get(s.url("/sessions"))
        .bearer_auth("pth_wrong-secret")
        .send()
        .await;
    let _ = s
        .http
        .get(s.url(&format!("/sessions?token={ADMIN}")))
        .send()
        .await;
    drop((c, v));
    s.stop().await;
    let log = s.stderr();
    assert!(log.contains("member joined"), "the log was captured");
    for secret in [ADMIN, control.as_str(), share.as_str(), "pth_wrong-secret"] {
        assert!(!log.contains(secret), "a token reached the log");
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, secret);
        assert!(!log.contains(&b64), "an encoded token reached the log");
    }
}

#[tokio::test]
async fn the_audit_log_records_attaches_denied_writes_role_changes_and_link_use_never_tokens() {
    let s = TestServer::start(&[]).await;
    let sid = cat_session(&s).await;
    let link = s.share(&sid, json!({ "label": "for bob" })).await;
    let (share_token, link_id) = (link.token, link.id);

    // Bob signs in and watches through the link, then tries to type.
    let (status, _) = s.get("/me", &share_token).await;
    assert_eq!(status, 200);
    let mut bob = s.attach(&sid, &share_token).await;
    bob.join("observer").await;
    let id = bob.input("rm -rf /\n").await;
    let refused = bob.expect_op("Error").await;
    assert_eq!(
        (id_of(&refused), error_of(&refused).code.as_str()),
        (id, "PERMISSION_DENIED")
    );

    // An operator takes control; the link is revoked.
    let mut alice = s.attach(&sid, ADMIN).await;
    alice.join("observer").await;
    alice
        .send("pty.request_role", json!({ "role": "controller" }))
        .await;
    alice.expect_kind("RoleAssigned").await;
    assert_eq!(
        s.delete(&format!("/sessions/{sid}/share/{link_id}"), ADMIN)
            .await
            .0,
        204
    );

    let wanted = [
        "share_link_created",
        "share_link_used",
        "attach",
        "observer_joined",
        "write_denied",
        "role_changed",
        "share_link_revoked",
    ];
    let records = tokio::time::timeout(WAIT, async {
        loop {
            let log: control::AuditRecords =
                s.get_as(&format!("/audit?session_id={sid}"), ADMIN).await;
            let records = log.records;
            let seen: Vec<&str> = records.iter().map(|r| r.event.as_str()).collect();
            if wanted.iter().all(|w| seen.contains(w)) {
                return records;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every event is recorded");
    let of = |event: &str| -> Vec<&control::AuditRecord> {
        records.iter().filter(|r| r.event == event).collect()
    };
    let share_uses: Vec<&str> = of("share_link_used")
        .iter()
        .filter_map(|r| match &r.detail {
            AuditDetail::Opened { to } => Some(to.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        share_uses.contains(&"sign_in") && share_uses.contains(&"attach"),
        "{share_uses:?}"
    );
    assert_eq!(of("write_denied")[0].token_id.as_ref(), Some(&link_id));
    assert!(matches!(
        &of("write_denied")[0].detail,
        AuditDetail::Refused { what, .. } if what == "input"
    ));
    assert_eq!(
        of("role_changed")[0].detail,
        AuditDetail::Role {
            from: Role::Observer,
            to: Role::Controller
        }
    );
    assert!(
        of("attach").iter().any(
            |r| matches!(&r.detail, AuditDetail::Attach { scope, .. } if scope == "pty:observe")
        )
    );

    // Neither the records nor the log hold a token's value.
    let text = serde_json::to_string(&records).unwrap();
    assert!(!text.contains(&share_token) && !text.contains(ADMIN));
    let log = s.stderr();
    assert!(
        log.contains("write_denied"),
        "audit events are tracing events too"
    );
    assert!(!log.contains(&share_token) && !log.contains(ADMIN));

    // Only admins read it.
    let control = s.token("pty:control", None).await;
    assert_eq!(s.get("/audit", &control).await.0, 403);
}

#[tokio::test]
async fn a_managed_tmux_session_survives_a_server_restart_and_a_crash_with_its_history() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = TestServer::start_in(tmp.path(), &[]).await;
    let ServerOp::Hello(hello) = typed(&s.attach(&cat_session(&s).await, ADMIN).await.hello).op
    else {
        panic!("no hello");
    };
    let hosts = hello.session_host;
    if !tmux_installed() {
        assert_eq!(
            hosts.supported_backends,
            ["native"],
            "only what is installed"
        );
        return;
    }
    assert_eq!(hosts.supported_backends, ["native", "tmux"]);
    assert_eq!(hosts.supported_classes, ["direct", "managed"]);
    let (status, created) = s
        .post(
            "/sessions",
            ADMIN,
            json!({ "argv": ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.1; done"], "session_class": "managed" }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let created: Session = serde_json::from_value(created).unwrap();
    assert_eq!(
        (
            created.session_backend.as_str(),
            created.session_class.as_str()
        ),
        ("tmux", "managed")
    );
    let sid = created.session_id;

    let mut c = s.attach(&sid, ADMIN).await;
    c.join("observer").await;
    let (mut seen, _) = output_until(&mut c, "tick-5").await;

    // An orderly stop: the client hears the server go, and no Closed.
    assert!(s.stop().await.success());
    let (_, frames) = c.until_close().await;
    assert!(frames.iter().all(|f| kind(f) != "Closed"));
    assert_eq!(goodbye_reason(frames.last().unwrap()), "server_shutdown");

    for restart in ["after a stop", "after a crash"] {
        s = TestServer::start_in(tmp.path(), &[]).await;
        assert_eq!(s.session(&sid).await.state, "running", "{restart}");
        // Resuming where the client left off: the sequence goes on, the program ran on.
        let mut c = s.attach(&sid, ADMIN).await;
        let flush = c
            .join_with(
                json!({ "role": "observer" }),
                json!({ "replay_from": seen }),
            )
            .await;
        assert!(
            flush
                .iter()
                .filter(|f| kind(f) == "Output")
                .all(|f| seq(f) > seen)
        );
        let later = tokio::time::timeout(WAIT, async {
            loop {
                let (last, text) = output_until(&mut c, "tick-").await;
                let ticks: Vec<u64> = text
                    .split("tick-")
                    .filter_map(|t| {
                        t.split(|ch: char| !ch.is_ascii_digit())
                            .next()?
                            .parse()
                            .ok()
                    })
                    .collect();
                if ticks.iter().any(|n| *n > 10) {
                    return last;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the program goes on {restart}"));
        assert!(
            later > seen,
            "{restart}: sequences continue ({later} after {seen})"
        );
        seen = later;
        if restart == "after a stop" {
            s.kill().await;
        }
    }

    // Ending it ends the program: one Closed, and the tmux session is gone.
    let mut c = s.attach(&sid, ADMIN).await;
    c.join("observer").await;
    assert_eq!(s.delete(&format!("/sessions/{sid}"), ADMIN).await.0, 200);
    c.expect_kind("Closed").await;
    let closed = s.wait_closed(&sid).await;
    assert_eq!(closed.state, "closed");
    let gone = std::process::Command::new("tmux")
        .arg("-S")
        .arg(tmp.path().canonicalize().unwrap().join("tmux.sock"))
        .args(["has-session", "-t", &format!("=ptyhost-{sid}")])
        .output()
        .unwrap();
    assert!(!gone.status.success());
}
