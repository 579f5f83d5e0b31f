//! The AgentCard (A2A 1.0 §8) as ptyhost writes it, with the params of its own extensions
//! (`pty-extensions/v1`, flow control). The superset card adds the 0.3 fields and the
//! `bindings[]` advertisements of the pty-ws binding spec (§10) beside them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub version: String,
    pub supported_interfaces: Vec<AgentInterface>,
    pub provider: AgentProvider,
    pub capabilities: AgentCapabilities,
    pub security_schemes: BTreeMap<String, SecurityScheme>,
    pub security_requirements: Vec<SecurityRequirement>,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentProvider {
    pub organization: String,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub streaming: bool,
    pub push_notifications: bool,
    pub extended_agent_card: bool,
    pub extensions: Vec<AgentExtension>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentExtension {
    pub uri: String,
    pub description: String,
    pub required: bool,
    pub params: Value,
}

impl AgentExtension {
    /// An entry whose `params` are `params` in JSON.
    pub fn new(
        uri: &str,
        description: &str,
        required: bool,
        params: impl Serialize,
    ) -> AgentExtension {
        AgentExtension {
            uri: uri.to_owned(),
            description: description.to_owned(),
            required,
            params: serde_json::to_value(params).unwrap_or_default(),
        }
    }
}

/// A security scheme: 1.0's oneof member (`httpAuthSecurityScheme`) and, on the superset
/// card, the OpenAPI-style `type` / `scheme` that 0.3 readers take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityScheme {
    pub http_auth_security_scheme: HttpAuthScheme,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpAuthScheme {
    pub description: String,
    pub scheme: String,
}

/// `{"schemes": {name: {"list": [scopes]}}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecurityRequirement {
    pub schemes: BTreeMap<String, ScopeList>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScopeList {
    pub list: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub examples: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_modes: Vec<String>,
}

/// The per-instance card: the 1.0 card and what 0.3 readers and pty-ws clients look for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SupersetCard {
    #[serde(flatten)]
    pub card: AgentCard,
    pub bindings: Vec<BindingAd>,
    pub protocol_version: String,
    pub url: String,
    pub preferred_transport: String,
    pub additional_interfaces: Vec<LegacyInterface>,
    pub supports_authenticated_extended_card: bool,
    pub security: Vec<BTreeMap<String, Vec<String>>>,
}

/// A binding the card advertises beside its A2A interfaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BindingAd {
    pub uri: String,
    pub endpoint: String,
    pub preference: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<String>,
    pub notes: String,
}

/// A 0.3 `additionalInterfaces` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyInterface {
    pub url: String,
    pub transport: String,
}

/// `pty-extensions/v1`'s params: the session limits and the backends and classes served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PtyParams {
    pub max_controllers: usize,
    pub max_observers: usize,
    pub keyframe_interval_seconds: f64,
    pub keyframe_interval_frames: u64,
    pub replay_buffer_frames: usize,
    pub replay_buffer_retention_seconds: u64,
    pub default_cols: u16,
    pub default_rows: u16,
    pub session_backends: Vec<String>,
    pub session_classes: Vec<String>,
}

/// The flow-control extension's params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowParams {
    pub ack_op: String,
    pub window_bytes: usize,
    pub min_window_bytes: usize,
    pub resume_bytes: usize,
}
