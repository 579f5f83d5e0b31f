//! The `ptyhost` binary: parses the command line and runs one command.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use server::config::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `ptyhost` alone serves with the defaults (cargo-leptos runs the binary that way).
    let command =
        cli.command
            .unwrap_or_else(|| match Cli::parse_from(["ptyhost", "serve"]).command {
                Some(c) => c,
                None => unreachable!("serve parses"),
            });
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ptyhost: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(server::cli::run(command))
}
