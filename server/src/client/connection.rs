//! One selected interface spoken to: HTTP+JSON or JSON-RPC, 1.0 or 0.3, answers normalized
//! to 1.0 shapes, streams read as server-sent events.

use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use super::{Binding, ClientError, Events, Interface};
use crate::a2a::{Version, v03};
use crate::extensions;

/// One interface, spoken to.
#[derive(Clone)]
pub struct Link {
    pub http: reqwest::Client,
    pub token: Option<String>,
    pub iface: Interface,
    /// Sent with every request (a node forwarding a request sends its credentials so).
    pub headers: reqwest::header::HeaderMap,
}

impl Link {
    pub(super) fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, url).headers(self.headers.clone());
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

    pub(super) fn content_type(&self) -> &'static str {
        match self.iface.version {
            Version::V1 => "application/a2a+json",
            Version::V03 => "application/json",
        }
    }

    pub(super) fn rest_url(&self, path: &str) -> String {
        let base = self.iface.url.trim_end_matches('/');
        match self.iface.version {
            Version::V1 => format!("{base}{path}"),
            Version::V03 => format!("{base}/v1{path}"),
        }
    }

    /// A unary call: the JSON-RPC method (1.0 or 0.3 name) or the REST route.
    pub(super) async fn unary(
        &self,
        methods: (&str, &str),
        rest: (reqwest::Method, String),
        params: Value,
    ) -> Result<Value, ClientError> {
        self.exchange(methods, rest, params).await.map(|(v, _)| v)
    }

    /// A unary call, and the extensions its answer says were activated (the echo in
    /// `A2A-Extensions` or, from 0.3 servers, `X-A2A-Extensions`).
    pub(crate) async fn exchange(
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
    pub(super) fn normalize(&self, v: Value, wrapped: bool) -> Result<Value, ClientError> {
        let decode = |e: crate::a2a::A2aError| ClientError::Decode(e.to_string());
        match (self.iface.version, self.iface.binding, wrapped) {
            (Version::V1, _, _) => Ok(v),
            (Version::V03, Binding::JsonRpc, true) => v03::wrap_v1(&v).map_err(decode),
            (Version::V03, _, _) => v03::to_v1(&v).map_err(decode),
        }
    }

    pub(super) fn send_params(
        &self,
        message: &wire::a2a::Message,
        return_immediately: bool,
    ) -> Value {
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

    pub(crate) async fn stream(
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

pub(super) async fn json_body(resp: reqwest::Response) -> Result<(u16, Value), ClientError> {
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    match serde_json::from_str(&text) {
        Ok(v) => Ok((status, v)),
        Err(_) => Err(ClientError::Http(status, text)),
    }
}

pub(super) fn rpc_result(v: Value) -> Result<Value, ClientError> {
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
pub(super) fn reason_of_code(code: Option<i64>) -> String {
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
pub(super) fn status_error(status: u16, body: &Value) -> ClientError {
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
pub(super) fn sse_events(
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
