//! The `ptyhost` binary: parses the command line and runs one command.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use server::config::Cli;

fn main() -> ExitCode {
    // The sandbox helper must stay single-threaded: it runs before anything else starts.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == server::sandbox::exec::SUBCOMMAND)
    {
        return server::sandbox::exec::main();
    }
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
