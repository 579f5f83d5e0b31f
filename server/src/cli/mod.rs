//! The commands of the `ptyhost` binary, one module each; `run` dispatches one.

pub mod a202;
pub mod a2a;
pub mod files;
pub mod mcp;
pub mod serve;
pub mod session;
pub mod stdio;
pub mod token;

use std::process::ExitCode;

use crate::config::{CliCommand, StoreArgs};
use crate::store::Store;

/// Runs one command to its exit code.
pub async fn run(command: CliCommand) -> ExitCode {
    let result = match command {
        // The STDIO binding defines its own exit codes.
        CliCommand::Stdio(args) => return ExitCode::from(stdio::run(args).await),
        // 0 passed, 1 refused (the refusal is printed), 2 could not run.
        CliCommand::A202(args) => return ExitCode::from(a202::run(args).await),
        CliCommand::Serve(args) => serve::run(*args).await,
        CliCommand::Token(args) => token::run(args).await,
        CliCommand::A2a(args) => a2a::run(args).await,
        CliCommand::Files(args) => files::run(args).await,
        CliCommand::Session(args) => session::run(args).await,
        CliCommand::Mcp(args) => mcp::run(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ptyhost: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn open_store(args: &StoreArgs) -> anyhow::Result<Store> {
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
