//! The envelopes around A2A answers and errors: google.rpc.Status with its `ErrorInfo`
//! detail (REST, pty-ws, the files API) and JSON-RPC 2.0 responses (JSON-RPC, STDIO).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `@type` of a google.rpc.ErrorInfo detail.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// google.rpc.ErrorInfo: the machine-readable reason of an error, in its domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    #[serde(rename = "@type", default)]
    pub type_url: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub domain: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl ErrorInfo {
    /// An ErrorInfo of `reason` in `domain`, without metadata.
    pub fn new(reason: &str, domain: &str) -> ErrorInfo {
        ErrorInfo {
            type_url: ERROR_INFO_TYPE.to_owned(),
            reason: reason.to_owned(),
            domain: domain.to_owned(),
            metadata: BTreeMap::new(),
        }
    }

    /// An A2A error's reason (domain `a2a-protocol.org`).
    pub fn a2a(reason: &str) -> ErrorInfo {
        ErrorInfo::new(reason, "a2a-protocol.org")
    }

    /// The same, with `metadata`.
    pub fn with<const N: usize>(mut self, metadata: [(&str, String); N]) -> ErrorInfo {
        self.metadata
            .extend(metadata.map(|(k, v)| (k.to_owned(), v)));
        self
    }
}

/// An error as google.rpc.Status JSON (A2A 1.0 §11): the HTTP code, the status name, the
/// message, its `ErrorInfo` details, and an extension's `data` when it defines one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcStatus {
    pub code: u16,
    pub status: String,
    pub message: String,
    #[serde(default)]
    pub details: Vec<ErrorInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcStatus {
    /// The first detail's reason, when there is one.
    pub fn reason(&self) -> Option<&str> {
        self.details.first().map(|d| d.reason.as_str())
    }
}

/// An HTTP error body: `{"error": google.rpc.Status}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusBody {
    pub error: RpcStatus,
}

/// The A2A 0.3 REST error body: the 1.0 body plus the JSON-RPC `code`, the `message`, and
/// the error class a 0.3 client knows it by (`type`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct V03StatusBody {
    #[serde(flatten)]
    pub body: StatusBody,
    pub code: i64,
    pub message: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}

/// A JSON-RPC 2.0 request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcRequest<P> {
    pub jsonrpc: String,
    pub id: Value,
    pub method: String,
    pub params: P,
}

impl<P> JsonRpcRequest<P> {
    pub fn new(id: Value, method: &str, params: P) -> JsonRpcRequest<P> {
        JsonRpcRequest {
            jsonrpc: "2.0".to_owned(),
            id,
            method: method.to_owned(),
            params,
        }
    }
}

/// A JSON-RPC 2.0 response: the request's id and a result or an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcResponse<T> {
    pub jsonrpc: String,
    pub id: Value,
    #[serde(flatten)]
    pub outcome: Outcome<T>,
}

/// What a JSON-RPC response carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome<T> {
    Result(T),
    Error(JsonRpcError),
}

/// A JSON-RPC error object. A2A errors carry their ErrorInfo in `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl<T> JsonRpcResponse<T> {
    pub fn result(id: Value, result: T) -> JsonRpcResponse<T> {
        JsonRpcResponse {
            jsonrpc: "2.0".to_owned(),
            id,
            outcome: Outcome::Result(result),
        }
    }

    pub fn error(id: Value, error: JsonRpcError) -> JsonRpcResponse<T> {
        JsonRpcResponse {
            jsonrpc: "2.0".to_owned(),
            id,
            outcome: Outcome::Error(error),
        }
    }
}
