//! One selected interface spoken to: HTTP+JSON or JSON-RPC, 1.0 or 0.3, answers normalized
//! to 1.0 shapes, streams read as server-sent events.

use futures_util::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use wire::a2a::{
    ListTasksRequest, ListTasksResponse, Message, PushConfigRequest, SendMessageConfiguration,
    SendMessageRequest, StreamResponse, Task, TaskIdRequest, TaskPushNotificationConfig,
};
use wire::rpc::{ErrorInfo, JsonRpcRequest, JsonRpcResponse, Outcome, StatusBody};
use wire::v03 as shapes;

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
        params: impl Serialize,
    ) -> Result<Value, ClientError> {
        self.exchange(methods, rest, params).await.map(|(v, _)| v)
    }

    /// A unary call, and the extensions its answer says were activated (the echo in
    /// `A2A-Extensions` or, from 0.3 servers, `X-A2A-Extensions`).
    pub(crate) async fn exchange(
        &self,
        methods: (&str, &str),
        rest: (reqwest::Method, String),
        params: impl Serialize,
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
                let body = JsonRpcRequest::new(Value::from(1), method, params);
                let resp = self
                    .request(reqwest::Method::POST, &self.iface.url)
                    .header(reqwest::header::CONTENT_TYPE, self.content_type())
                    .body(encode(&body))
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
                        .body(encode(&params));
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

    /// A send's result or a stream's event, whatever version was spoken.
    pub(super) fn event(&self, v: Value) -> Result<StreamResponse, ClientError> {
        match self.iface.version {
            Version::V1 => decode(v),
            Version::V03 => v03::event_in(v, self.rest()).map_err(undecodable),
        }
    }

    /// A task, whatever version was spoken.
    pub(super) fn task(&self, v: Value) -> Result<Task, ClientError> {
        match self.iface.version {
            Version::V1 => decode(v),
            Version::V03 => v03::task_in(v, self.rest()).map_err(undecodable),
        }
    }

    fn rest(&self) -> bool {
        self.iface.binding == Binding::HttpJson
    }

    pub(super) fn send_params(&self, message: &Message, return_immediately: bool) -> Value {
        let configuration = shapes::SendConfiguration {
            blocking: !return_immediately,
        };
        wire::to_json(match (self.iface.version, self.iface.binding) {
            (Version::V1, _) => wire::to_json(SendMessageRequest {
                tenant: None,
                message: message.clone(),
                configuration: Some(SendMessageConfiguration {
                    return_immediately,
                    ..SendMessageConfiguration::default()
                }),
                metadata: None,
            }),
            (Version::V03, Binding::JsonRpc) => wire::to_json(shapes::SendParams {
                message: message.into(),
                configuration,
            }),
            (Version::V03, Binding::HttpJson) => wire::to_json(shapes::rest::SendRequest {
                request: message.into(),
                configuration,
            }),
        })
    }

    /// SendMessage: `{"task": …}` or `{"message": …}`.
    pub async fn send(
        &self,
        message: &Message,
        return_immediately: bool,
    ) -> Result<StreamResponse, ClientError> {
        self.send_echoed(message, return_immediately)
            .await
            .map(|(v, _)| v)
    }

    /// SendMessage, and the extensions the agent echoed as activated.
    pub async fn send_echoed(
        &self,
        message: &Message,
        return_immediately: bool,
    ) -> Result<(StreamResponse, Vec<String>), ClientError> {
        let params = self.send_params(message, return_immediately);
        let (v, echo) = self
            .exchange(
                ("SendMessage", "message/send"),
                (reqwest::Method::POST, "/message:send".into()),
                params,
            )
            .await?;
        Ok((self.event(v)?, echo))
    }

    pub async fn get(&self, id: &str, history_length: Option<u32>) -> Result<Task, ClientError> {
        let mut params = TaskIdRequest::of(id);
        let mut path = format!("/tasks/{id}");
        if let Some(n) = history_length {
            params.history_length = Some(n);
            path.push_str(&format!("?historyLength={n}"));
        }
        let v = self
            .unary(
                ("GetTask", "tasks/get"),
                (reqwest::Method::GET, path),
                params,
            )
            .await?;
        self.task(v)
    }

    pub async fn cancel(&self, id: &str) -> Result<Task, ClientError> {
        let path = format!("/tasks/{id}:cancel");
        let v = self
            .unary(
                ("CancelTask", "tasks/cancel"),
                (reqwest::Method::POST, path),
                TaskIdRequest::of(id),
            )
            .await?;
        self.task(v)
    }

    /// ListTasks (1.0 only: 0.3 had none).
    pub async fn list(&self, context_id: Option<&str>) -> Result<ListTasksResponse, ClientError> {
        if self.iface.version == Version::V03 {
            return Err(ClientError::a2a(
                "UNSUPPORTED_OPERATION",
                "A2A 0.3 has no ListTasks; use --a2a-protocol 1.0",
            ));
        }
        let params = ListTasksRequest {
            context_id: context_id.map(str::to_owned),
            ..ListTasksRequest::default()
        };
        let mut path = "/tasks".to_owned();
        if let Some(c) = context_id {
            path.push_str(&format!("?contextId={c}"));
        }
        let v = self
            .unary(
                ("ListTasks", "tasks/list"),
                (reqwest::Method::GET, path),
                params,
            )
            .await?;
        decode(v)
    }

    /// Registers a push config for a task; returns its id.
    pub async fn create_push(
        &self,
        task_id: &str,
        url: &str,
        token: &str,
    ) -> Result<String, ClientError> {
        let inner = shapes::PushConfig {
            url: url.to_owned(),
            token: Some(token.to_owned()),
            ..shapes::PushConfig::default()
        };
        let params = match (self.iface.version, self.iface.binding) {
            (Version::V1, _) => wire::to_json(TaskPushNotificationConfig {
                task_id: task_id.to_owned(),
                url: url.to_owned(),
                token: Some(token.to_owned()),
                ..TaskPushNotificationConfig::default()
            }),
            (Version::V03, Binding::JsonRpc) => wire::to_json(shapes::TaskPushConfig {
                task_id: task_id.to_owned(),
                push_notification_config: inner,
            }),
            (Version::V03, Binding::HttpJson) => wire::to_json(shapes::rest::CreatePushRequest {
                config: shapes::rest::TaskPushConfig {
                    name: String::new(),
                    push_notification_config: inner,
                },
            }),
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
        let id = match self.iface.version {
            Version::V1 => serde_json::from_value::<TaskPushNotificationConfig>(v.clone())
                .ok()
                .map(|c| c.id),
            Version::V03 => serde_json::from_value::<Created03>(v.clone())
                .ok()
                .and_then(|c| c.push_notification_config.id),
        };
        id.filter(|id| !id.is_empty())
            .ok_or_else(|| ClientError::Decode(format!("no config id in {v}")))
    }

    pub async fn delete_push(&self, task_id: &str, id: &str) -> Result<(), ClientError> {
        let params = match self.iface.version {
            Version::V1 => wire::to_json(PushConfigRequest {
                tenant: None,
                task_id: task_id.to_owned(),
                id: id.to_owned(),
            }),
            Version::V03 => wire::to_json(shapes::PushConfigIdParams {
                id: task_id.to_owned(),
                push_notification_config_id: Some(id.to_owned()),
            }),
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

    pub async fn send_stream(&self, message: &Message) -> Result<Events, ClientError> {
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
            wire::to_json(TaskIdRequest::of(id)),
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
                let body = wire::to_json(JsonRpcRequest::new(Value::from(1), method, params));
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
            conn.event(v)
        });
        Ok(Box::pin(events))
    }
}

/// An answer in 1.0 shapes, typed.
pub fn decode<T: DeserializeOwned>(v: Value) -> Result<T, ClientError> {
    serde_json::from_value(v).map_err(|e| ClientError::Decode(e.to_string()))
}

fn undecodable(e: crate::a2a::A2aError) -> ClientError {
    ClientError::Decode(e.to_string())
}

/// The config a 0.3 agent answers a create with (either binding's shape).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Created03 {
    push_notification_config: shapes::PushConfig,
}

pub(super) fn encode(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
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
    let answer: JsonRpcResponse<Value> = serde_json::from_value(v.clone())
        .map_err(|_| ClientError::Decode(format!("not a JSON-RPC response: {v}")))?;
    match answer.outcome {
        Outcome::Result(result) => Ok(result),
        Outcome::Error(e) => {
            // 1.0 names the reason in an ErrorInfo; 0.3 has only the code.
            let info = e
                .data
                .and_then(|d| serde_json::from_value::<Vec<ErrorInfo>>(d).ok())
                .and_then(|d| d.into_iter().next())
                .filter(|i| !i.reason.is_empty());
            let reason = match &info {
                Some(i) => i.reason.clone(),
                None => reason_of_code(Some(e.code)),
            };
            Err(ClientError::from_error_info(reason, e.message, info))
        }
    }
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
    let status_body = serde_json::from_value::<StatusBody>(body.clone()).ok();
    match status_body {
        Some(StatusBody { error }) if error.reason().is_some_and(|r| !r.is_empty()) => {
            let info = error.details.into_iter().next();
            let reason = info.as_ref().map(|i| i.reason.clone()).unwrap_or_default();
            ClientError::from_error_info(reason, error.message, info)
        }
        _ => ClientError::Http(status, body.to_string()),
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
