//! `ptyhost serve`: the agent on HTTP, WebSocket and the web UI.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Core;
use crate::admission::Admission;
use crate::auth::{self, Scope, TokenRequest};
use crate::config::ServeArgs;
use crate::http;
use crate::revocation::Revocations;
use crate::state::{AppInner, AppState};
use crate::{limits, tls};

/// `ptyhost serve`: runs until SIGTERM or SIGINT, then shuts down in order: every session
/// closes (its `Closed` frame persisted), every connection says goodbye, the store flushes.
pub async fn run(args: ServeArgs) -> Result<()> {
    super::init_tracing("info,sqlx=warn");
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    // Bound first: the agent names its files by URLs under the address it serves.
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let public_url = public_url(&args, addr, tls.is_some());
    let core = Core::start(
        &args.store,
        args.settings()?,
        &args.session,
        &args.instance_id,
        args.node.settings(&public_url)?,
        args.push_allow_loopback,
        Some(format!("{public_url}/agents/{}", args.instance_id)),
    )
    .await?;
    let Core {
        store, sessions, ..
    } = &core;
    if let Some(token) = &args.bootstrap_token {
        auth::ensure_bootstrap(store, token).await?;
    }
    let first_start = if args.bootstrap_token.is_none() && store.tokens().count().await? == 0 {
        Some(
            auth::issue(
                store,
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

    let shutdown = CancellationToken::new();
    let state = state(&args, &core, addr, tls.is_some(), shutdown.clone())?;
    {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {scheme}://{addr}")?;
        if let Some(t) = &first_start {
            writeln!(out, "open {}/#token={}", state.public_url, t.secret)?;
        }
        out.flush()?;
    }
    tracing::info!(%addr, instance_id = %args.instance_id, "serving");

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
    let server = http::server::ServerSettings {
        header_read_timeout: args.header_read_timeout()?,
        admission: Admission::new(args.admission()),
        tls,
    };
    http::server::serve(listener, app, server, stopping).await;
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

/// Where clients reach this server: `--public-url`, else the address it listens on.
fn public_url(args: &ServeArgs, addr: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    (args.public_url.clone())
        .unwrap_or_else(|| format!("{scheme}://{addr}"))
        .trim_end_matches('/')
        .to_owned()
}

/// What every request shares, for a server listening on `addr` (over HTTPS if `tls`).
fn state(
    args: &ServeArgs,
    core: &Core,
    addr: SocketAddr,
    tls: bool,
    shutdown: CancellationToken,
) -> Result<AppState> {
    let (heartbeat_interval, heartbeat_timeout) = args.heartbeat()?;
    let scheme = if tls { "https" } else { "http" };
    let plain_off_loopback = !tls && !addr.ip().is_loopback();
    Ok(AppState::new(AppInner {
        sessions: core.sessions.clone(),
        tasks: core.tasks.clone(),
        store: core.store.clone(),
        node: core.node.clone(),
        instance_id: args.instance_id.clone(),
        refuse_plain_ws: plain_off_loopback && !args.allow_insecure_ws,
        plain_off_loopback,
        allowed_origins: std::iter::once(format!("{scheme}://{addr}"))
            .chain(args.allowed_origins.iter().cloned())
            .collect(),
        public_url: public_url(args, addr, tls),
        heartbeat_interval,
        heartbeat_timeout,
        limits: limits::Limits::new(args.limits()?),
        files: args.session.files.settings(),
        audit: core.audit.clone(),
        revocations: Revocations::start(core.store.clone(), core.audit.clone()),
        shutdown,
        connections: TaskTracker::new(),
    }))
}

/// A server's state without its listener, for unit tests of what handles requests:
/// `ptyhost serve` with `flags` on a store in `data_dir`. The sandbox is off: a unit-test
/// binary is no ptyhost, so it cannot start itself as the sandbox's helper (the
/// integration tests run the real binary, sandboxed).
#[cfg(test)]
pub(crate) async fn test_state(data_dir: &std::path::Path, flags: &[&str]) -> AppState {
    use clap::Parser as _;
    let argv = [
        "ptyhost",
        "serve",
        "--sandbox",
        "off",
        "--data-dir",
        data_dir.to_str().unwrap(),
    ];
    let cli = crate::config::Cli::try_parse_from(argv.iter().chain(flags)).unwrap();
    let Some(crate::config::CliCommand::Serve(args)) = cli.command else {
        unreachable!("the command is serve")
    };
    let core = Core::start(
        &args.store,
        args.settings().unwrap(),
        &args.session,
        &args.instance_id,
        args.node.settings("http://127.0.0.1:0").unwrap(),
        args.push_allow_loopback,
        None,
    )
    .await
    .unwrap();
    let addr = "127.0.0.1:0".parse().unwrap();
    state(&args, &core, addr, false, CancellationToken::new()).unwrap()
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
