//! The HTTP surface around sessions: the control plane, tokens and scopes, observer
//! links, the AgentCards, operations endpoints, and what the logs never contain.

#[path = "../common/mod.rs"]
mod common;

use common::*;
use serde_json::{Value, json};
use wire::Role;
use wire::control::{self, AuditDetail};
use wire::server::ServerOp;

mod cards_health_and_audit;
mod sessions_and_tokens;

fn tmux_installed() -> bool {
    std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Reads frames until output holds `needle`; returns the highest sequence seen and the text.
async fn output_until(c: &mut Client, needle: &str) -> (u64, String) {
    let mut text = String::new();
    let mut last = 0;
    while !text.contains(needle) {
        let f = c.next().await;
        last = last.max(seq(&f));
        if kind(&f) == "Output" {
            text.push_str(&String::from_utf8_lossy(&output_bytes(&f)));
        }
    }
    (last, text)
}
