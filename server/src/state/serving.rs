//! How a server's state is put together: from `serve`'s flags and a running agent, for a
//! listener or (in unit tests) without one.

use std::net::SocketAddr;

use anyhow::Result;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{AppInner, AppState};
use crate::agent::Agent;
use crate::config::ServeArgs;
use crate::limits;
use crate::revocation::Revocations;

/// Where clients reach this server: `--public-url`, else the address it listens on.
pub fn public_url(args: &ServeArgs, addr: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    (args.public_url.clone())
        .unwrap_or_else(|| format!("{scheme}://{addr}"))
        .trim_end_matches('/')
        .to_owned()
}

impl AppState {
    /// What every request shares, for a server listening on `addr` (over HTTPS if `tls`).
    pub fn serving(
        args: &ServeArgs,
        agent: &Agent,
        addr: SocketAddr,
        tls: bool,
        shutdown: CancellationToken,
    ) -> Result<AppState> {
        let (heartbeat_interval, heartbeat_timeout) = args.heartbeat()?;
        let scheme = if tls { "https" } else { "http" };
        let plain_off_loopback = !tls && !addr.ip().is_loopback();
        Ok(AppState::new(AppInner {
            sessions: agent.sessions.clone(),
            tasks: agent.tasks.clone(),
            store: agent.store.clone(),
            node: agent.node.clone(),
            instance_id: args.instance_id.clone(),
            refuse_plain_ws: plain_off_loopback && !args.allow_insecure_ws,
            plain_off_loopback,
            allowed_origins: std::iter::once(format!("{scheme}://{addr}"))
                .chain(args.allowed_origins.iter().cloned())
                .collect(),
            preview_hosts: crate::previews::PreviewHosts::new(
                &public_url(args, addr, tls),
                args.preview_domain.as_deref(),
            ),
            public_url: public_url(args, addr, tls),
            heartbeat_interval,
            heartbeat_timeout,
            limits: limits::Limits::new(args.limits()?),
            files: args.session.files.settings(),
            audit: agent.audit.clone(),
            revocations: Revocations::start(agent.store.clone(), agent.audit.clone()),
            preview_tickets: crate::auth::Tickets::default(),
            shutdown,
            connections: TaskTracker::new(),
        }))
    }
}

/// A server's state without its listener, for unit tests of what handles requests:
/// `ptyhost serve` with `flags` on a store in `data_dir`. The sandbox is off: a unit-test
/// binary is no ptyhost, so it cannot start itself as the sandbox's helper (the
/// integration tests run the real binary, sandboxed).
#[cfg(test)]
pub(crate) async fn for_tests(data_dir: &std::path::Path, flags: &[&str]) -> AppState {
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
    let agent = Agent::start(
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
    AppState::serving(&args, &agent, addr, false, CancellationToken::new()).unwrap()
}
