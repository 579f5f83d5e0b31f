//! `ptyhost mcp --url URL --token T`: an MCP client on stdio whose server is a running
//! ptyhost's `B/mcp`. Each JSON-RPC message from stdin is POSTed there (concurrently: a
//! long `run` holds up nothing), and whatever answers, a JSON body or an event stream, goes
//! to stdout in order of arrival; the session's own stream (`GET`) carries what the server
//! sends unasked, such as resource updates. Every MCP feature passes through unchanged:
//! progress, cancellation (which also drops the cancelled request's answer stream),
//! subscriptions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use base64::Engine as _;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use wire::rpc::{JsonRpcError, JsonRpcResponse};

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// Where a 2026-07-28 request names its protocol version.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// The MCP endpoint `url` names: the URL itself when it ends in `/mcp`, else its `/mcp`.
pub fn endpoint(url: &str) -> String {
    let url = url.trim_end_matches('/');
    match url.ends_with("/mcp") {
        true => url.to_owned(),
        false => format!("{url}/mcp"),
    }
}

struct Bridge {
    http: reqwest::Client,
    endpoint: String,
    auth: HeaderValue,
    /// Set by the answer to `initialize` (servers of sessionless protocol versions send none).
    session: Mutex<Option<HeaderValue>>,
    protocol: Mutex<Option<HeaderValue>>,
    out: mpsc::UnboundedSender<String>,
}

/// Relays stdin to `url`'s MCP endpoint and its answers to stdout until stdin closes.
pub async fn relay(url: &str, token: &str) -> Result<()> {
    let (out, mut lines) = mpsc::unbounded_channel::<String>();
    let bridge = Arc::new(Bridge {
        http: reqwest::Client::builder().build()?,
        endpoint: endpoint(url),
        auth: HeaderValue::from_str(&format!("Bearer {token}")).context("the token")?,
        session: Mutex::new(None),
        protocol: Mutex::new(None),
        out,
    });
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            if stdout
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
            let _ = stdout.flush().await;
        }
    });
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut calls = tokio::task::JoinSet::new();
    let mut pending = HashMap::new();
    while let Some(line) = stdin.next_line().await? {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            bridge.refuse(Some(Value::Null), -32700, "not JSON".into());
            continue;
        };
        let bridge = bridge.clone();
        let method = message.get("method").and_then(Value::as_str);
        let request = method.is_some() && message.get("id").is_some();
        if method == Some("initialize") {
            // Answered before anything else is sent: its answer names the session.
            bridge.post(message).await;
            let b = bridge.clone();
            calls.spawn(async move { b.listen().await });
        } else if request {
            let id = message["id"].to_string();
            pending.retain(|_, call: &mut AbortHandle| !call.is_finished());
            pending.insert(id, calls.spawn(async move { bridge.post(message).await }));
        } else {
            // A cancelled request's answer is dropped: a sessionless (2026-07-28) server
            // learns of the cancel only so.
            if method == Some("notifications/cancelled")
                && let Some(call) = (message.pointer("/params/requestId"))
                    .and_then(|id| pending.remove(&id.to_string()))
            {
                call.abort();
            }
            // Notifications and answers keep their order (`initialized` before any call).
            bridge.post(message).await;
        }
    }
    calls.abort_all();
    bridge.close().await;
    drop(bridge);
    let _ = writer.await;
    Ok(())
}

impl Bridge {
    /// The headers of every request: the token, and the session and protocol version once
    /// known.
    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, self.auth.clone());
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Some(s) = self.session.lock().unwrap().clone() {
            h.insert(SESSION_ID, s);
        }
        if let Some(v) = self.protocol.lock().unwrap().clone() {
            h.insert(PROTOCOL_VERSION, v);
        }
        h
    }

    /// POSTs one message; its answers go out. A refusal of a request is answered as a
    /// JSON-RPC error for its id, so the client is never left waiting.
    async fn post(&self, message: Value) {
        let id = message
            .get("id")
            .cloned()
            .filter(|_| message.get("method").is_some());
        let mut headers = self.headers();
        headers.extend(mirrored_headers(&message));
        let sent = (self.http.post(&self.endpoint))
            .headers(headers)
            .header(CONTENT_TYPE, "application/json")
            .body(message.to_string())
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                return self.refuse(id, -32000, format!("{} is unreachable: {e}", self.endpoint));
            }
        };
        if let Some(s) = resp.headers().get(SESSION_ID) {
            *self.session.lock().unwrap() = Some(s.clone());
        }
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            let code = if status.as_u16() == 401 {
                -32001
            } else {
                -32000
            };
            return self.refuse(id, code, format!("HTTP {status}: {body}"));
        }
        self.forward(resp).await;
    }

    /// Writes out what an answer carries: one JSON body, or each event of a stream.
    async fn forward(&self, resp: reqwest::Response) {
        let stream = (resp.headers().get(CONTENT_TYPE))
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !stream {
            if let Ok(body) = resp.text().await
                && !body.trim().is_empty()
            {
                self.emit(body.trim());
            }
            return;
        }
        let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
        while let Some(Ok(event)) = events.next().await {
            if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                self.emit(&data);
            }
        }
    }

    /// One message to stdout; the answer to `initialize` also fixes the protocol version.
    fn emit(&self, data: &str) {
        if let Ok(v) = serde_json::from_str::<Value>(data)
            && let Some(version) = v.pointer("/result/protocolVersion").and_then(Value::as_str)
            && let Ok(h) = HeaderValue::from_str(version)
        {
            *self.protocol.lock().unwrap() = Some(h);
        }
        let _ = self.out.send(data.to_owned());
    }

    fn refuse(&self, id: Option<Value>, code: i64, message: String) {
        tracing::warn!(%message, "MCP request refused");
        if let Some(id) = id {
            let error = JsonRpcError {
                code,
                message,
                data: None,
            };
            let answer = JsonRpcResponse::<Value>::error(id, error);
            let _ = self
                .out
                .send(serde_json::to_string(&answer).unwrap_or_default());
        }
    }

    /// The session's stream of what the server sends unasked, while there is a session.
    async fn listen(&self) {
        if self.session.lock().unwrap().is_none() {
            return;
        }
        let resp = (self.http.get(&self.endpoint))
            .headers(self.headers())
            .send()
            .await;
        if let Ok(resp) = resp
            && resp.status().is_success()
        {
            self.forward(resp).await;
        }
    }

    /// Ends the session on the server.
    async fn close(&self) {
        if self.session.lock().unwrap().is_some() {
            let _ = (self.http.delete(&self.endpoint))
                .headers(self.headers())
                .send()
                .await;
        }
    }
}

/// The headers a Streamable HTTP request carries that mirror its body (SEP-2243), so the
/// server can route it unread: `Mcp-Method`, `Mcp-Name` (a tool's or prompt's name, a
/// resource's URI, a task's id; Base64 in `=?base64?…?=` when it is no plain header text),
/// and the protocol version the request's `_meta` names.
fn mirrored_headers(message: &Value) -> HeaderMap {
    let mut h = HeaderMap::new();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return h;
    };
    let params = message.get("params");
    if let Ok(v) = HeaderValue::from_str(method) {
        h.insert("mcp-method", v);
    }
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(name) = key.and_then(|k| params?.get(k)?.as_str()) {
        let plain = name.trim() == name && name.bytes().all(|b| (0x20..0x7f).contains(&b));
        let value = match plain {
            true => name.to_owned(),
            false => format!(
                "=?base64?{}?=",
                base64::engine::general_purpose::STANDARD.encode(name)
            ),
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert("mcp-name", v);
        }
    }
    let version = params.and_then(|p| p.get("_meta")?.get(META_VERSION)?.as_str());
    if let Some(v) = version.and_then(|v| HeaderValue::from_str(v).ok()) {
        h.insert(PROTOCOL_VERSION, v);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_base_url_or_the_endpoint_itself_names_the_endpoint() {
        assert_eq!(endpoint("http://h:1"), "http://h:1/mcp");
        assert_eq!(
            endpoint("http://h:1/agents/local/"),
            "http://h:1/agents/local/mcp"
        );
        assert_eq!(endpoint("http://h:1/mcp"), "http://h:1/mcp");
    }

    #[test]
    fn a_request_carries_its_method_name_and_version_as_headers() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "run", "arguments": {}, "_meta": {META_VERSION: "2026-07-28"}}});
        let h = mirrored_headers(&call);
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h["mcp-name"], "run");
        assert_eq!(h[PROTOCOL_VERSION], "2026-07-28");
        let read =
            json!({"method": "resources/read", "params": {"uri": "ptyhost://sessions/é/screen"}});
        let h = mirrored_headers(&read);
        assert_eq!(
            h["mcp-name"],
            "=?base64?cHR5aG9zdDovL3Nlc3Npb25zL8OpL3NjcmVlbg==?="
        );
        assert!(!h.contains_key(PROTOCOL_VERSION));
        assert!(mirrored_headers(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})).is_empty());
    }
}
