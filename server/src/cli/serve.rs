//! `ptyhost serve`: the agent on HTTP, WebSocket and the web UI.

use std::io::Write;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Core;
use crate::auth::{self, Scope, TokenRequest};
use crate::config::ServeArgs;
use crate::http;
use crate::plumbing::{AppInner, AppState};
use crate::{limits, tls};

/// `ptyhost serve`: runs until SIGTERM or SIGINT, then shuts down in order: every session
/// closes (its `Closed` frame persisted), every connection says goodbye, the store flushes.
pub async fn run(args: ServeArgs) -> Result<()> {
    super::init_tracing("info,sqlx=warn");
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
