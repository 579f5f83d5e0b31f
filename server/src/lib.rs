//! ptyhost: an A2A agent whose agent is a terminal.
// The UI's view types are deep when built without cargo-leptos's type erasure (tests).
#![recursion_limit = "256"]

pub mod a2a;
pub mod audit;
pub mod auth;
pub mod bindings;
pub mod card;
pub mod client;
pub mod clock;
pub mod commerce;
pub mod config;
pub mod executor;
pub mod http;
pub mod limits;
pub mod push;
pub mod sessions;
pub mod store;
pub mod tls;

use std::io::Write;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::{Scope, TokenRequest};
use crate::config::{ServeArgs, StoreArgs, TokenArgs, TokenCommand};
use crate::http::{AppInner, AppState};
use crate::sessions::Sessions;
use crate::store::Store;

async fn open_store(args: &StoreArgs) -> Result<Store> {
    Store::open(args.database_url.as_deref(), &args.data_dir).await
}

/// Diagnostics go to stderr (stdout carries protocol: the listening line, STDIO frames).
/// `RUST_LOG` chooses what is logged, else `default`.
fn init_tracing(default: &str) {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default.into()),
        )
        .init();
}

/// `ptyhost stdio`: the agent for the parent process on stdin/stdout; returns the exit code
/// of the STDIO binding (0 done, 1 failure, 2 protocol error, 3 version, 4 startup denied).
pub async fn stdio(args: config::StdioArgs) -> u8 {
    use bindings::stdio::{self, exit};
    let session_id = match std::env::var("A2A_SESSION_ID") {
        Ok(s) if !s.is_empty() => s,
        _ => {
            eprintln!("ptyhost stdio: A2A_SESSION_ID is required");
            return exit::STARTUP_DENIED;
        }
    };
    if let Ok(v) = std::env::var("A2A_PROTOCOL_VERSION")
        && !v.is_empty()
        && v.split('.').next() != Some("1")
    {
        eprintln!("ptyhost stdio: A2A_PROTOCOL_VERSION {v} is not served (1.x is)");
        return exit::VERSION;
    }
    let level = std::env::var("A2A_LOG_LEVEL").unwrap_or_else(|_| "info".into());
    init_tracing(&format!("{level},sqlx=warn"));
    let params = stdio::service_params(std::env::vars());
    tracing::info!(%session_id, service_params = %serde_json::Value::Object(params.clone()), "stdio session");
    let core = async {
        let settings = args.session.settings()?;
        Core::start(
            &args.store,
            settings,
            &args.session,
            "local",
            args.push_allow_loopback,
        )
        .await
    };
    let core = match core.await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ptyhost stdio: {e:#}");
            return exit::FAILURE;
        }
    };
    let extensions =
        a2a::extensions::from_parameters(&params, &card::extensions(core.tasks.commerce()));
    let code = stdio::serve(
        core.tasks.clone(),
        session_id,
        extensions,
        args.max_frame_bytes,
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await;
    core.sessions.shutdown().await;
    core.store.close().await;
    code
}

/// The agent without its transports: the store, the audit trail, the sessions and the
/// task service, recovered from what a previous process left.
pub struct Core {
    pub store: Store,
    pub audit: audit::Audit,
    pub sessions: Sessions,
    pub tasks: a2a::service::TaskService,
}

impl Core {
    pub async fn start(
        store_args: &StoreArgs,
        mut settings: sessions::Settings,
        session: &config::SessionArgs,
        instance_id: &str,
        push_allow_loopback: bool,
    ) -> Result<Core> {
        let store = open_store(store_args).await?;
        settings.shell_rc = sessions::install_shell_rc(&store_args.data_dir)
            .context("writing the shell-integration rc file")?;
        settings.tmux_socket =
            sessions::host::tmux_socket(&std::fs::canonicalize(&store_args.data_dir)?);
        let audit = audit::Audit::start(store.clone());
        let sessions = Sessions::new(
            store.clone(),
            audit.clone(),
            settings,
            instance_id.to_owned(),
        );
        sessions.recover().await?;
        let guard = push::Guard {
            allow_loopback: push_allow_loopback,
        };
        let push = push::Push::new(store.clone(), guard)?;
        let commerce = commerce::Commerce::new(&session.commerce, store.clone())?;
        let tasks = a2a::service::TaskService::new(
            store.clone(),
            sessions.clone(),
            session.executor,
            push,
            commerce,
        );
        tasks.recover().await?;
        Ok(Core {
            store,
            audit,
            sessions,
            tasks,
        })
    }
}

/// `ptyhost serve`: runs until SIGTERM or SIGINT, then shuts down in order: every session
/// closes (its `Closed` frame persisted), every connection says goodbye, the store flushes.
pub async fn serve(args: ServeArgs) -> Result<()> {
    init_tracing("info,sqlx=warn");
    let (heartbeat_interval, heartbeat_timeout) = args.heartbeat()?;
    let limit_settings = args.limits()?;
    let Core {
        store,
        audit,
        sessions,
        tasks,
    } = Core::start(
        &args.store,
        args.settings()?,
        &args.session,
        &args.instance_id,
        args.push_allow_loopback,
    )
    .await?;
    if let Some(token) = &args.bootstrap_token {
        auth::ensure_bootstrap(&store, token).await?;
    }
    let first_start = if args.bootstrap_token.is_none() && store.count_tokens().await? == 0 {
        Some(
            auth::issue(
                &store,
                TokenRequest {
                    scope: Scope::Admin,
                    session_id: None,
                    label: Some("first start"),
                    ttl: None,
                    kind: "bootstrap",
                    secret: None,
                },
            )
            .await?,
        )
    } else {
        None
    };

    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{addr}"))
        .trim_end_matches('/')
        .to_owned();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {scheme}://{addr}")?;
        if let Some(t) = &first_start {
            writeln!(out, "open {public_url}/#token={}", t.secret)?;
        }
        out.flush()?;
    }
    tracing::info!(%addr, instance_id = %args.instance_id, "serving");

    let shutdown = CancellationToken::new();
    let plain_off_loopback = tls.is_none() && !addr.ip().is_loopback();
    let state = AppState::new(AppInner {
        sessions: sessions.clone(),
        tasks,
        store: store.clone(),
        instance_id: args.instance_id.clone(),
        refuse_plain_ws: plain_off_loopback && !args.allow_insecure_ws,
        plain_off_loopback,
        allowed_origins: std::iter::once(format!("{scheme}://{addr}"))
            .chain(args.allowed_origins.iter().cloned())
            .collect(),
        public_url,
        heartbeat_interval,
        heartbeat_timeout,
        limits: limits::Limits::new(limit_settings),
        audit,
        shutdown: shutdown.clone(),
        connections: TaskTracker::new(),
    });
    let assets = http::assets::Assets::new(args.site_root());
    let app = http::router(state.clone(), assets, addr);
    let stopping = {
        let sessions = sessions.clone();
        let shutdown = shutdown.clone();
        async move {
            stop_signal().await;
            tracing::info!("shutting down");
            sessions.shutdown().await;
            shutdown.cancel();
        }
    };
    match tls {
        Some(acceptor) => {
            let listener = tls::TlsListener::new(listener, acceptor)?;
            axum::serve(listener, app)
                .with_graceful_shutdown(stopping)
                .await?;
        }
        None => {
            // Terminal frames are small and latency-bound: no Nagle delay (TLS connections
            // get the same in their listener).
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::warn!(error = %e, "TCP_NODELAY");
                }
            });
            axum::serve(listener, app)
                .with_graceful_shutdown(stopping)
                .await?;
        }
    }
    state.connections.close();
    if tokio::time::timeout(std::time::Duration::from_secs(5), state.connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("some connections did not close in time");
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// `ptyhost token create|list|revoke`.
pub async fn token_command(args: TokenArgs) -> Result<()> {
    let store = open_store(&args.store).await?;
    let mut out = std::io::stdout().lock();
    match args.command {
        TokenCommand::Create {
            scope,
            session,
            ttl,
            label,
        } => {
            if let Some(sid) = &session {
                anyhow::ensure!(store.session(sid).await?.is_some(), "no session {sid}");
            }
            let issued = auth::issue(
                &store,
                TokenRequest {
                    scope,
                    session_id: session.as_deref(),
                    label: label.as_deref(),
                    ttl,
                    kind: "cli",
                    secret: None,
                },
            )
            .await?;
            writeln!(out, "{}", issued.secret)?;
            eprintln!("token id {}", issued.id);
        }
        TokenCommand::List => {
            writeln!(out, "ID\tSCOPE\tSESSION\tKIND\tLABEL\tEXPIRES\tREVOKED")?;
            for t in store.list_tokens(None).await? {
                let when = |v: Option<i64>| v.map(clock::rfc3339).unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    t.id,
                    t.scope,
                    t.session_id.as_deref().unwrap_or("-"),
                    t.kind,
                    t.label.as_deref().unwrap_or("-"),
                    when(t.expires_at),
                    when(t.revoked_at),
                )?;
            }
        }
        TokenCommand::Revoke { id } => {
            anyhow::ensure!(
                store.revoke_token(&id, None, clock::now_ms()).await?,
                "no live token {id}"
            );
            writeln!(out, "revoked {id}")?;
        }
    }
    store.close().await;
    Ok(())
}

/// `ptyhost a202`: 0 when the check (and submission) passed, 1 when refused, 2 on error.
pub async fn a202_command(args: config::A202Args) -> u8 {
    init_tracing("warn");
    match client::a202::run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ptyhost a202: {e:#}");
            2
        }
    }
}

/// `ptyhost a2a …`: the A2A client on the command line.
pub async fn a2a_command(args: config::A2aArgs) -> Result<()> {
    use client::{Binding, ClientError, Connection, Policy, with_policy};
    use config::A2aOp;
    use futures_util::StreamExt;

    init_tracing("warn");
    if let Some(cmdline) = &args.stdio {
        let argv = shell_words::split(cmdline)?;
        let mut agent = client::stdio::StdioAgent::spawn(&argv).await?;
        let result = a2a_over_stdio(&mut agent, args.op, args.json).await;
        agent.close().await;
        return result;
    }
    let http = reqwest::Client::new();
    let url = match &args.op {
        A2aOp::Card { url }
        | A2aOp::Status { url }
        | A2aOp::Send { url, .. }
        | A2aOp::Get { url, .. }
        | A2aOp::List { url, .. }
        | A2aOp::Cancel { url, .. }
        | A2aOp::Subscribe { url, .. }
        | A2aOp::Attach { url, .. }
        | A2aOp::Watch { url, .. } => url.clone(),
    };
    let card = client::fetch_card(&http, args.card.as_deref().unwrap_or(&url)).await?;
    let all = client::interfaces(&card)?;
    let binding = match args
        .binding
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None => None,
        Some("HTTP+JSON" | "REST") => Some(Binding::HttpJson),
        Some("JSONRPC" | "JSON-RPC") => Some(Binding::JsonRpc),
        Some(other) => anyhow::bail!("--binding {other} is not HTTP+JSON or JSONRPC"),
    };
    let candidates = client::candidates(&all, args.protocol, binding);
    let fallback = args.fallback && !args.no_fallback;
    let token = args.token.as_deref();
    let json_out = args.json;
    let print = move |v: &serde_json::Value| show(v, json_out);
    let run = |op: &'static str| move |e: ClientError| anyhow::anyhow!("{op}: {e}");
    match args.op {
        A2aOp::Card { .. } => {
            let order: Vec<serde_json::Value> = candidates
                .iter()
                .map(|i| serde_json::json!({ "version": i.version.label(), "binding": i.binding.name(), "url": i.url }))
                .collect();
            if json_out {
                println!("{}", serde_json::json!({ "card": card, "tryOrder": order }));
            } else {
                println!(
                    "{} — {}",
                    card["name"].as_str().unwrap_or("?"),
                    card["description"].as_str().unwrap_or("")
                );
                for i in &order {
                    println!(
                        "  {} {} {}",
                        i["version"].as_str().unwrap_or(""),
                        i["binding"].as_str().unwrap_or(""),
                        i["url"].as_str().unwrap_or("")
                    );
                }
            }
        }
        A2aOp::Status { .. } => {
            // A probe any speaking interface answers: TaskNotFound means it works.
            let probe = |c: Connection| async move {
                match c.get("ptyhost-status-probe", None).await {
                    Err(ClientError::A2a { reason, .. }) if reason == "TASK_NOT_FOUND" => Ok(()),
                    Err(e) => Err(e),
                    Ok(_) => Ok(()),
                }
            };
            let (iface, ()) =
                with_policy(&http, token, &candidates, args.protocol, fallback, probe)
                    .await
                    .map_err(run("status"))?;
            let policy = match args.protocol {
                Policy::V03 => "0.3",
                Policy::V1 => "1.0",
                Policy::Auto => "auto",
            };
            let status = serde_json::json!({
                "policy": policy, "fallback": fallback, "selectedVersion": iface.version.label(),
                "binding": iface.binding.name(), "interfaceUrl": iface.url,
            });
            if json_out {
                println!("{status}");
            } else {
                println!(
                    "policy {policy} (fallback {}): A2A {} over {} at {}",
                    if fallback { "on" } else { "off" },
                    iface.version.label(),
                    iface.binding.name(),
                    iface.url
                );
            }
        }
        A2aOp::Send {
            text,
            context,
            task,
            stream,
            return_immediately,
            ..
        } => {
            let message = user_message(&text, context, task);
            if stream {
                let (_, mut events) =
                    with_policy(&http, token, &candidates, args.protocol, fallback, |c| {
                        let m = message.clone();
                        async move { c.send_stream(&m).await }
                    })
                    .await
                    .map_err(run("send"))?;
                while let Some(event) = events.next().await {
                    print(&event.map_err(run("stream"))?);
                }
            } else {
                let (_, sent) =
                    with_policy(&http, token, &candidates, args.protocol, fallback, |c| {
                        let m = message.clone();
                        async move { c.send(&m, return_immediately).await }
                    })
                    .await
                    .map_err(run("send"))?;
                print(&sent);
            }
        }
        A2aOp::Get { id, history, .. } => {
            let (_, task) = with_policy(&http, token, &candidates, args.protocol, fallback, |c| {
                let id = id.clone();
                async move { c.get(&id, history).await }
            })
            .await
            .map_err(run("get"))?;
            print(&serde_json::json!({ "task": task }));
        }
        A2aOp::List { context, .. } => {
            let (_, page) = with_policy(&http, token, &candidates, args.protocol, fallback, |c| {
                let context = context.clone();
                async move { c.list(context.as_deref()).await }
            })
            .await
            .map_err(run("list"))?;
            for task in page["tasks"].as_array().into_iter().flatten() {
                print(&serde_json::json!({ "task": task }));
            }
        }
        A2aOp::Cancel { id, .. } => {
            let (_, task) = with_policy(&http, token, &candidates, args.protocol, fallback, |c| {
                let id = id.clone();
                async move { c.cancel(&id).await }
            })
            .await
            .map_err(run("cancel"))?;
            print(&serde_json::json!({ "task": task }));
        }
        A2aOp::Watch {
            id,
            webhook,
            webhook_url,
            ..
        } => {
            use base64::Engine as _;
            use client::watch::{Reconciler, Seen};
            let listener = tokio::net::TcpListener::bind(&webhook).await?;
            let hook = webhook_url.unwrap_or_else(|| {
                format!(
                    "http://{}/hook",
                    listener
                        .local_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default()
                )
            });
            let secret =
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
            let (iface, config_id) =
                with_policy(&http, token, &candidates, args.protocol, fallback, |c| {
                    let (id, hook, secret) = (id.clone(), hook.clone(), secret.clone());
                    async move { c.create_push(&id, &hook, &secret).await }
                })
                .await
                .map_err(run("watch"))?;
            let conn = Connection {
                http: http.clone(),
                token: token.map(str::to_owned),
                iface,
            };
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            client::watch::serve(listener, secret, config_id.clone(), tx.clone());
            match conn.subscribe(&id).await {
                Ok(mut events) => {
                    tokio::spawn(async move {
                        while let Some(Ok(event)) = events.next().await {
                            let _ = tx.send(Seen {
                                delivery: None,
                                event,
                            });
                        }
                    });
                }
                // A finished task has no stream: its state is its last word.
                Err(_) => {
                    let task = conn.get(&id, None).await.map_err(run("watch"))?;
                    let _ = tx.send(Seen {
                        delivery: None,
                        event: serde_json::json!({ "task": task }),
                    });
                }
            }
            let mut reconciler = Reconciler::default();
            while let Some(seen) = rx.recv().await {
                if let Some(event) = reconciler.apply(seen) {
                    print(&event);
                }
                if reconciler.finished() {
                    break;
                }
            }
            if let Err(e) = conn.delete_push(&id, &config_id).await {
                tracing::warn!(error = %e, "removing the push config failed");
            }
        }
        A2aOp::Attach {
            session, control, ..
        } => {
            let url = client::pty_ws_url(&card, &session).ok_or_else(|| {
                anyhow::anyhow!("the card lists no pty-ws interface to attach through")
            })?;
            client::attach::run(&url, token, control).await?;
        }
        A2aOp::Subscribe { id, .. } => {
            let (_, mut events) =
                with_policy(&http, token, &candidates, args.protocol, fallback, |c| {
                    let id = id.clone();
                    async move { c.subscribe(&id).await }
                })
                .await
                .map_err(run("subscribe"))?;
            while let Some(event) = events.next().await {
                print(&event.map_err(run("stream"))?);
            }
        }
    }
    Ok(())
}

/// The message of `ptyhost a2a send`: its words as one text part.
fn user_message(
    text: &[String],
    context: Option<String>,
    task: Option<String>,
) -> app::a2a::Message {
    app::a2a::Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: context,
        task_id: task,
        role: app::a2a::Role::User,
        parts: vec![app::a2a::Part::text(text.join(" "))],
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    }
}

/// `ptyhost a2a --stdio CMD …`: the same operations over the STDIO binding (1.0 methods).
async fn a2a_over_stdio(
    agent: &mut client::stdio::StdioAgent,
    op: config::A2aOp,
    json_out: bool,
) -> Result<()> {
    use config::A2aOp;
    use futures_util::StreamExt;
    use serde_json::json;
    let print = |v: &serde_json::Value| show(v, json_out);
    let mut events = match op {
        A2aOp::Send {
            text,
            context,
            task,
            stream,
            return_immediately,
            ..
        } => {
            let message = user_message(&text, context, task);
            if stream {
                agent
                    .stream("SendStreamingMessage", json!({ "message": message }))
                    .await?
            } else {
                let params = json!({ "message": message, "configuration": { "returnImmediately": return_immediately } });
                print(&agent.call("SendMessage", params).await?);
                return Ok(());
            }
        }
        A2aOp::Get { id, history, .. } => {
            let params = json!({ "id": id, "historyLength": history });
            print(&json!({ "task": agent.call("GetTask", params).await? }));
            return Ok(());
        }
        A2aOp::List { context, .. } => {
            let page = agent
                .call("ListTasks", json!({ "contextId": context }))
                .await?;
            for task in page["tasks"].as_array().into_iter().flatten() {
                print(&json!({ "task": task }));
            }
            return Ok(());
        }
        A2aOp::Cancel { id, .. } => {
            let task = agent.call("CancelTask", json!({ "id": id })).await?;
            print(&json!({ "task": task }));
            return Ok(());
        }
        A2aOp::Subscribe { id, .. } => agent.stream("SubscribeToTask", json!({ "id": id })).await?,
        A2aOp::Card { .. } | A2aOp::Status { .. } | A2aOp::Attach { .. } | A2aOp::Watch { .. } => {
            anyhow::bail!(
                "a STDIO agent has no card and no terminal to attach: it speaks stdio-json with the 1.0 methods"
            )
        }
    };
    while let Some(event) = events.next().await {
        print(&event?);
    }
    Ok(())
}

/// An answer of `ptyhost a2a`: one JSON object per line with `--json`, else for people.
fn show(v: &serde_json::Value, json_out: bool) {
    if json_out {
        println!("{v}");
    } else {
        print_human(v);
    }
}

/// A StreamResponse-shaped value for people: task states, and output as it comes.
fn print_human(v: &serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Some(t) = v.get("task") {
        let _ = writeln!(
            out,
            "task {} {}",
            t["id"].as_str().unwrap_or("?"),
            t["status"]["state"]
                .as_str()
                .unwrap_or("?")
                .trim_start_matches("TASK_STATE_")
        );
        for a in t["artifacts"].as_array().into_iter().flatten() {
            for p in a["parts"].as_array().into_iter().flatten() {
                let _ = write!(out, "{}", p["text"].as_str().unwrap_or(""));
            }
        }
    } else if let Some(u) = v.get("statusUpdate") {
        let _ = writeln!(
            out,
            "[{}]",
            u["status"]["state"]
                .as_str()
                .unwrap_or("?")
                .trim_start_matches("TASK_STATE_")
        );
    } else if let Some(u) = v.get("artifactUpdate") {
        for p in u["artifact"]["parts"].as_array().into_iter().flatten() {
            let _ = write!(out, "{}", p["text"].as_str().unwrap_or(""));
        }
    } else if let Some(m) = v.get("message") {
        for p in m["parts"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "{}", p["text"].as_str().unwrap_or(""));
        }
    }
    let _ = out.flush();
}
