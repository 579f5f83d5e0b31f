//! Thin adapters between transports and the session core.

pub mod jsonrpc;
pub mod proto;
pub mod pty_ws;
pub mod rest;
pub mod stdio;
