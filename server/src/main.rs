use std::process::ExitCode;

use clap::Parser;
use server::config::{Cli, Command};

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
    runtime.block_on(async {
        let result = match command {
            // The STDIO binding defines its own exit codes.
            Command::Stdio(args) => return ExitCode::from(server::stdio(args).await),
            // 0 passed, 1 refused (the refusal is printed), 2 could not run.
            Command::A202(args) => return ExitCode::from(server::a202_command(args).await),
            Command::Serve(args) => server::serve(*args).await,
            Command::Token(args) => server::token_command(args).await,
            Command::A2a(args) => server::a2a_command(args).await,
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ptyhost: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}
