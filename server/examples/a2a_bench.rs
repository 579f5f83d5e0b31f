//! GetTask and SendMessage(returnImmediately) requests per second on ptyhost against the
//! same operations on a2a-sdk's own Python server with a trivial agent, side by side in one
//! run, over HTTP+JSON 1.0; one summary line per figure, with the ratio. Then the same two
//! operations on ptyhost over gRPC, beside its HTTP+JSON figures (the medians of three
//! alternating rounds, with the server's CPU time per request; HTTP+JSON both over a
//! connection per client and over one shared HTTP/2 connection, as one gRPC channel; gRPC over
//! tonic's channels, and over bare h2 connections that send a call in one write, as the C-core
//! and Go clients do), and with `PTYHOST_BENCH_POSTGRES_URL` on PostgreSQL, beside SQLite.
//!
//!     scripts/bench-a2a.sh            (installs the Python side, builds, runs this)
//!     cargo run --release -p server --example a2a_bench -- PYTHON [PTYHOST_BIN] [SECS] [CONCURRENCY]
//!
//! ptyhost runs `--executor conformance` (its trivial scripted agent), so both sides do
//! protocol work only; ptyhost also authenticates every request and persists every task
//! transition in SQLite, the baseline keeps tasks in memory without auth.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "bench-admin-token";

/// A server under test: where it listens and how it is asked.
struct Target {
    name: &'static str,
    base: String,
    token: Option<&'static str>,
    child: tokio::process::Child,
}

/// How HTTP+JSON's clients reach a server.
#[derive(Clone)]
enum Http {
    /// reqwest's pool: HTTP/1.1, a connection per concurrent client.
    Pool(reqwest::Client),
    /// One HTTP/2 connection (prior knowledge) that every client's requests share, as one
    /// gRPC channel is shared.
    OneHttp2(Box<HyperClient>),
}

type HyperClient =
    hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, String>;

impl Http {
    fn pool(concurrency: usize) -> anyhow::Result<Http> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .build()?;
        Ok(Http::Pool(client))
    }

    fn one_http2() -> Http {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .http2_only(true)
                .build_http();
        Http::OneHttp2(Box::new(client))
    }

    /// One request; its status and body.
    async fn call(
        &self,
        method: hyper::Method,
        url: String,
        token: Option<&str>,
        body: Option<String>,
    ) -> anyhow::Result<(hyper::StatusCode, bytes::Bytes)> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(url)
            .header("A2A-Version", "1.0");
        if let Some(t) = token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header("Content-Type", "application/json");
        }
        let req = req.body(body.unwrap_or_default())?;
        match self {
            Http::Pool(client) => {
                let resp = client.execute(req.try_into()?).await?;
                Ok((resp.status(), resp.bytes().await?))
            }
            Http::OneHttp2(client) => {
                use http_body_util::BodyExt;
                let resp = client.request(req).await?;
                let status = resp.status();
                Ok((status, resp.into_body().collect().await?.to_bytes()))
            }
        }
    }
}

impl Target {
    /// SendMessage(returnImmediately); returns the task id.
    async fn send(&self, http: &Http, n: u64) -> anyhow::Result<String> {
        let body = json!({
            "message": { "messageId": format!("tck-complete-task-{n}"), "role": "ROLE_USER", "parts": [{ "text": "hi" }] },
            "configuration": { "returnImmediately": true },
        });
        let url = format!("{}/message:send", self.base);
        let (status, body) = http
            .call(hyper::Method::POST, url, self.token, Some(body.to_string()))
            .await?;
        anyhow::ensure!(status.is_success(), "SendMessage: {status}");
        let v: Value = serde_json::from_slice(&body)?;
        v["task"]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("SendMessage answered no task: {v}"))
    }

    async fn get(&self, http: &Http, id: &str) -> anyhow::Result<()> {
        let url = format!("{}/tasks/{id}", self.base);
        let (status, _) = http.call(hyper::Method::GET, url, self.token, None).await?;
        anyhow::ensure!(status.is_success(), "GetTask: {status}");
        Ok(())
    }

    /// Resident memory of the server process, in MiB.
    fn rss_mib(&self) -> f64 {
        self.child.id().map_or(0.0, common::proc::rss_mib)
    }
}

#[derive(Clone, Copy)]
enum Op {
    GetTask,
    SendMessage,
}

/// What one figure measured: requests per second, and the server's CPU time per request.
#[derive(Clone, Copy)]
struct Rate {
    per_sec: f64,
    cpu_us: f64,
}

impl Rate {
    /// Counts `done` requests over the window that `window` opened, on the server `pid`.
    fn of(done: u64, window: (Instant, f64), pid: u32) -> Self {
        let cpu = common::proc::cpu_secs(pid) - window.1;
        Rate {
            per_sec: done as f64 / window.0.elapsed().as_secs_f64(),
            cpu_us: cpu * 1e6 / done.max(1) as f64,
        }
    }

    /// The median of `rounds`, figure by figure.
    fn median(rounds: &[Rate]) -> Rate {
        let mut per_sec: Vec<f64> = rounds.iter().map(|r| r.per_sec).collect();
        let mut cpu_us: Vec<f64> = rounds.iter().map(|r| r.cpu_us).collect();
        Rate {
            per_sec: common::stats::median(&mut per_sec),
            cpu_us: common::stats::median(&mut cpu_us),
        }
    }

    /// Opens a measuring window on the server `pid`.
    fn window(pid: u32) -> (Instant, f64) {
        (Instant::now(), common::proc::cpu_secs(pid))
    }
}

/// Requests per second of `op` with `concurrency` clients for `secs` (after a 1 s warm-up),
/// over reqwest's pool.
async fn rate(target: &Arc<Target>, op: Op, secs: f64, concurrency: usize) -> anyhow::Result<Rate> {
    rate_over(Http::pool(concurrency)?, target, op, secs, concurrency).await
}

/// `rate`, over `http`.
async fn rate_over(
    http: Http,
    target: &Arc<Target>,
    op: Op,
    secs: f64,
    concurrency: usize,
) -> anyhow::Result<Rate> {
    let task = target.send(&http, 0).await?;
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let measuring = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = Instant::now() + Duration::from_secs_f64(secs + 1.0);
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let (target, http, task) = (target.clone(), http.clone(), task.clone());
        let (done, failed, measuring) = (done.clone(), failed.clone(), measuring.clone());
        workers.push(tokio::spawn(async move {
            let mut n = (w as u64) << 32;
            while Instant::now() < stop {
                n += 1;
                let ok = match op {
                    Op::GetTask => target.get(&http, &task).await.is_ok(),
                    Op::SendMessage => target.send(&http, n).await.is_ok(),
                };
                if measuring.load(Ordering::Relaxed) {
                    if ok { &done } else { &failed }.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = target.child.id().unwrap_or_default();
    measuring.store(true, Ordering::Relaxed);
    let window = Rate::window(pid);
    for w in workers {
        w.await?;
    }
    let rate = Rate::of(done.load(Ordering::Relaxed), window, pid);
    let failed = failed.load(Ordering::Relaxed);
    anyhow::ensure!(failed == 0, "{}: {failed} requests failed", target.name);
    Ok(rate)
}

/// A gRPC client's connection to the server.
#[derive(Clone)]
enum GrpcClient {
    /// tonic's channel: hyper's HTTP/2 client, which writes a request's HEADERS frame and
    /// its DATA in two writes, so the server receives two segments per call.
    Tonic(tonic::transport::Channel),
    /// A bare h2 connection that queues a call's HEADERS and its one DATA frame (with
    /// END_STREAM) together, so they leave in one write, as the C-core and Go clients send
    /// a unary call and as HTTP+JSON's clients send a request.
    OneWrite {
        send: h2::client::SendRequest<bytes::Bytes>,
        base: String,
    },
}

impl GrpcClient {
    async fn connect(base: &str, one_write: bool) -> anyhow::Result<GrpcClient> {
        if !one_write {
            let endpoint = tonic::transport::Endpoint::from_shared(base.to_owned())?;
            return Ok(GrpcClient::Tonic(endpoint.connect().await?));
        }
        let tcp = tokio::net::TcpStream::connect(base.trim_start_matches("http://")).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::handshake(tcp).await?;
        tokio::spawn(connection);
        Ok(GrpcClient::OneWrite {
            send,
            base: base.to_owned(),
        })
    }

    /// One call of `method` with `request` (encoded by prost, as a gRPC client's generated
    /// stubs encode it); the answer's bytes, undecoded (as `get` takes HTTP's body).
    async fn call(
        &self,
        method: &str,
        request: impl prost::Message,
    ) -> anyhow::Result<bytes::Bytes> {
        let message = bytes::Bytes::from(request.encode_to_vec());
        let path = format!("/lf.a2a.v1.A2AService/{method}");
        let (send, base) = match self {
            GrpcClient::Tonic(channel) => return tonic_call(channel, &path, message).await,
            GrpcClient::OneWrite { send, base } => (send.clone(), base),
        };
        let req = axum::http::Request::post(format!("{base}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(())?;
        let mut framed = Vec::with_capacity(5 + message.len());
        framed.push(0);
        framed.extend_from_slice(&u32::try_from(message.len())?.to_be_bytes());
        framed.extend_from_slice(&message);
        let mut send = send.ready().await?;
        let (answer, mut body) = send.send_request(req, false)?;
        body.send_data(framed.into(), true)?;
        let mut answer = answer.await?.into_body();
        let mut data = Vec::new();
        while let Some(chunk) = answer.data().await {
            let chunk = chunk?;
            answer.flow_control().release_capacity(chunk.len())?;
            data.extend_from_slice(&chunk);
        }
        let trailers = answer.trailers().await?.unwrap_or_default();
        let status = trailers.get("grpc-status").map(|v| v.as_bytes());
        anyhow::ensure!(status == Some(b"0"), "{method}: grpc-status {status:?}");
        anyhow::ensure!(
            data.len() >= 5,
            "{method}: a message too short to be framed"
        );
        Ok(bytes::Bytes::from(data).slice(5..))
    }
}

/// One call over tonic's channel, through its raw codec.
async fn tonic_call(
    channel: &tonic::transport::Channel,
    path: &str,
    message: bytes::Bytes,
) -> anyhow::Result<bytes::Bytes> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse()?);
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await?;
    let answer = grpc
        .unary(req, path.parse()?, server::bindings::grpc::RawCodec)
        .await?;
    Ok(answer.into_inner())
}

/// How a gRPC bench's clients reach the server.
#[derive(Clone, Copy)]
enum Channels {
    /// One HTTP/2 connection that all clients' calls share, as gRPC's clients do by
    /// default (one channel per target).
    Shared,
    /// One HTTP/2 connection per client, as HTTP+JSON's clients need for their
    /// requests to be concurrent.
    PerClient,
    /// One bare h2 connection per client, each call sent in one write (`OneWrite`).
    PerClientOneWrite,
}

/// Requests per second of `op` over gRPC to ptyhost, as `rate` measures them:
/// `concurrency` clients over `channels`.
async fn grpc_rate(
    target: &Target,
    op: Op,
    secs: f64,
    concurrency: usize,
    channels: Channels,
) -> anyhow::Result<Rate> {
    use prost::Message as _;
    use server::bindings::grpc::pb;
    let one_write = matches!(channels, Channels::PerClientOneWrite);
    let base = target.base.as_str();
    let send = |n: u64| pb::SendMessageRequest {
        message: Some(pb::Message {
            message_id: format!("tck-complete-task-g{n}"),
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                content: Some(pb::part::Content::Text("hi".into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        configuration: Some(pb::SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let first = GrpcClient::connect(base, one_write).await?;
    let sent = pb::SendMessageResponse::decode(first.call("SendMessage", send(0)).await?)?;
    let task = match sent.payload {
        Some(pb::send_message_response::Payload::Task(t)) => t.id,
        _ => anyhow::bail!("SendMessage answered no task"),
    };
    let done = Arc::new(AtomicU64::new(0));
    let measuring = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = Instant::now() + Duration::from_secs_f64(secs + 1.0);
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let channel = match channels {
            Channels::Shared => first.clone(),
            Channels::PerClient | Channels::PerClientOneWrite => {
                GrpcClient::connect(base, one_write).await?
            }
        };
        let (task, done, measuring) = (task.clone(), done.clone(), measuring.clone());
        workers.push(tokio::spawn(async move {
            let mut n = (w as u64) << 32;
            while Instant::now() < stop {
                n += 1;
                let get = || pb::GetTaskRequest {
                    id: task.clone(),
                    ..Default::default()
                };
                match op {
                    Op::GetTask => channel.call("GetTask", get()).await?,
                    Op::SendMessage => channel.call("SendMessage", send(n)).await?,
                };
                if measuring.load(Ordering::Relaxed) {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = target.child.id().unwrap_or_default();
    measuring.store(true, Ordering::Relaxed);
    let window = Rate::window(pid);
    for w in workers {
        w.await??;
    }
    Ok(Rate::of(done.load(Ordering::Relaxed), window, pid))
}

async fn start_ptyhost(bin: &Path, dir: &Path, store: &[&str]) -> anyhow::Result<Target> {
    let flags = [&["--executor", "conformance"], store].concat();
    let (child, addr) = common::start_server(bin, dir, TOKEN, &flags).await?;
    Ok(Target {
        name: "ptyhost",
        base: format!("http://{addr}"),
        token: Some(TOKEN),
        child,
    })
}

async fn start_sdk(python: &Path) -> anyhow::Result<Target> {
    let (child, base) = common::start_sdk(python).await?;
    Ok(Target {
        name: "a2a-sdk",
        base,
        token: None,
        child,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let python = PathBuf::from(args.next().ok_or_else(|| {
        anyhow::anyhow!("usage: a2a_bench PYTHON [PTYHOST_BIN] [SECS] [CONCURRENCY]")
    })?);
    let bin = common::ptyhost_bin(args.next());
    let secs: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5.0);
    let concurrency: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(16);
    let dir = tempfile::tempdir()?;
    let ptyhost = Arc::new(start_ptyhost(&bin, dir.path(), &[]).await?);
    let sdk = Arc::new(start_sdk(&python).await?);
    println!("# {secs} s per figure, {concurrency} concurrent clients, HTTP+JSON 1.0, one machine");
    for (label, op) in [
        ("GetTask", Op::GetTask),
        ("SendMessage(returnImmediately)", Op::SendMessage),
    ] {
        let ours = rate(&ptyhost, op, secs, concurrency).await?.per_sec;
        let theirs = rate(&sdk, op, secs, concurrency).await?.per_sec;
        println!(
            "{label} req/s: ptyhost {ours:.0}, a2a-sdk {theirs:.0}, ratio {:.2}",
            ours / theirs
        );
    }
    // gRPC beside HTTP+JSON: three rounds each, alternating, medians. One gRPC channel is one
    // HTTP/2 connection, so it is also set beside HTTP+JSON over one HTTP/2 connection: that
    // tells gRPC's own cost apart from the bound of sharing one connection.
    for (label, op) in [
        ("GetTask", Op::GetTask),
        ("SendMessage(returnImmediately)", Op::SendMessage),
    ] {
        let mut rounds: [Vec<Rate>; 5] = Default::default();
        for _ in 0..3 {
            rounds[0].push(rate(&ptyhost, op, secs, concurrency).await?);
            rounds[1].push(rate_over(Http::one_http2(), &ptyhost, op, secs, concurrency).await?);
            for (i, channels) in [
                (2, Channels::Shared),
                (3, Channels::PerClient),
                (4, Channels::PerClientOneWrite),
            ] {
                rounds[i].push(grpc_rate(&ptyhost, op, secs, concurrency, channels).await?);
            }
        }
        let [pool, one_h2, shared, own, one_write] = rounds.map(|r| Rate::median(&r));
        for (grpc_how, grpc, http_how, http) in [
            ("one channel", shared, "a connection per client", pool),
            ("one channel", shared, "one HTTP/2 connection", one_h2),
            ("a channel per client", own, "a connection per client", pool),
            (
                "a connection per client, a call in one write",
                one_write,
                "a connection per client",
                pool,
            ),
        ] {
            println!(
                "ptyhost {label} req/s: gRPC ({grpc_how}) {:.0}, HTTP+JSON ({http_how}) {:.0}, \
                 ratio {:.2}; server CPU per request: gRPC {:.0} µs, HTTP+JSON {:.0} µs, ratio {:.2}",
                grpc.per_sec,
                http.per_sec,
                grpc.per_sec / http.per_sec,
                grpc.cpu_us,
                http.cpu_us,
                http.cpu_us / grpc.cpu_us,
            );
        }
    }
    // The same on a cluster's store, beside the embedded one.
    if let Ok(admin) = std::env::var("PTYHOST_BENCH_POSTGRES_URL") {
        let db = common::new_database(&admin).await?;
        let pg_dir = tempfile::tempdir()?;
        let store = ["--database-url", db.as_str()];
        let pg = Arc::new(start_ptyhost(&bin, pg_dir.path(), &store).await?);
        for (label, op) in [
            ("GetTask", Op::GetTask),
            ("SendMessage(returnImmediately)", Op::SendMessage),
        ] {
            let sqlite = rate(&ptyhost, op, secs, concurrency).await?.per_sec;
            let postgres = rate(&pg, op, secs, concurrency).await?.per_sec;
            println!(
                "ptyhost {label} req/s: PostgreSQL {postgres:.0}, SQLite {sqlite:.0}, ratio {:.2}",
                postgres / sqlite
            );
        }
    }
    println!(
        "RSS after the run MiB: ptyhost {:.1}, a2a-sdk {:.1}",
        ptyhost.rss_mib(),
        sdk.rss_mib()
    );
    Ok(())
}
