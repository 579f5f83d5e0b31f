//! The A2A client: reads and checks AgentCards, picks an interface by the 0.3 / 1.0 / auto
//! policy, and speaks HTTP+JSON and JSON-RPC in both versions. Answers come back in the
//! one normalized model's 1.0 JSON, whatever version was spoken.

pub mod a202;
pub mod attach;
mod connection;
pub mod mcp;
mod policy;
pub mod stdio;
pub mod watch;
pub use connection::*;
pub use policy::*;

use futures_util::Stream;
use serde_json::Value;

use crate::a2a::Version;

/// Which protocol versions a client may use (seed 002).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Only 0.3 interfaces (the default).
    V03,
    /// Only 1.0 interfaces; never 0.3.
    V1,
    /// 1.0 interfaces first; 0.3 only after VersionNotSupported, with fallback on.
    Auto,
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "0.3" => Ok(Policy::V03),
            "1.0" => Ok(Policy::V1),
            "auto" => Ok(Policy::Auto),
            other => Err(format!("{other:?} is not 0.3, 1.0 or auto")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    HttpJson,
    JsonRpc,
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::HttpJson => "HTTP+JSON",
            Binding::JsonRpc => "JSONRPC",
        }
    }

    fn from_name(name: &str) -> Option<Binding> {
        match name.to_ascii_uppercase().as_str() {
            "HTTP+JSON" | "REST" => Some(Binding::HttpJson),
            "JSONRPC" | "JSON-RPC" => Some(Binding::JsonRpc),
            _ => None,
        }
    }
}

/// One interface of a card; the key of the interface cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Interface {
    pub version: Version,
    pub binding: Binding,
    pub url: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the AgentCard is not valid: {0}")]
    Card(String),
    #[error("no interface fits: {0}")]
    NoInterface(String),
    /// An A2A error: its reason, message, and the metadata of its ErrorInfo (an
    /// extension's details travel there, e.g. `a202_code`).
    #[error("{reason}: {message}")]
    A2a {
        reason: String,
        message: String,
        metadata: serde_json::Map<String, Value>,
    },
    #[error("HTTP {0}: {1}")]
    Http(u16, String),
    #[error("transport: {0}")]
    Transport(String),
    #[error("unexpected answer: {0}")]
    Decode(String),
}

impl ClientError {
    /// An A2A error with no ErrorInfo metadata.
    pub fn a2a(reason: &str, message: impl Into<String>) -> ClientError {
        ClientError::A2a {
            reason: reason.to_owned(),
            message: message.into(),
            metadata: serde_json::Map::new(),
        }
    }

    /// An A2A error as an ErrorInfo describes it.
    fn from_error_info(
        reason: String,
        message: String,
        info: Option<wire::rpc::ErrorInfo>,
    ) -> ClientError {
        let metadata = info.map(|i| i.metadata).unwrap_or_default();
        ClientError::A2a {
            reason,
            message,
            metadata: metadata
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        }
    }

    /// The only error that may make `auto` fall back to 0.3.
    pub fn version_not_supported(&self) -> bool {
        matches!(self, ClientError::A2a { reason, .. } if reason == "VERSION_NOT_SUPPORTED")
    }
}

impl From<reqwest::Error> for ClientError {
    fn from(e: reqwest::Error) -> ClientError {
        ClientError::Transport(e.to_string())
    }
}

fn version_of(v: &str) -> Option<Version> {
    // Only the declared version counts: a route named `v1` is no evidence.
    if v == "1" || v.starts_with("1.") {
        Some(Version::V1)
    } else if v == "0.3" || v.starts_with("0.3.") {
        Some(Version::V03)
    } else {
        None
    }
}

/// The interfaces of a card in card order: each 1.0 `supportedInterfaces` entry (which must
/// name its own url, binding and version), then a 0.3 card's `url` / `additionalInterfaces`.
pub fn interfaces(card: &Value) -> Result<Vec<Interface>, ClientError> {
    let mut out: Vec<Interface> = Vec::new();
    let top_version = card["protocolVersion"].as_str().unwrap_or("");
    match card.get("supportedInterfaces").and_then(Value::as_array) {
        Some(list) => {
            for (i, entry) in list.iter().enumerate() {
                let field = |k: &str| {
                    entry[k].as_str().filter(|s| !s.is_empty()).ok_or_else(|| {
                        ClientError::Card(format!("supportedInterfaces[{i}] has no {k}"))
                    })
                };
                let (url, binding, version) = (
                    field("url")?,
                    field("protocolBinding")?,
                    field("protocolVersion")?,
                );
                if let (Some(binding), Some(version)) =
                    (Binding::from_name(binding), version_of(version))
                {
                    out.push(Interface {
                        version,
                        binding,
                        url: url.to_owned(),
                    });
                }
            }
        }
        None if version_of(top_version) == Some(Version::V1) => {
            return Err(ClientError::Card(
                "it claims protocolVersion 1.0 but lists no supportedInterfaces (legacy transport fields only)".into(),
            ));
        }
        None => {}
    }
    if version_of(top_version) == Some(Version::V03) {
        let main = card["url"]
            .as_str()
            .map(|u| (u, card["preferredTransport"].as_str().unwrap_or("JSONRPC")));
        let more = card["additionalInterfaces"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| Some((e["url"].as_str()?, e["transport"].as_str()?)));
        for (url, transport) in main.into_iter().chain(more) {
            if let Some(binding) = Binding::from_name(transport) {
                let iface = Interface {
                    version: Version::V03,
                    binding,
                    url: url.to_owned(),
                };
                if !out.contains(&iface) {
                    out.push(iface);
                }
            }
        }
    }
    if out.is_empty() {
        return Err(ClientError::NoInterface(
            "the card lists no HTTP+JSON or JSON-RPC interface of version 0.3 or 1.0".into(),
        ));
    }
    Ok(out)
}

/// The pty-ws attach URL of a session, from the card's pty-ws interface.
pub fn pty_ws_url(card: &Value, session_id: &str) -> Option<String> {
    card["supportedInterfaces"]
        .as_array()?
        .iter()
        .find(|i| i["protocolBinding"] == wire::BINDING_URI)?["url"]
        .as_str()
        .map(|u| u.replace("{session_id}", session_id))
}

/// The interfaces a policy may use, in the order to try them (auto: 1.0, then 0.3).
pub fn candidates(all: &[Interface], policy: Policy, binding: Option<Binding>) -> Vec<Interface> {
    let fits = |i: &&Interface| binding.is_none_or(|b| i.binding == b);
    let of = |v: Version| {
        all.iter()
            .filter(fits)
            .filter(move |i| i.version == v)
            .cloned()
    };
    match policy {
        Policy::V03 => of(Version::V03).collect(),
        Policy::V1 => of(Version::V1).collect(),
        Policy::Auto => of(Version::V1).chain(of(Version::V03)).collect(),
    }
}

/// Reads a card: a file, a card URL, or an agent's base URL (its well-known card).
pub async fn fetch_card(http: &reqwest::Client, source: &str) -> Result<Value, ClientError> {
    let text = if std::path::Path::new(source).is_file() {
        std::fs::read_to_string(source).map_err(|e| ClientError::Card(format!("{source}: {e}")))?
    } else {
        let url = if source.ends_with(".json") {
            source.to_owned()
        } else {
            format!(
                "{}/.well-known/agent-card.json",
                source.trim_end_matches('/')
            )
        };
        let resp = http.get(&url).send().await?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            return Err(ClientError::Http(status.as_u16(), text));
        }
        text
    };
    serde_json::from_str(&text).map_err(|e| ClientError::Card(e.to_string()))
}

/// A stream of 1.0 StreamResponse JSON values.
pub type Events =
    std::pin::Pin<Box<dyn Stream<Item = Result<wire::a2a::StreamResponse, ClientError>> + Send>>;

const CACHE_TTL_MS: i64 = 3_600_000;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn interfaces_come_in_card_order_and_need_their_own_url_binding_and_version() {
        let card = json!({
            "protocolVersion": "0.3.0", "url": "http://h/rpc", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{ "url": "http://h", "transport": "HTTP+JSON" }],
            "supportedInterfaces": [
                { "url": "http://h/v1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
                { "url": "ws://h/attach", "protocolBinding": "https://x/pty-ws/v1", "protocolVersion": "1.0" },
                { "url": "http://h/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
            ],
        });
        let all = interfaces(&card).unwrap();
        let brief: Vec<(Version, Binding, &str)> = all
            .iter()
            .map(|i| (i.version, i.binding, i.url.as_str()))
            .collect();
        assert_eq!(
            brief,
            [
                (Version::V1, Binding::HttpJson, "http://h/v1"),
                (Version::V03, Binding::JsonRpc, "http://h/rpc"),
                (Version::V03, Binding::HttpJson, "http://h"),
            ],
            "a route named v1 is still the version its entry declares"
        );
        assert_eq!(candidates(&all, Policy::V1, None).len(), 1);
        assert!(
            candidates(&all, Policy::V1, Some(Binding::JsonRpc)).is_empty(),
            "strict 1.0 never picks 0.3"
        );
        assert_eq!(
            candidates(&all, Policy::V03, None)[0].binding,
            Binding::JsonRpc
        );
        let auto = candidates(&all, Policy::Auto, None);
        assert_eq!(
            (auto[0].version, auto[1].version),
            (Version::V1, Version::V03)
        );

        let missing =
            json!({ "supportedInterfaces": [{ "url": "http://h", "protocolVersion": "1.0" }] });
        assert!(
            matches!(interfaces(&missing), Err(ClientError::Card(m)) if m.contains("protocolBinding"))
        );
        let legacy_claiming_1_0 =
            json!({ "protocolVersion": "1.0", "url": "http://h", "preferredTransport": "JSONRPC" });
        assert!(matches!(
            interfaces(&legacy_claiming_1_0),
            Err(ClientError::Card(_))
        ));
    }

    #[test]
    fn only_version_not_supported_makes_auto_fall_back() {
        let vns = ClientError::a2a("VERSION_NOT_SUPPORTED", "");
        assert!(vns.version_not_supported());
        for other in [
            ClientError::a2a("UNAUTHENTICATED", ""),
            ClientError::a2a("TASK_NOT_FOUND", ""),
            ClientError::Http(503, String::new()),
            ClientError::Transport("timeout".into()),
        ] {
            assert!(!other.version_not_supported(), "{other}");
        }
    }
}
