//! A sandboxed session's network: the egress proxy that is its only way out, its allowlist
//! changed while it runs, and port previews into it. Loopback only: the targets are
//! servers this test runs on 127.0.0.1 of the host, which a session with a network
//! namespace of its own reaches only through ptyhost. Each boundary's probe also runs on
//! a server with `--sandbox off`, where it gets through.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use wire::control::{AuditDetail, AuditRecords};

/// The egress proxy's address inside a session.
const PROXY: &str = "http://127.0.0.1:3128";
/// curl through the proxy even to a loopback address, which the session's `NO_PROXY`
/// names (its own loopback is reached directly).
const VIA_PROXY: &str = "--noproxy '' --proxy http://127.0.0.1:3128";

/// An HTTP server on the host's loopback that answers every request with `body`; its port.
async fn http_server(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// A server that streams bytes forever, 4 KiB every 20 ms; its port, and a channel that
/// says when a download starts (`true`) and when its connection is gone (`false`).
async fn endless_server() -> (u16, mpsc::UnboundedReceiver<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\r\n")
                    .await;
                let _ = tx.send(true);
                while conn.write_all(&[b'x'; 4096]).await.is_ok() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let _ = tx.send(false);
            });
        }
    });
    (port, rx)
}

/// Creates a shell session (as the admin) with `sandbox`; its id.
async fn session(s: &TestServer, sandbox: Value) -> String {
    let (status, created) = s
        .post("/sessions", ADMIN, json!({ "sandbox": sandbox }))
        .await;
    assert_eq!(status, 201, "{created}");
    serde_json::from_value::<Session>(created)
        .unwrap()
        .session_id
}

/// Runs `command` in session `sid` as an A2A task; its output.
async fn run(s: &TestServer, sid: &str, command: &str) -> String {
    let message = json!({ "message": {
        "role": "ROLE_USER", "messageId": uuid::Uuid::now_v7().to_string(), "contextId": sid,
        "parts": [{ "text": command }],
    }});
    let (status, body) = s.a2a("POST", "/message:send", ADMIN, Some(message)).await;
    assert_eq!(status, 200, "{body}");
    artifact_text(&task_in(&body))
}

/// Starts `command` in session `sid` without waiting for it.
async fn start(s: &TestServer, sid: &str, command: &str) {
    let message = json!({
        "message": {
            "role": "ROLE_USER", "messageId": uuid::Uuid::now_v7().to_string(), "contextId": sid,
            "parts": [{ "text": command }],
        },
        "configuration": { "returnImmediately": true },
    });
    let (status, body) = s.a2a("POST", "/message:send", ADMIN, Some(message)).await;
    assert_eq!(status, 200, "{body}");
}

/// The HTTP status `curl ARGS` got, as the session's shell prints it.
async fn curl_status(s: &TestServer, sid: &str, args: &str) -> String {
    let out = run(
        s,
        sid,
        &format!("curl -s -o /dev/null -m 5 -w 'status=%{{http_code}}' {args}"),
    )
    .await;
    out.split("status=").nth(1).unwrap_or("").trim().to_owned()
}

async fn audit(s: &TestServer, sid: &str) -> Vec<wire::control::AuditRecord> {
    let log: AuditRecords = s.get_as(&format!("/audit?session_id={sid}"), ADMIN).await;
    log.records
}

async fn patch_network(s: &TestServer, sid: &str, token: &str, network: Value) -> (u16, Value) {
    let req = s
        .http
        .patch(s.url(&format!("/sessions/{sid}")))
        .json(&json!({ "sandbox": { "network": network } }));
    s.call(req, token).await
}

#[tokio::test]
async fn an_allowed_target_is_reached_only_through_the_proxy_and_every_other_is_refused_and_audited()
 {
    let (p1, p2) = (http_server("from-p1").await, http_server("from-p2").await);
    let on = TestServer::start(&[]).await;
    let sid = session(
        &on,
        json!({ "network": { "allow": [format!("127.0.0.1:{p1}"), format!("localhost:{p2}")] } }),
    )
    .await;
    let view = on.session(&sid).await;
    assert_eq!(
        view.sandbox.unwrap().network,
        wire::control::Network::Allow {
            allow: vec![format!("127.0.0.1:{p1}"), format!("localhost:{p2}")]
        }
    );

    // Through the proxy, as plain HTTP and as a CONNECT tunnel.
    let fetched = run(
        &on,
        &sid,
        &format!("curl -s -m 5 {VIA_PROXY} http://127.0.0.1:{p1}/"),
    )
    .await;
    assert!(fetched.contains("from-p1"), "{fetched:?}");
    let tunneled = run(
        &on,
        &sid,
        &format!("curl -s -m 5 --proxytunnel {VIA_PROXY} http://127.0.0.1:{p1}/"),
    )
    .await;
    assert!(tunneled.contains("from-p1"), "{tunneled:?}");
    // The environment points programs at it.
    let env = run(&on, &sid, "echo $HTTPS_PROXY").await;
    assert!(env.contains(PROXY), "{env:?}");

    // Another port: 403 from the proxy. A name rule never reaches a loopback address.
    assert_eq!(
        curl_status(&on, &sid, &format!("{VIA_PROXY} http://127.0.0.1:{p2}/")).await,
        "403"
    );
    assert_eq!(
        curl_status(&on, &sid, &format!("{VIA_PROXY} http://localhost:{p2}/")).await,
        "403"
    );

    // Around the proxy there is no way out.
    let direct = run(
        &on,
        &sid,
        &format!("curl -s -m 5 --noproxy '*' http://127.0.0.1:{p1}/; echo curl=$?"),
    )
    .await;
    assert!(
        !direct.contains("from-p1") && !direct.contains("curl=0"),
        "{direct:?}"
    );
    let raw = run(
        &on,
        &sid,
        "(echo > /dev/tcp/192.0.2.1/80) 2>&1; echo tcp=$?",
    )
    .await;
    assert!(raw.contains("tcp=1"), "{raw:?}");

    let records = audit(&on, &sid).await;
    let denied: Vec<&AuditDetail> = (records.iter())
        .filter(|r| r.event == "egress_denied")
        .map(|r| &r.detail)
        .collect();
    assert!(
        denied.iter().any(|d| matches!(d, AuditDetail::EgressDenied { target, rules } if *target == format!("127.0.0.1:{p2}") && rules.len() == 2)),
        "{denied:?}"
    );
    assert!(
        records.iter().any(|r| matches!(&r.detail, AuditDetail::Egress { target, received, cut: false, .. } if *target == format!("127.0.0.1:{p1}") && *received > 0)),
        "{records:?}"
    );

    // The same probes get through a server that does not sandbox.
    let off = TestServer::start(&["--sandbox", "off"]).await;
    let plain = off.create_session(json!({})).await.session_id;
    let direct = run(
        &off,
        &plain,
        &format!("curl -s -m 5 --noproxy '*' http://127.0.0.1:{p2}/"),
    )
    .await;
    assert!(direct.contains("from-p2"), "{direct:?}");
}

#[tokio::test]
async fn a_changed_allowlist_lets_the_next_connection_through_within_a_second_and_cuts_an_open_download()
 {
    let p1 = http_server("from-p1").await;
    let (p3, mut downloads) = endless_server().await;
    let s = TestServer::start(&[]).await;
    let rule = |p: u16| format!("127.0.0.1:{p}");
    let sid = session(&s, json!({ "network": { "allow": [rule(p3)] } })).await;
    assert_eq!(
        curl_status(&s, &sid, &format!("{VIA_PROXY} http://127.0.0.1:{p1}/")).await,
        "403"
    );

    // A control token may narrow the list, never widen it.
    let control = s.token("pty:control", None).await;
    let (status, body) =
        patch_network(&s, &sid, &control, json!({ "allow": [rule(p1), rule(p3)] })).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) =
        patch_network(&s, &sid, ADMIN, json!({ "allow": [rule(p1), rule(p3)] })).await;
    assert_eq!(status, 200, "{body}");
    let changed = Instant::now();
    assert_eq!(
        curl_status(&s, &sid, &format!("{VIA_PROXY} http://127.0.0.1:{p1}/")).await,
        "200"
    );
    assert!(
        changed.elapsed() < Duration::from_secs(2),
        "{:?}",
        changed.elapsed()
    );

    // A download in flight; removing its target cuts it.
    start(
        &s,
        &sid,
        &format!("curl -s {VIA_PROXY} http://127.0.0.1:{p3}/ > /dev/null"),
    )
    .await;
    let started = tokio::time::timeout(WAIT, downloads.recv()).await.unwrap();
    assert_eq!(started, Some(true));
    let (status, body) = patch_network(&s, &sid, &control, json!({ "allow": [rule(p1)] })).await;
    assert_eq!(status, 200, "{body}");
    let cut_at = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(3), downloads.recv())
        .await
        .unwrap();
    assert_eq!(ended, Some(false));
    assert!(
        cut_at.elapsed() < Duration::from_secs(1),
        "cut after {:?}",
        cut_at.elapsed()
    );
    let view = s.session(&sid).await;
    assert_eq!(
        view.sandbox.unwrap().network,
        wire::control::Network::Allow {
            allow: vec![rule(p1)]
        }
    );
    let records = audit(&s, &sid).await;
    assert!(
        records.iter().any(|r| matches!(&r.detail, AuditDetail::Egress { target, cut: true, received, .. } if *target == rule(p3) && *received > 0)),
        "{records:?}"
    );
    // The CLI sets it too.
    let shown = s
        .session_cli(&["net", &sid, "--allow", &rule(p1), "--allow", &rule(p3)])
        .await;
    assert_eq!(
        shown.trim(),
        json!({ "allow": [rule(p1), rule(p3)] }).to_string()
    );
    s.session_cli(&["net", &sid, "--allow", &rule(p1)]).await;
    // "host" cannot be had live; nonsense is refused and changes nothing.
    assert_eq!(patch_network(&s, &sid, ADMIN, json!("host")).await.0, 409);
    assert_eq!(
        patch_network(&s, &sid, ADMIN, json!({ "allow": ["nope"] }))
            .await
            .0,
        400
    );
    let view = s.session(&sid).await;
    assert_eq!(
        view.sandbox.unwrap().network,
        wire::control::Network::Allow {
            allow: vec![rule(p1)]
        }
    );
}

/// A WebSocket echo server for the session's python3 (standard library only).
const ECHO: &str = r#"
import base64, hashlib, socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9000)); s.listen()
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(4096)
    key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key")][0]
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    while True:
        h = c.recv(2)
        if len(h) < 2: return
        op, n = h[0] & 15, h[1] & 127
        mask = c.recv(4); p = b""
        while len(p) < n: p += c.recv(n - len(p))
        p = bytes(b ^ mask[i % 4] for i, b in enumerate(p))
        if op == 8: return
        c.sendall(bytes([0x80 | op, len(p)]) + p)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

#[tokio::test]
async fn a_dev_server_inside_a_session_is_previewed_with_a_token_or_an_observer_link_and_listed() {
    // Public, with no preview domain: previews have no origins of their own, so the API's
    // paths serve them, sandboxed.
    let s = TestServer::start(&["--public-url", "http://ptyhost.invalid"]).await;
    let sid = session(&s, json!({ "network": "none" })).await;
    let workspace = std::path::PathBuf::from(s.session(&sid).await.workspace.unwrap());
    std::fs::write(workspace.join("hello.txt"), "hello from inside\n").unwrap();
    std::fs::write(workspace.join("echo.py"), ECHO).unwrap();
    start(
        &s,
        &sid,
        "python3 -m http.server 8000 --bind 127.0.0.1 & python3 echo.py & wait",
    )
    .await;
    let deadline = Instant::now() + WAIT;
    let ports = loop {
        let listed = s.session(&sid).await.ports.unwrap_or_default();
        assert!(listed.iter().all(|l| l.protocol == "tcp"), "{listed:?}");
        let ports: Vec<u16> = listed.iter().map(|l| l.port).collect();
        if ports.contains(&8000) && ports.contains(&9000) || Instant::now() > deadline {
            break ports;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ports, [8000, 9000], "the proxy's own port is not listed");
    let list: wire::control::SessionList = s.get_as("/sessions", ADMIN).await;
    let listed = list.sessions.iter().find(|l| l.session_id == sid).unwrap();
    let in_list: Vec<u16> = listed.ports.iter().flatten().map(|l| l.port).collect();
    assert_eq!(
        in_list,
        [8000, 9000],
        "the sessions list carries the same ports"
    );
    let listed = s.session_cli(&["ports", &sid]).await;
    assert!(
        listed.contains(&format!(
            "8000\t{}/ports/8000/",
            s.url(&format!("/sessions/{sid}"))
        )),
        "{listed}"
    );

    let url = |path: &str| s.url(&format!("/sessions/{sid}/ports/8000/{path}"));
    let control = s.token("pty:control", None).await;
    let r = s
        .http
        .get(url("hello.txt"))
        .bearer_auth(&control)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("sandbox "),
        "a page under the API's origin runs as an opaque origin"
    );
    assert_eq!(r.text().await.unwrap(), "hello from inside\n");
    let r = s.http.get(url("hello.txt")).send().await.unwrap();
    assert_eq!(r.status(), 401, "no token, no preview");
    let r = s
        .http
        .get(s.url(&format!("/sessions/{sid}/ports/8001/")))
        .bearer_auth(&control)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("nothing answers on port 8001")
    );

    // An observer link: its page trades the token for a cookie scoped to the preview.
    let link = s.share(&sid, json!({})).await;
    let sign_in = s
        .http
        .post(url(".ptyhost-sign-in"))
        .bearer_auth(&link.token)
        .send()
        .await
        .unwrap();
    assert_eq!(sign_in.status(), 204);
    let cookie = sign_in.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains(&format!("Path=/agents/local/sessions/{sid}/ports/8000/")),
        "{cookie}"
    );
    assert!(
        cookie.contains("HttpOnly") && !cookie.contains(&link.token),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let r = s
        .http
        .get(url("hello.txt"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = s
        .http
        .post(url("hello.txt"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "an observer only reads");
    let r = s
        .http
        .get(url(""))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains(".ptyhost-sign-in"));

    // A WebSocket server inside, through the preview.
    let ws_url = format!("ws://{}/agents/local/sessions/{sid}/ports/9000/", s.addr);
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(ws_url)
            .unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {control}").parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::Text(
        "echo me".into(),
    ))
    .await
    .unwrap();
    let back = tokio::time::timeout(WAIT, ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(back.into_text().unwrap().as_str(), "echo me");

    let records = audit(&s, &sid).await;
    assert!(
        records.iter().any(|r| matches!(
            &r.detail,
            AuditDetail::Preview {
                port: 8000,
                status: 200,
                ..
            }
        )),
        "{records:?}"
    );
    // A session on the host's network has no namespace to preview.
    let off = TestServer::start(&["--sandbox", "off"]).await;
    let plain = off.create_session(json!({})).await.session_id;
    let r = off
        .http
        .get(off.url(&format!("/sessions/{plain}/ports/8000/")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
}

fn port_of(s: &TestServer) -> u16 {
    s.addr.parse::<std::net::SocketAddr>().unwrap().port()
}

/// A client that reaches `host` (a preview's own origin) at the server, as a browser does
/// for any `*.localhost`, and shows redirects rather than following them.
fn browser_for(s: &TestServer, host: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .resolve(host, s.addr.parse().unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_browser_is_sent_to_the_previews_own_origin_where_a_link_signs_in_and_no_api_is_served() {
    let s = TestServer::start(&[]).await;
    let sid = session(&s, json!({ "network": "none" })).await;
    let workspace = std::path::PathBuf::from(s.session(&sid).await.workspace.unwrap());
    std::fs::write(workspace.join("hello.txt"), "hello from inside\n").unwrap();
    start(&s, &sid, "python3 -m http.server 8000 --bind 127.0.0.1").await;
    let host = format!("8000-{sid}.localhost");
    let origin = format!("http://{host}:{}/", port_of(&s));
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let ports = s.session(&sid).await.ports.unwrap_or_default();
        if !ports.is_empty() || Instant::now() > deadline {
            break ports;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(listed[0].url.as_deref(), Some(origin.as_str()));
    let browser = browser_for(&s, &host);

    // A browser at the API's path, without a bearer, is sent to the preview's origin.
    let r = browser
        .get(s.url(&format!("/sessions/{sid}/ports/8000/hello.txt?x=1")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 307);
    assert_eq!(r.headers()["location"], format!("{origin}hello.txt?x=1"));

    // There, without credentials: the sign-in page, which posts to the origin's root.
    let r = browser
        .get(format!("{origin}hello.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains(r#""/.ptyhost-sign-in""#));
    let link = s.share(&sid, json!({})).await;
    let sign_in = browser
        .post(format!("{origin}.ptyhost-sign-in"))
        .bearer_auth(&link.token)
        .send()
        .await
        .unwrap();
    assert_eq!(sign_in.status(), 204);
    let cookie = sign_in.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("; Path=/;"),
        "host-only, for this origin: {cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let r = browser
        .get(format!("{origin}hello.txt"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        !r.headers().contains_key("content-security-policy"),
        "its own origin needs no sandbox"
    );
    assert_eq!(r.text().await.unwrap(), "hello from inside\n");

    // Every path of the origin is the preview's: the API is not there, even to an admin.
    let r = browser
        .get(format!("{origin}agents/local/sessions"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(
        r.headers()["server"]
            .to_str()
            .unwrap()
            .contains("SimpleHTTP"),
        "answered by the server inside"
    );
    // And another session's origin takes none of this one's cookies or tokens.
    let other = session(&s, json!({ "network": "none" })).await;
    let other_host = format!("8000-{other}.localhost");
    let r = browser_for(&s, &other_host)
        .get(format!("http://{other_host}:{}/", port_of(&s)))
        .bearer_auth(&link.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "a link for one session sees no other");
}

#[tokio::test]
async fn a_session_paused_before_anyone_asked_for_its_ports_still_lists_them_at_once() {
    let s = TestServer::start(&[]).await;
    let sid = session(&s, json!({ "network": "none" })).await;
    start(&s, &sid, "python3 -m http.server 8000 --bind 127.0.0.1").await;
    // Its ports are not asked for until the session is frozen, net agent and all.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, paused) = s
        .post(&format!("/sessions/{sid}:pause"), ADMIN, json!({}))
        .await;
    assert_eq!(status, 200, "{paused}");
    let asked = Instant::now();
    let listed = s.session(&sid).await;
    assert!(listed.paused.is_some(), "{listed:?}");
    let ports: Vec<u16> = listed.ports.iter().flatten().map(|l| l.port).collect();
    assert_eq!(ports, [8000]);
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(1), "listed after {took:?}");
}
