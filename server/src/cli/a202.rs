//! `ptyhost a202`: the A202 client (capability check, send, keygen, seal).

use crate::{client, config};

/// `ptyhost a202`: 0 when the check (and submission) passed, 1 when refused, 2 on error.
pub async fn run(args: config::A202Args) -> u8 {
    super::init_tracing("warn");
    match client::a202::run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ptyhost a202: {e:#}");
            2
        }
    }
}

