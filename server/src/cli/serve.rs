//! `ptyhost serve`: the agent on HTTP, WebSocket and the web UI.

use std::io::Write;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::admission::Admission;
use crate::agent::Agent;
use crate::auth::{self, Scope, TokenRequest};
use crate::config::ServeArgs;
use crate::http;
use crate::state::{self, AppState};
use crate::tls;

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
    let public_url = state::public_url(&args, addr, tls.is_some());
    let agent = Agent::start(
        &args.store,
        args.settings()?,
        &args.session,
        &args.instance_id,
        args.node.settings(&public_url)?,
        args.push_allow_loopback,
        Some(format!("{public_url}/agents/{}", args.instance_id)),
    )
    .await?;
    let Agent {
        store, sessions, ..
    } = &agent;
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
    let state = AppState::serving(&args, &agent, addr, tls.is_some(), shutdown.clone())?;
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
