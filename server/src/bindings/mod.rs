//! Thin adapters between transports and the session core.

pub mod a202;
pub mod jsonrpc;
pub mod proto;
pub mod pty_ws;
pub mod rest;
pub mod stdio;
