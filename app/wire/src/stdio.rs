//! The STDIO binding's own frames (the draft A2A custom binding): the handshake each side
//! sends before JSON-RPC starts, the end of a stream, and the session facts stamped on
//! what the agent emits (§9.5).

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const VARIANT_JSON: &str = "stdio-json";
pub const VARIANT_PROTO: &str = "stdio-proto";
pub const PROTOCOL: &str = "a2a-stdio";
pub const PROTOCOL_VERSION: &str = "1.0";

/// The first frame of each side, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Opening {
    Handshake(Handshake),
    HandshakeAck(HandshakeAck),
}

/// The agent's offer: who it is and the variants it speaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handshake {
    pub protocol: String,
    pub protocol_version: String,
    pub session_id: String,
    pub supported_variants: Vec<String>,
    #[serde(default)]
    pub features: Vec<String>,
    pub pid: u32,
}

impl Handshake {
    /// Whether a 1.x client of `session_id` can speak to this agent in `variant`.
    pub fn fits(&self, session_id: &str, variant: &str) -> bool {
        let v = self.protocol_version.as_str();
        self.protocol == PROTOCOL
            && self.session_id == session_id
            && (v == "1" || v.starts_with("1."))
            && self.supported_variants.iter().any(|x| x == variant)
    }
}

/// The parent's answer: the variant it selected, or that it declines (`accept: false`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandshakeAck {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept: Option<bool>,
}

/// The last frame of a streaming request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamEnd {
    pub jsonrpc: String,
    pub id: Value,
    pub stream_end: bool,
}

impl StreamEnd {
    pub fn of(id: Value) -> StreamEnd {
        StreamEnd {
            jsonrpc: "2.0".to_owned(),
            id,
            stream_end: true,
        }
    }
}

/// The session facts every emitted Task, Message and Artifact carries in its metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMark {
    pub session_id: String,
    pub pid: u32,
    pub variant: String,
}
