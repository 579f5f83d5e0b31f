//! The A2A client: reads and checks AgentCards, picks an interface by the 0.3 / 1.0 / auto
//! policy, and speaks HTTP+JSON and JSON-RPC in both versions. Answers come back in the
//! one normalized model's 1.0 JSON, whatever version was spoken.

pub mod a202;
pub mod attach;
pub mod stdio;
pub mod watch;

use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use crate::a2a::{Version, v03};
use crate::extensions;

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
    fn from_error_info(reason: String, message: &Value, info: &Value) -> ClientError {
        ClientError::A2a {
            reason,
            message: message.as_str().unwrap_or("").to_owned(),
            metadata: info["metadata"].as_object().cloned().unwrap_or_default(),
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
pub type Events = std::pin::Pin<Box<dyn Stream<Item = Result<Value, ClientError>> + Send>>;

/// One interface, spoken to.
#[derive(Clone)]
pub struct Connection {
    pub http: reqwest::Client,
    pub token: Option<String>,
    pub iface: Interface,
}

impl Connection {
    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        // 1.0 says so and speaks a2a+json; 0.3 sends no version header.
        match self.iface.version {
            Version::V1 => req.header("A2A-Version", "1.0").header(
                reqwest::header::ACCEPT,
                "application/a2a+json, text/event-stream",
            ),
            Version::V03 => req.header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            ),
        }
    }

    fn content_type(&self) -> &'static str {
        match self.iface.version {
            Version::V1 => "application/a2a+json",
            Version::V03 => "application/json",
        }
    }

    fn rest_url(&self, path: &str) -> String {
        let base = self.iface.url.trim_end_matches('/');
        match self.iface.version {
            Version::V1 => format!("{base}{path}"),
            Version::V03 => format!("{base}/v1{path}"),
        }
    }

    /// A unary call: the JSON-RPC method (1.0 or 0.3 name) or the REST route.
    async fn unary(
        &self,
        methods: (&str, &str),
        rest: (reqwest::Method, String),
        params: Value,
    ) -> Result<Value, ClientError> {
        self.exchange(methods, rest, params).await.map(|(v, _)| v)
    }

    /// A unary call, and the extensions its answer says were activated (the echo in
    /// `A2A-Extensions` or, from 0.3 servers, `X-A2A-Extensions`).
    async fn exchange(
        &self,
        methods: (&str, &str),
        rest: (reqwest::Method, String),
        params: Value,
    ) -> Result<(Value, Vec<String>), ClientError> {
        let echoed = |resp: &reqwest::Response| -> Vec<String> {
            [extensions::HEADER, extensions::LEGACY_HEADER]
                .iter()
                .flat_map(|name| extensions::listed(resp.headers(), name))
                .collect()
        };
        match self.iface.binding {
            Binding::JsonRpc => {
                let method = match self.iface.version {
                    Version::V1 => methods.0,
                    Version::V03 => methods.1,
                };
                let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
                let resp = self
                    .request(reqwest::Method::POST, &self.iface.url)
                    .header(reqwest::header::CONTENT_TYPE, self.content_type())
                    .body(body.to_string())
                    .send()
                    .await?;
                let echo = echoed(&resp);
                Ok((rpc_result(json_body(resp).await?.1)?, echo))
            }
            Binding::HttpJson => {
                let (method, path) = rest;
                let mut req = self.request(method.clone(), &self.rest_url(&path));
                if method == reqwest::Method::POST {
                    req = req
                        .header(reqwest::header::CONTENT_TYPE, self.content_type())
                        .body(params.to_string());
                }
                let resp = req.send().await?;
                let echo = echoed(&resp);
                let (status, body) = json_body(resp).await?;
                if status >= 300 {
                    return Err(status_error(status, &body));
                }
                Ok((body, echo))
            }
        }
    }

    /// Answers of 0.3 in 1.0 shapes.
    fn normalize(&self, v: Value, wrapped: bool) -> Result<Value, ClientError> {
        let decode = |e: crate::a2a::A2aError| ClientError::Decode(e.to_string());
        match (self.iface.version, self.iface.binding, wrapped) {
            (Version::V1, _, _) => Ok(v),
            (Version::V03, Binding::JsonRpc, true) => v03::wrap_v1(&v).map_err(decode),
            (Version::V03, _, _) => v03::to_v1(&v).map_err(decode),
        }
    }

    fn send_params(&self, message: &wire::a2a::Message, return_immediately: bool) -> Value {
        match (self.iface.version, self.iface.binding) {
            (Version::V1, _) => {
                json!({ "message": message, "configuration": { "returnImmediately": return_immediately } })
            }
            (Version::V03, Binding::JsonRpc) => {
                json!({ "message": v03::message(message), "configuration": { "blocking": !return_immediately } })
            }
            (Version::V03, Binding::HttpJson) => {
                json!({ "request": v03::rest::message(message), "configuration": { "blocking": !return_immediately } })
            }
        }
    }

    /// SendMessage: `{"task": …}` or `{"message": …}`.
    pub async fn send(
        &self,
        message: &wire::a2a::Message,
        return_immediately: bool,
    ) -> Result<Value, ClientError> {
        self.send_echoed(message, return_immediately)
            .await
            .map(|(v, _)| v)
    }

    /// SendMessage, and the extensions the agent echoed as activated.
    pub async fn send_echoed(
        &self,
        message: &wire::a2a::Message,
        return_immediately: bool,
    ) -> Result<(Value, Vec<String>), ClientError> {
        let params = self.send_params(message, return_immediately);
        let (v, echo) = self
            .exchange(
                ("SendMessage", "message/send"),
                (reqwest::Method::POST, "/message:send".into()),
                params,
            )
            .await?;
        Ok((self.normalize(v, true)?, echo))
    }

    pub async fn get(&self, id: &str, history_length: Option<u32>) -> Result<Value, ClientError> {
        let mut params = json!({ "id": id });
        let mut path = format!("/tasks/{id}");
        if let Some(n) = history_length {
            params["historyLength"] = json!(n);
            path.push_str(&format!("?historyLength={n}"));
        }
        let v = self
            .unary(
                ("GetTask", "tasks/get"),
                (reqwest::Method::GET, path),
                params,
            )
            .await?;
        self.normalize(v, false)
    }

    pub async fn cancel(&self, id: &str) -> Result<Value, ClientError> {
        let path = format!("/tasks/{id}:cancel");
        let v = self
            .unary(
                ("CancelTask", "tasks/cancel"),
                (reqwest::Method::POST, path),
                json!({ "id": id }),
            )
            .await?;
        self.normalize(v, false)
    }

    /// ListTasks (1.0 only: 0.3 had none).
    pub async fn list(&self, context_id: Option<&str>) -> Result<Value, ClientError> {
        if self.iface.version == Version::V03 {
            return Err(ClientError::a2a(
                "UNSUPPORTED_OPERATION",
                "A2A 0.3 has no ListTasks; use --a2a-protocol 1.0",
            ));
        }
        let mut params = json!({});
        let mut path = "/tasks".to_owned();
        if let Some(c) = context_id {
            params["contextId"] = json!(c);
            path.push_str(&format!("?contextId={c}"));
        }
        self.unary(
            ("ListTasks", "tasks/list"),
            (reqwest::Method::GET, path),
            params,
        )
        .await
    }

    /// Registers a push config for a task; returns its id.
    pub async fn create_push(
        &self,
        task_id: &str,
        url: &str,
        token: &str,
    ) -> Result<String, ClientError> {
        let inner = json!({ "url": url, "token": token });
        let params = match (self.iface.version, self.iface.binding) {
            (Version::V1, _) => json!({ "taskId": task_id, "url": url, "token": token }),
            (Version::V03, Binding::JsonRpc) => {
                json!({ "taskId": task_id, "pushNotificationConfig": inner })
            }
            (Version::V03, Binding::HttpJson) => {
                json!({ "config": { "pushNotificationConfig": inner } })
            }
        };
        let path = format!("/tasks/{task_id}/pushNotificationConfigs");
        let v = self
            .unary(
                (
                    "CreateTaskPushNotificationConfig",
                    "tasks/pushNotificationConfig/set",
                ),
                (reqwest::Method::POST, path),
                params,
            )
            .await?;
        v["id"]
            .as_str()
            .or_else(|| v["pushNotificationConfig"]["id"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| ClientError::Decode(format!("no config id in {v}")))
    }

    pub async fn delete_push(&self, task_id: &str, id: &str) -> Result<(), ClientError> {
        let params = match self.iface.version {
            Version::V1 => json!({ "taskId": task_id, "id": id }),
            Version::V03 => json!({ "id": task_id, "pushNotificationConfigId": id }),
        };
        let path = format!("/tasks/{task_id}/pushNotificationConfigs/{id}");
        self.unary(
            (
                "DeleteTaskPushNotificationConfig",
                "tasks/pushNotificationConfig/delete",
            ),
            (reqwest::Method::DELETE, path),
            params,
        )
        .await
        .map(drop)
    }

    pub async fn send_stream(&self, message: &wire::a2a::Message) -> Result<Events, ClientError> {
        let params = self.send_params(message, false);
        self.stream(
            ("SendStreamingMessage", "message/stream"),
            "/message:stream".into(),
            params,
        )
        .await
    }

    pub async fn subscribe(&self, id: &str) -> Result<Events, ClientError> {
        let path = format!("/tasks/{id}:subscribe");
        self.stream(
            ("SubscribeToTask", "tasks/resubscribe"),
            path,
            json!({ "id": id }),
        )
        .await
    }

    async fn stream(
        &self,
        methods: (&str, &str),
        path: String,
        params: Value,
    ) -> Result<Events, ClientError> {
        let (url, body, rpc) = match self.iface.binding {
            Binding::JsonRpc => {
                let method = match self.iface.version {
                    Version::V1 => methods.0,
                    Version::V03 => methods.1,
                };
                let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
                (self.iface.url.clone(), body, true)
            }
            Binding::HttpJson => (self.rest_url(&path), params, false),
        };
        let resp = self
            .request(reqwest::Method::POST, &url)
            .header(reqwest::header::CONTENT_TYPE, self.content_type())
            .body(body.to_string())
            .send()
            .await?;
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error before the first event is a plain answer.
            let (status, body) = json_body(resp).await?;
            return Err(if rpc {
                rpc_result(body).err().unwrap_or_else(|| {
                    ClientError::Decode("a JSON-RPC result instead of a stream".into())
                })
            } else {
                status_error(status, &body)
            });
        }
        let conn = self.clone();
        let events = sse_events(resp).map(move |item| {
            let (name, data) = item?;
            let v: Value =
                serde_json::from_str(&data).map_err(|e| ClientError::Decode(e.to_string()))?;
            if name.as_deref() == Some("error") {
                return Err(if rpc {
                    rpc_result(v).err().unwrap_or_else(|| {
                        ClientError::Decode("an error event without an error".into())
                    })
                } else {
                    status_error(500, &v)
                });
            }
            let v = if rpc { rpc_result(v)? } else { v };
            conn.normalize(v, true)
        });
        Ok(Box::pin(events))
    }
}

async fn json_body(resp: reqwest::Response) -> Result<(u16, Value), ClientError> {
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    match serde_json::from_str(&text) {
        Ok(v) => Ok((status, v)),
        Err(_) => Err(ClientError::Http(status, text)),
    }
}

fn rpc_result(v: Value) -> Result<Value, ClientError> {
    if let Some(e) = v.get("error") {
        // 1.0 names the reason in an ErrorInfo; 0.3 has only the code.
        let reason = e["data"][0]["reason"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| reason_of_code(e["code"].as_i64()));
        return Err(ClientError::from_error_info(
            reason,
            &e["message"],
            &e["data"][0],
        ));
    }
    v.get("result")
        .cloned()
        .ok_or_else(|| ClientError::Decode(format!("no result in {v}")))
}

/// The A2A reason a JSON-RPC error code stands for.
fn reason_of_code(code: Option<i64>) -> String {
    let known = match code {
        Some(-32001) => "TASK_NOT_FOUND",
        Some(-32002) => "TASK_NOT_CANCELABLE",
        Some(-32003) => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        Some(-32004) => "UNSUPPORTED_OPERATION",
        Some(-32005) => "CONTENT_TYPE_NOT_SUPPORTED",
        Some(-32006) => "INVALID_AGENT_RESPONSE",
        Some(-32007) => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        Some(-32008) => "EXTENSION_SUPPORT_REQUIRED",
        Some(-32009) => "VERSION_NOT_SUPPORTED",
        Some(-32600) => "INVALID_REQUEST",
        Some(-32601) => "METHOD_NOT_FOUND",
        Some(-32602) => "INVALID_PARAMS",
        _ => "",
    };
    match (known, code) {
        ("", Some(code)) => format!("JSON-RPC {code}"),
        ("", None) => "JSON-RPC error".into(),
        (reason, _) => reason.into(),
    }
}

/// A google.rpc.Status body (or anything else) as an error.
fn status_error(status: u16, body: &Value) -> ClientError {
    match body["error"]["details"][0]["reason"].as_str() {
        Some(reason) => ClientError::from_error_info(
            reason.to_owned(),
            &body["error"]["message"],
            &body["error"]["details"][0],
        ),
        None => ClientError::Http(status, body.to_string()),
    }
}

/// Server-sent events as (event name, data).
fn sse_events(
    resp: reqwest::Response,
) -> impl Stream<Item = Result<(Option<String>, String), ClientError>> + Send {
    let start = (resp.bytes_stream(), String::new(), false);
    futures_util::stream::unfold(start, |(mut body, mut buf, done)| async move {
        if done {
            return None;
        }
        loop {
            if let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let (mut name, mut data) = (None, Vec::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some((Ok((name, data.join("\n"))), (body, buf, false)));
            }
            match body.next().await {
                Some(Ok(chunk)) => {
                    buf.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"))
                }
                Some(Err(e)) => return Some((Err(e.into()), (body, buf, true))),
                None => return None,
            }
        }
    })
}

/// Runs `op` on the first candidate; under `auto` with fallback, a VersionNotSupported
/// answer (and nothing else) moves on to the first 0.3 candidate.
pub async fn with_policy<T, F, Fut>(
    http: &reqwest::Client,
    token: Option<&str>,
    candidates: &[Interface],
    policy: Policy,
    fallback: bool,
    op: F,
) -> Result<(Interface, T), ClientError>
where
    F: Fn(Connection) -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let connect = |iface: &Interface| Connection {
        http: http.clone(),
        token: token.map(str::to_owned),
        iface: iface.clone(),
    };
    let first = candidates
        .first()
        .ok_or_else(|| ClientError::NoInterface(format!("no interface for policy {policy:?}")))?;
    let legacy = candidates.iter().find(|i| i.version == Version::V03);
    let may_fall_back = policy == Policy::Auto && fallback;
    let mut cache = InterfaceCache::load();
    if let (true, Some(legacy)) = (may_fall_back && cache.refused(first), legacy) {
        tracing::info!(skipped = %first.url, to = %legacy.url, "cached: that interface refused A2A 1.0 lately; using 0.3");
        return op(connect(legacy)).await.map(|t| (legacy.clone(), t));
    }
    match op(connect(first)).await {
        Err(e) if e.version_not_supported() && may_fall_back => {
            let Some(legacy) = legacy else {
                return Err(e);
            };
            cache.mark(first, true);
            tracing::info!(from = %first.url, to = %legacy.url, "VersionNotSupported: falling back to A2A 0.3");
            op(connect(legacy)).await.map(|t| (legacy.clone(), t))
        }
        other => {
            if other.is_ok() {
                cache.mark(first, false);
            }
            other.map(|t| (first.clone(), t))
        }
    }
}

/// Interfaces that answered VersionNotSupported, keyed by (version, binding, url) and kept
/// for an hour in `PTYHOST_A2A_CACHE` (default `~/.cache/ptyhost/a2a-interfaces.json`), so
/// `auto` with fallback goes straight to 0.3 instead of being refused again. An interface
/// that answers clears its mark; a card that changes its URLs has new keys.
struct InterfaceCache {
    path: Option<std::path::PathBuf>,
    refused: std::collections::HashMap<String, i64>,
}

const CACHE_TTL_MS: i64 = 3_600_000;

impl InterfaceCache {
    fn load() -> InterfaceCache {
        let path = std::env::var_os("PTYHOST_A2A_CACHE")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .map(std::path::PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache"))
                    })?;
                Some(base.join("ptyhost").join("a2a-interfaces.json"))
            });
        let refused = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        InterfaceCache { path, refused }
    }

    fn key(iface: &Interface) -> String {
        format!(
            "{}|{}|{}",
            iface.version.label(),
            iface.binding.name(),
            iface.url
        )
    }

    fn refused(&self, iface: &Interface) -> bool {
        let now = crate::clock::now_ms();
        self.refused
            .get(&Self::key(iface))
            .is_some_and(|at| now - at < CACHE_TTL_MS)
    }

    fn mark(&mut self, iface: &Interface, refused: bool) {
        let key = Self::key(iface);
        let changed = if refused {
            self.refused.insert(key, crate::clock::now_ms());
            true
        } else {
            self.refused.remove(&key).is_some()
        };
        if let (true, Some(path)) = (changed, &self.path) {
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    std::fs::write(
                        path,
                        serde_json::to_string(&self.refused).unwrap_or_default(),
                    )
                });
            if let Err(e) = written {
                tracing::debug!(error = %e, "the interface cache was not written");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
