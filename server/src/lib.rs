//! ptyhost: an A2A agent whose agent is a terminal.
// The UI's view types are deep when built without cargo-leptos's type erasure (tests).
#![recursion_limit = "256"]
// Only `sys` may hold unsafe code, each block with its SAFETY comment.
#![deny(unsafe_code)]

pub mod a202;
pub mod a2a;
pub mod admission;
pub mod agent;
pub mod agentic;
pub mod audit;
pub mod auth;
pub mod bindings;
pub mod card;
pub mod cli;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod egress;
pub mod executor;
pub mod extensions;
pub mod files;
pub mod framing;
pub mod http;
pub mod json;
pub mod lifecycle;
pub mod limits;
pub mod previews;
pub mod recording;
pub mod revocation;
pub mod sandbox;
pub mod state;

pub mod sessions;
pub mod store;
pub mod sys;
pub mod tls;
pub mod websocket;
