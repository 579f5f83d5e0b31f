//! Test harness: the real `ptyhost` binary on 127.0.0.1:0 with a temporary data dir, and a
//! tokio-tungstenite pty-ws client.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
pub use wire::a2a::{StreamResponse, Task, TaskState};
pub use wire::control::{ErrorBody, NewLink, Session};

mod a2a;
mod client;
mod proc;
pub use a2a::*;
pub use client::*;
pub use proc::{cpu_secs, rss_mib};

pub const ADMIN: &str = "test-admin-token-0123456789";
pub const WAIT: Duration = Duration::from_secs(10);

pub struct TestServer {
    child: Option<Child>,
    pub addr: String,
    pub dir: PathBuf,
    /// The `--database-url` it was started with, which `token_cli` uses too.
    pub database_url: Option<String>,
    _tmp: Option<tempfile::TempDir>,
    pub http: reqwest::Client,
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ptyhost")
}

/// A new, empty database on the PostgreSQL at `PTYHOST_TEST_POSTGRES_URL` (the test
/// command starts a throwaway one), as a URL. Without it: `None` on a developer's machine,
/// a failure in CI, where every PostgreSQL test must run.
pub async fn postgres_database() -> Option<String> {
    let Ok(admin) = std::env::var("PTYHOST_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "PTYHOST_TEST_POSTGRES_URL must name a PostgreSQL in CI (scripts/test.sh starts one)"
        );
        eprintln!("PTYHOST_TEST_POSTGRES_URL is not set: the PostgreSQL half is skipped");
        return None;
    };
    let name = format!("t_{}", uuid::Uuid::now_v7().simple());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
        .await
        .expect("the test PostgreSQL answers");
    sqlx::Executor::execute(
        &mut conn,
        sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")),
    )
    .await
    .unwrap();
    let (base, _) = admin.rsplit_once('/').unwrap();
    Some(format!("{base}/{name}"))
}

impl TestServer {
    pub async fn start(args: &[&str]) -> TestServer {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut s = TestServer::start_in(&dir, args).await;
        s._tmp = Some(tmp);
        s
    }

    /// Starts (or restarts) a server on an existing data dir; stderr goes to `DIR/stderr.log`.
    pub async fn start_in(dir: &Path, args: &[&str]) -> TestServer {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("stderr.log"))
            .unwrap();
        let listen = if args.contains(&"--listen") {
            None
        } else {
            Some("127.0.0.1:0")
        };
        let mut child = Command::new(bin())
            .arg("serve")
            .args(listen.map(|l| ["--listen", l]).into_iter().flatten())
            .args(["--bootstrap-token", ADMIN])
            .arg("--data-dir")
            .arg(dir)
            .args(args)
            // Shells read no dotfiles of this machine's user (a pyenv rehash lock in
            // ~/.bashrc can stall every bash for a minute): tests do not depend on them.
            .env("HOME", dir)
            .env(
                "RUST_LOG",
                "debug,sqlx=warn,hyper=info,tungstenite=info,tokio_tungstenite=info",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("ptyhost starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                let addr = line
                    .strip_prefix("listening on http://")
                    .or_else(|| line.strip_prefix("listening on https://"));
                if let Some(a) = addr {
                    // A wildcard listen address is reached through loopback.
                    return a.replace("0.0.0.0", "127.0.0.1");
                }
            }
            panic!("ptyhost exited before listening")
        })
        .await
        .expect("listening line");
        let database_url = args
            .iter()
            .position(|a| *a == "--database-url")
            .map(|i| args[i + 1].to_owned());
        TestServer {
            child: Some(child),
            addr,
            dir: dir.to_path_buf(),
            database_url,
            _tmp: None,
            http: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}/agents/local{path}", self.addr)
    }

    pub fn ws_url(&self, sid: &str) -> String {
        format!("ws://{}/agents/local/sessions/{sid}/attach", self.addr)
    }

    /// GETs a public document (a card, the preflight) at a full URL as JSON.
    pub async fn public(&self, url: String) -> Value {
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Calls the API under `B` with a bearer token; returns the status and the JSON body
    /// (`null` when there is none).
    pub async fn call(&self, req: reqwest::RequestBuilder, token: &str) -> (u16, Value) {
        let r = req.bearer_auth(token).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call(self.http.get(self.url(path)), token).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.call(self.http.post(self.url(path)).json(&body), token)
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> (u16, Value) {
        self.call(self.http.delete(self.url(path)), token).await
    }

    /// Calls an A2A 1.0 route (`path` from the root) with the version and media headers;
    /// GET, or POST with `body` (`{}` when none).
    pub async fn a2a(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("http://{}{path}", self.addr);
        let req = match method {
            "GET" => self.http.get(url),
            _ => self
                .http
                .post(url)
                .header("Content-Type", "application/a2a+json")
                .body(body.unwrap_or(json!({})).to_string()),
        };
        self.call(req.header("A2A-Version", "1.0"), token).await
    }

    /// POSTs to a streaming route; returns the whole server-sent event text once the
    /// stream ends.
    pub async fn sse(&self, path: &str, body: &Value, a2a_version: Option<&str>) -> String {
        let mut req = self
            .http
            .post(format!("http://{}{path}", self.addr))
            .bearer_auth(ADMIN)
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if let Some(v) = a2a_version {
            req = req.header("A2A-Version", v);
        }
        let resp = req.send().await.unwrap();
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "{path} answers with a stream"
        );
        resp.text().await.unwrap()
    }

    /// SIGTERM, then wait for the process to finish its orderly shutdown.
    pub async fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        tokio::time::timeout(WAIT, child.wait())
            .await
            .unwrap()
            .unwrap()
    }

    /// SIGKILL: a crash, with no chance to flush or say goodbye.
    pub async fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().await.unwrap();
    }

    /// SIGKILL, then a new server on the same data dir with `args`.
    pub async fn crash_and_restart(&mut self, args: &[&str]) {
        self.kill().await;
        let mut next = TestServer::start_in(&self.dir, args).await;
        self.child = next.child.take();
        self.addr = next.addr.clone();
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("http://{}/metrics", self.addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// A metric's value from `/metrics`.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self.metrics().await;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in\n{text}"))
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().and_then(|c| c.id()).expect("running")
    }

    /// The server's resident memory, in MiB.
    pub fn rss_mib(&self) -> f64 {
        rss_mib(self.pid())
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    /// Creates a session from `body` (a `CreateSession`, or on purpose something else).
    pub async fn create_session(&self, body: Value) -> Session {
        let resp = self
            .http
            .post(self.url("/sessions"))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "create session");
        resp.json().await.unwrap()
    }

    /// Starts a session running `command` through `/bin/sh -lc`; returns its id.
    pub async fn command_session(&self, command: &str) -> String {
        self.create_session(json!({ "command": command }))
            .await
            .session_id
    }

    pub async fn session(&self, sid: &str) -> Session {
        self.http
            .get(self.url(&format!("/sessions/{sid}")))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Waits until the session's state is `closed`.
    pub async fn wait_closed(&self, sid: &str) -> Session {
        self.wait_until(sid, |s| s.state == "closed").await
    }

    /// Waits until the session view satisfies `ready` (roles released, retention pruned…).
    pub async fn wait_until(&self, sid: &str, ready: impl Fn(&Session) -> bool) -> Session {
        tokio::time::timeout(WAIT, async {
            loop {
                let s = self.session(sid).await;
                if ready(&s) {
                    return s;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the session reaches the expected state")
    }

    /// Runs `ptyhost session ARGS` against this server as the admin; its stdout.
    pub async fn session_cli(&self, args: &[&str]) -> String {
        let out = Command::new(bin())
            .arg("session")
            .args(args)
            .args(["--url", &self.url(""), "--token", ADMIN])
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `ptyhost token …` against this server's data dir; returns stdout.
    pub async fn token_cli(&self, args: &[&str]) -> String {
        let store = match &self.database_url {
            Some(url) => ["--database-url".into(), url.clone()],
            None => ["--data-dir".into(), self.dir.display().to_string()],
        };
        let out = Command::new(bin())
            .arg("token")
            .args(args)
            .args(store)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "token {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Asks `GET /sessions` with `token` until the server refuses it (a token revoked by
    /// another process is, within the revocation watcher's period); panics after 2 s.
    pub async fn until_refused(&self, token: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while self.get("/sessions", token).await.0 != 401 {
            assert!(
                std::time::Instant::now() < deadline,
                "the token is still taken"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn token(&self, scope: &str, session: Option<&str>) -> String {
        let mut args = vec!["create", "--scope", scope];
        if let Some(s) = session {
            args.extend(["--session", s]);
        }
        self.token_cli(&args).await.trim().to_owned()
    }

    pub async fn attach(&self, sid: &str, token: &str) -> Client {
        Client::connect(&self.ws_url(sid), token).await
    }

    /// Joins closed session `sid` from `replay_from`; every frame up to its goodbye.
    pub async fn replay_closed(&self, sid: &str, replay_from: u64) -> Vec<Value> {
        let mut c = self.attach(sid, ADMIN).await;
        c.send_env(
            "pty.join_session",
            json!({ "role": "observer" }),
            json!({ "replay_from": replay_from }),
        )
        .await;
        c.until_close().await.1
    }

    /// Creates an observer link to `sid` with `body` (`ttl_secs`, `label`); the created link.
    pub async fn share(&self, sid: &str, body: Value) -> NewLink {
        let (status, link) = self
            .post(&format!("/sessions/{sid}/share"), ADMIN, body)
            .await;
        assert_eq!(status, 201, "{link}");
        serde_json::from_value(link).expect("a new link")
    }

    /// GETs `path` under `B`, which must answer 200 with a `T`.
    pub async fn get_as<T: DeserializeOwned>(&self, path: &str, token: &str) -> T {
        let (status, body) = self.get(path, token).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_value(body).unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }
}

/// A control-plane refusal's `error.code`.
pub fn error_code(body: &Value) -> String {
    let refusal: ErrorBody = serde_json::from_value(body.clone())
        .unwrap_or_else(|e| panic!("not an error ({e}): {body}"));
    assert!(!refusal.error.message.is_empty(), "{body}");
    refusal.error.code
}

impl Drop for TestServer {
    /// A failing test leaves its server's log behind and names it.
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(tmp) = self._tmp.take()
        {
            let kept = tmp.keep();
            eprintln!("server log kept: {}", kept.join("stderr.log").display());
        }
    }
}
