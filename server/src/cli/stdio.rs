//! `ptyhost stdio`: the agent for a parent process, over the STDIO binding.

use crate::agent::Agent;
use crate::bindings::stdio::{self, exit};
use crate::config;

/// `ptyhost stdio`: the agent for the parent process on stdin/stdout; returns the exit code
/// of the STDIO binding (0 done, 1 failure, 2 protocol error, 3 version, 4 startup denied).
pub async fn run(args: config::StdioArgs) -> u8 {
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
    super::init_tracing(&format!("{level},sqlx=warn"));
    let params = stdio::service_params(std::env::vars());
    tracing::info!(%session_id, service_params = %serde_json::Value::Object(params.clone()), "stdio session");
    let agent = async {
        let settings = args.session.settings()?;
        Agent::start(
            &args.store,
            settings,
            &args.session,
            "local",
            // A node no other reaches: its parent process is its only client.
            crate::cluster::NodeSettings {
                id: None,
                advertise_url: "stdio:".into(),
                timeout: std::time::Duration::from_secs(15),
            },
            args.push_allow_loopback,
            None,
        )
        .await
    };
    let agent = match agent.await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ptyhost stdio: {e:#}");
            return exit::FAILURE;
        }
    };
    let extensions = crate::bindings::activate_parameters(&agent.tasks, &params);
    let code = stdio::serve(
        agent.tasks.clone(),
        session_id,
        extensions,
        args.max_frame_bytes,
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await;
    agent.sessions.shutdown().await;
    agent.store.close().await;
    code
}
