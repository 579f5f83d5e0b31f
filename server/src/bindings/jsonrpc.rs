//! The A2A 1.0 JSON-RPC binding at `B/jsonrpc`: JSON-RPC 2.0 over HTTP POST, PascalCase
//! methods, errors as JSON-RPC error objects whose `data` is an array of `@type` details.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use wire::a2a::{
    ListPushConfigsRequest, ListPushConfigsResponse, ListTasksRequest, PushConfigRequest,
    SendMessageRequest, TaskIdRequest, TaskPushNotificationConfig,
};
use wire::rpc::{JsonRpcError, JsonRpcResponse};

use crate::a2a::service::Sent;
use crate::a2a::service::{TaskService, TaskStream};
use crate::a2a::{A2aError, Version, Via, v03};
use crate::agentic::Surface;
use crate::agentic::idempotency;
use crate::auth::Principal;
use crate::extensions::Activation;
use crate::state::AppState;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::StreamExt;

pub async fn endpoint(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    body: Bytes,
) -> Response {
    if super::json_content_type(&headers) == Some(false) {
        let e = A2aError::ContentTypeNotSupported(
            "a JSON-RPC request is application/json (or application/a2a+json)".into(),
        );
        let id = crate::json::parse_unique(&body)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .filter(|id| matches!(id, Value::String(_) | Value::Number(_)))
            .unwrap_or(Value::Null);
        return reply(StatusCode::OK, &error_object(&id, &e));
    }
    let request = match crate::json::parse_unique(&body) {
        Ok(v) => v,
        Err(e) if e.is_data() => {
            let e = A2aError::InvalidRequest(format!("the request is ambiguous: {e}"));
            return reply(StatusCode::OK, &error_object(&Value::Null, &e));
        }
        Err(e) => return reply(StatusCode::OK, &parse_error(&e.to_string())),
    };
    let id = match request.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id.clone(),
        // A notification: JSON-RPC answers none, and no A2A method is one.
        None if request.is_object() => return StatusCode::NO_CONTENT.into_response(),
        Some(_) => {
            let e = A2aError::InvalidRequest("id must be a string, a number or null".into());
            return reply(StatusCode::OK, &error_object(&Value::Null, &e));
        }
        None => Value::Null,
    };
    let activation = match super::activate(&state.tasks, &headers, Surface::Http) {
        Ok(a) => a,
        Err(e) => return reply(StatusCode::OK, &error_object(&id, &e)),
    };
    let method = request.get("method").and_then(Value::as_str);
    if let Some(method) = method.filter(|m| SENDS.contains(m))
        && idempotency::activated(&activation.uris)
    {
        let binding = format!("JSON-RPC {method}");
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        let refuse = |e: A2aError| {
            let mut resp = failure(&id, &e);
            activation.echo(resp.headers_mut());
            resp
        };
        let query = uri.query().map(str::to_owned);
        let run = answer(
            state.clone(),
            headers,
            query,
            request,
            id.clone(),
            activation.clone(),
        );
        return super::idempotent(&state.tasks, &params, &binding, refuse, run).await;
    }
    answer(
        state,
        headers,
        uri.query().map(str::to_owned),
        request,
        id,
        activation,
    )
    .await
}

/// The methods `idempotency/v1` covers.
const SENDS: [&str; 4] = [
    "SendMessage",
    "SendStreamingMessage",
    "message/send",
    "message/stream",
];

/// The answer to one request, with the activated extensions echoed.
async fn answer(
    state: AppState,
    headers: HeaderMap,
    query: Option<String>,
    request: Value,
    id: Value,
    activation: Activation,
) -> Response {
    let handled = handle(
        &state,
        &headers,
        query.as_deref(),
        request,
        &activation.uris,
    )
    .await;
    let mut resp = match handled {
        Ok(Reply::Value(result)) => reply(StatusCode::OK, &JsonRpcResponse::result(id, result)),
        Ok(Reply::Stream(stream, version)) => sse(id, *stream, version),
        Err(e) => failure(&id, &e),
    };
    activation.echo(resp.headers_mut());
    resp
}

/// An error answer: HTTP 200 but for an unauthenticated caller (401) and an extension's
/// error, which carries its own HTTP status on JSON-RPC too.
fn failure(id: &Value, e: &A2aError) -> Response {
    let status = match e {
        A2aError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        A2aError::Extension(r) => StatusCode::from_u16(r.http).unwrap_or(StatusCode::BAD_REQUEST),
        _ => StatusCode::OK,
    };
    reply(status, &error_object(id, e))
}

/// A body over `limit`: 413 with a JSON-RPC error (-32600).
pub fn too_large(limit: usize) -> Response {
    let e = A2aError::RequestTooLarge(limit);
    reply(
        StatusCode::PAYLOAD_TOO_LARGE,
        &error_object(&Value::Null, &e),
    )
}

/// A method's answer: one result, or a stream of them in a protocol version's shapes.
pub enum Reply {
    Value(Value),
    Stream(Box<TaskStream>, Version),
}

/// Each event as a full JSON-RPC response in `data:`; a failure after the first event as
/// `event: error` with a JSON-RPC error response.
fn sse(id: Value, stream: TaskStream, version: Version) -> Response {
    let events = stream.into_events().map(move |item| {
        Ok::<_, std::convert::Infallible>(match item {
            Ok(event) => {
                let result = match version {
                    Version::V1 => wire::to_json(&event),
                    Version::V03 => v03::event(&event),
                };
                Event::default().data(encode(&JsonRpcResponse::result(id.clone(), result)))
            }
            Err(e) => Event::default()
                .event("error")
                .data(encode(&error_object(&id, &e))),
        })
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn handle(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
    request: Value,
    extensions: &[&'static str],
) -> Result<Reply, A2aError> {
    if request.is_array() {
        return Err(A2aError::InvalidRequest(
            "batch requests are not supported".into(),
        ));
    }
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(A2aError::InvalidRequest("jsonrpc must be \"2.0\"".into()));
    }
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return Err(A2aError::InvalidRequest("method must be a string".into()));
    };
    let version = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or("");
    // 0.3 methods have slashes and no (or a 0.x) A2A-Version; 1.0 methods need 1.x.
    let legacy = method.contains('/');
    let speaks = if legacy { Version::V03 } else { Version::V1 };
    if !speaks.accepts(version) {
        let wanted = if legacy {
            "no A2A-Version (or 0.3)"
        } else {
            "A2A-Version: 1.0"
        };
        return Err(A2aError::VersionNotSupported(format!(
            "{method} needs {wanted}"
        )));
    }
    let who = crate::state::caller(state, query, headers).await?;
    let params = (request.get("params").cloned()).unwrap_or_else(|| Value::Object(Map::new()));
    let reply = if legacy {
        v03_method(state, &who, method, params, extensions).await?
    } else {
        call(&state.tasks, &who, method, params, extensions).await?
    };
    Ok(match reply {
        Reply::Stream(stream, version) => {
            let lease = state.revocations.lease(&who, "sse", None);
            Reply::Stream(Box::new(stream.cut_by(lease)), version)
        }
        value => value,
    })
}

/// An A2A 1.0 method on the task service: the JSON-RPC binding's and the STDIO binding's.
pub async fn call(
    tasks: &TaskService,
    who: &Principal,
    method: &str,
    params: Value,
    extensions: &[&'static str],
) -> Result<Reply, A2aError> {
    let who = who.clone();
    let via = Via {
        version: Version::V1,
        extensions,
    };
    Ok(Reply::Value(match method {
        "SendMessage" => wire::to_json(
            &tasks
                .send(&who, parse::<SendMessageRequest>(method, params)?, via)
                .await?,
        ),
        "GetTask" => {
            let p = parse::<TaskIdRequest>(method, params)?;
            wire::to_json(&tasks.get(&who, &p.id, p.history_length).await?)
        }
        "CancelTask" => {
            let p = parse::<TaskIdRequest>(method, params)?;
            wire::to_json(&tasks.cancel(&who, &p.id).await?)
        }
        "ListTasks" => wire::to_json(
            &tasks
                .list(&who, parse::<ListTasksRequest>(method, params)?)
                .await?,
        ),
        "SendStreamingMessage" => {
            let req = parse::<SendMessageRequest>(method, params)?;
            return Ok(Reply::Stream(
                Box::new(tasks.send_stream(&who, req, via).await?),
                Version::V1,
            ));
        }
        "SubscribeToTask" => {
            let p = parse::<TaskIdRequest>(method, params)?;
            return Ok(Reply::Stream(
                Box::new(tasks.subscribe(&who, &p.id).await?),
                Version::V1,
            ));
        }
        "CreateTaskPushNotificationConfig" => {
            let config = parse::<TaskPushNotificationConfig>(method, params)?;
            let task_id = config.task_id.clone();
            if task_id.is_empty() {
                return Err(A2aError::InvalidParams(format!(
                    "{method}: taskId is required"
                )));
            }
            wire::to_json(
                &tasks
                    .create_push(&who, Version::V1, &task_id, config)
                    .await?,
            )
        }
        "GetTaskPushNotificationConfig" => {
            let p = parse::<PushConfigRequest>(method, params)?;
            wire::to_json(&tasks.get_push(&who, &p.task_id, &p.id).await?)
        }
        "ListTaskPushNotificationConfigs" => {
            let p = parse::<ListPushConfigsRequest>(method, params)?;
            let (configs, next_page_token) = tasks
                .list_push(&who, &p.task_id, p.page_size, p.page_token.as_deref())
                .await?;
            wire::to_json(&ListPushConfigsResponse {
                configs,
                next_page_token,
            })
        }
        "DeleteTaskPushNotificationConfig" => {
            let p = parse::<PushConfigRequest>(method, params)?;
            tasks.delete_push(&who, &p.task_id, &p.id).await?;
            Value::Null
        }
        "GetExtendedAgentCard" => {
            return Err(A2aError::UnsupportedOperation(
                "this agent has no extended card (capabilities.extendedAgentCard is false)".into(),
            ));
        }
        other => return Err(A2aError::MethodNotFound(format!("no method {other:?}"))),
    }))
}

/// The A2A 0.3 methods: the same service, 0.3 shapes in and out (results unwrapped).
async fn v03_method(
    state: &AppState,
    who: &Principal,
    method: &str,
    params: Value,
    extensions: &[&'static str],
) -> Result<Reply, A2aError> {
    let tasks = &state.tasks;
    let via = Via {
        version: Version::V03,
        extensions,
    };
    Ok(Reply::Value(match method {
        "message/send" => match tasks.send(who, v03::send_params(&params)?, via).await? {
            Sent::Task(t) => v03::task(&t),
            Sent::Message(m) => v03::message(&m),
        },
        "message/stream" => {
            let stream = tasks
                .send_stream(who, v03::send_params(&params)?, via)
                .await?;
            return Ok(Reply::Stream(Box::new(stream), Version::V03));
        }
        "tasks/get" => {
            let p = parse::<TaskIdRequest>(method, params)?;
            v03::task(&tasks.get(who, &p.id, p.history_length).await?)
        }
        "tasks/cancel" => {
            let p = parse::<TaskIdRequest>(method, params)?;
            v03::task(&tasks.cancel(who, &p.id).await?)
        }
        "tasks/resubscribe" => {
            let p = parse::<TaskIdRequest>(method, params)?;
            let stream = tasks.subscribe(who, &p.id).await?;
            return Ok(Reply::Stream(Box::new(stream), Version::V03));
        }
        "tasks/pushNotificationConfig/set" => {
            let task_id = str_param(&params, "taskId")?;
            let config =
                v03::push_config_in(params.get("pushNotificationConfig").ok_or_else(|| {
                    A2aError::InvalidParams("params.pushNotificationConfig is required".into())
                })?)?;
            v03::task_push_config(
                &tasks
                    .create_push(who, Version::V03, task_id, config)
                    .await?,
            )
        }
        "tasks/pushNotificationConfig/get" => {
            let task_id = str_param(&params, "id")?;
            let config = match params
                .get("pushNotificationConfigId")
                .and_then(Value::as_str)
            {
                Some(id) => tasks.get_push(who, task_id, id).await?,
                // 0.3 clients that know one config per task ask without an id.
                None => tasks
                    .list_push(who, task_id, Some(1), None)
                    .await?
                    .0
                    .into_iter()
                    .next()
                    .ok_or_else(|| A2aError::PushConfigNotFound {
                        task: task_id.to_owned(),
                        config: "(any)".into(),
                    })?,
            };
            v03::task_push_config(&config)
        }
        "tasks/pushNotificationConfig/list" => {
            let task_id = str_param(&params, "id")?;
            let (configs, _) = tasks.list_push(who, task_id, Some(100), None).await?;
            Value::Array(configs.iter().map(v03::task_push_config).collect())
        }
        "tasks/pushNotificationConfig/delete" => {
            let task_id = str_param(&params, "id")?;
            let id = str_param(&params, "pushNotificationConfigId")?;
            tasks.delete_push(who, task_id, id).await?;
            Value::Null
        }
        "agent/getAuthenticatedExtendedCard" => return Err(A2aError::ExtendedCardNotConfigured),
        other => return Err(A2aError::MethodNotFound(format!("no method {other:?}"))),
    }))
}

fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, A2aError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| A2aError::InvalidParams(format!("params.{key} is required")))
}

fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, A2aError> {
    serde_json::from_value(params).map_err(|e| A2aError::InvalidParams(format!("{method}: {e}")))
}

/// A JSON-RPC error response.
pub fn error_object(id: &Value, e: &A2aError) -> JsonRpcResponse<Value> {
    JsonRpcResponse::error(id.clone(), e.jsonrpc_error())
}

fn parse_error(detail: &str) -> JsonRpcResponse<Value> {
    JsonRpcResponse::error(
        Value::Null,
        JsonRpcError {
            code: -32700,
            message: format!("parse error: {detail}"),
            data: None,
        },
    )
}

fn encode<T: Serialize>(body: &T) -> String {
    serde_json::to_string(body).unwrap_or_default()
}

fn reply<T: Serialize>(status: StatusCode, body: &T) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        encode(body),
    )
        .into_response()
}
