//! `ptyhost mcp`: the terminal tools over MCP on stdin/stdout, for the agent that started
//! this process. It hosts sessions of its own (as `ptyhost stdio` does, with the same
//! session flags), or, with `--url` and `--token`, drives a running ptyhost, whose web UI
//! then shows every session and call.

use anyhow::Result;
use rmcp::ServiceExt;

use crate::agent::Agent;
use crate::bindings::mcp::{Caller, Terminal, Terminals, local_principal};
use crate::config;

pub async fn run(args: config::McpArgs) -> Result<()> {
    super::init_tracing("warn");
    if let (Some(url), Some(token)) = (&args.url, &args.token) {
        return crate::client::mcp::relay(url, token).await;
    }
    let agent = Agent::start(
        &args.store,
        args.session.settings()?,
        &args.session,
        "local",
        // A node no other reaches: the agent on stdio is its only client.
        crate::cluster::NodeSettings {
            id: None,
            advertise_url: "mcp:".into(),
            timeout: std::time::Duration::from_secs(15),
        },
        args.push_allow_loopback,
        None,
    )
    .await?;
    let terminals = Terminals::new(
        agent.sessions.clone(),
        agent.tasks.clone(),
        args.session.files.settings(),
        None,
    );
    let served = Terminal::new(terminals, Caller::Fixed(local_principal()))
        .serve(rmcp::transport::stdio())
        .await;
    let result = match served {
        Ok(running) => running
            .waiting()
            .await
            .map(drop)
            .map_err(anyhow::Error::from),
        Err(e) => Err(anyhow::anyhow!("MCP on stdio: {e}")),
    };
    agent.sessions.shutdown().await;
    agent.store.close().await;
    result
}
