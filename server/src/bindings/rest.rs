//! The A2A 1.0 HTTP+JSON binding: routes, `A2A-Version` negotiation, content types, and
//! errors as google.rpc.Status with an ErrorInfo. Business logic lives in the task service.

use std::collections::HashMap;
use std::convert::Infallible;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wire::a2a::{ListTasksRequest, SendMessageRequest};

use crate::a2a::service::Sent;
use crate::a2a::service::TaskStream;
use crate::a2a::{A2aError, Version, Via, v03};
use crate::agentic::Surface;
use crate::auth::Principal;
use crate::extensions;
use crate::state::AppState;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::StreamExt;
use wire::a2a::{ListPushConfigsResponse, StreamResponse, Task, TaskPushNotificationConfig};
use wire::server::Done;

use super::{A2A_JSON, JSON};

/// The 1.0 routes at the base, and the same operations in 0.3 shapes under `/v1`.
pub fn routes(state: &AppState) -> Router<AppState> {
    let v03 = operations(state)
        .route("/card", get(extended_card))
        .route_layer(middleware::from_fn_with_state(
            (Version::V03, state.clone()),
            negotiate,
        ));
    operations(state)
        .route_layer(middleware::from_fn_with_state(
            (Version::V1, state.clone()),
            negotiate,
        ))
        .nest("/v1", v03)
}

fn operations(state: &AppState) -> Router<AppState> {
    let idempotent = || middleware::from_fn_with_state(state.clone(), idempotent);
    Router::new()
        .route("/message:send", post(send_message).layer(idempotent()))
        .route("/message:stream", post(stream_message).layer(idempotent()))
        .route("/tasks", get(list_tasks))
        .route("/tasks/{task}", get(get_task).post(task_action))
        .route(
            "/tasks/{task}/pushNotificationConfigs",
            get(list_push).post(create_push),
        )
        .route(
            "/tasks/{task}/pushNotificationConfigs/{config}",
            get(get_push).delete(delete_push),
        )
        .route("/extendedAgentCard", get(extended_card))
}

/// How the caller speaks: the media type (the response mirrors it) and the A2A version
/// whose shapes the answer takes.
#[derive(Debug, Clone, Copy)]
struct Media {
    content_type: &'static str,
    version: Version,
}

impl Media {
    fn via(self, activation: &extensions::Activation) -> Via<'_> {
        Via {
            version: self.version,
            extensions: &activation.uris,
        }
    }
}

/// Checks `A2A-Version` (1.0 routes need 1.x; missing means 0.3) and the request's
/// content type, then stamps the response with the caller's media type and `Vary`.
async fn negotiate(
    State((version, state)): State<(Version, AppState)>,
    mut req: Request,
    next: Next,
) -> Response {
    let headers = req.headers();
    let media = Media {
        content_type: pick_media(headers),
        version,
    };
    let asked = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or("");
    let refusal = if !version.accepts(asked) {
        let shown = if asked.is_empty() {
            "none (that means 0.3)"
        } else {
            asked
        };
        let route = match version {
            Version::V1 => "this route speaks A2A 1.0 (send A2A-Version: 1.0)",
            Version::V03 => "this route speaks A2A 0.3 (send no A2A-Version)",
        };
        Some(A2aError::VersionNotSupported(format!(
            "A2A-Version {shown} is not served here: {route}"
        )))
    } else if req.method() == axum::http::Method::POST && !content_type_ok(headers) {
        Some(A2aError::ContentTypeNotSupported(
            "send application/a2a+json or application/json".into(),
        ))
    } else {
        None
    };
    let activated = match refusal {
        Some(e) => Err(e),
        None => super::activate(&state.tasks, headers, Surface::Http),
    };
    let mut resp = match activated {
        Err(e) => error_response(&e, media),
        Ok(activation) => {
            req.extensions_mut().insert(media);
            req.extensions_mut().insert(activation.clone());
            let mut resp = next.run(req).await;
            activation.echo(resp.headers_mut());
            resp
        }
    };
    resp.headers_mut().insert(
        header::VARY,
        HeaderValue::from_static("A2A-Version, Accept"),
    );
    resp
}

fn pick_media(headers: &HeaderMap) -> &'static str {
    let has = |name: header::HeaderName, what: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains(what))
    };
    if has(header::CONTENT_TYPE, A2A_JSON)
        || (!has(header::CONTENT_TYPE, JSON) && has(header::ACCEPT, A2A_JSON))
    {
        A2A_JSON
    } else {
        JSON
    }
}

/// A JSON media type, or no body at all (clients post `:cancel` and `:subscribe` bare).
fn content_type_ok(headers: &HeaderMap) -> bool {
    match super::json_content_type(headers) {
        Some(json) => json,
        None => {
            !headers.contains_key(header::TRANSFER_ENCODING)
                && headers
                    .get(header::CONTENT_LENGTH)
                    .is_none_or(|n| n.as_bytes() == b"0")
        }
    }
}

fn respond<B: Serialize>(media: Media, status: axum::http::StatusCode, body: &B) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(media.content_type),
        )],
        serde_json::to_string(body).unwrap_or_default(),
    )
        .into_response()
}

fn ok<B: Serialize>(media: Media, body: &B) -> Response {
    respond(media, axum::http::StatusCode::OK, body)
}

fn error_response(e: &A2aError, media: Media) -> Response {
    let status = axum::http::StatusCode::from_u16(e.http().0)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    match media.version {
        Version::V1 => respond(media, status, &e.status_body()),
        Version::V03 => respond(media, status, &e.v03_rest_body()),
    }
}

/// `idempotency/v1` around a send that activates it (see `super::idempotent`); any other
/// request goes straight on.
async fn idempotent(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let activated = req
        .extensions()
        .get::<extensions::Activation>()
        .is_some_and(|a| crate::agentic::idempotency::activated(&a.uris));
    let media = req.extensions().get::<Media>().copied();
    let Some(media) = media.filter(|_| activated) else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    // The router's body limit holds the body to its size.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        let e = A2aError::InvalidRequest("the request body could not be read".into());
        return error_response(&e, media);
    };
    let binding = format!("HTTP+JSON {} {}", media.version.label(), parts.uri.path());
    let params = crate::json::parse_unique(&bytes);
    let req = Request::from_parts(parts, axum::body::Body::from(bytes));
    // A body that is no JSON is the handler's to refuse.
    let Ok(params) = params else {
        return next.run(req).await;
    };
    let refuse = |e: A2aError| error_response(&e, media);
    super::idempotent(&state.tasks, &params, &binding, refuse, next.run(req)).await
}

/// A body over `limit`: 413 with a google.rpc.Status.
pub fn too_large(limit: usize) -> Response {
    let status = axum::http::StatusCode::PAYLOAD_TOO_LARGE;
    (
        status,
        axum::Json(A2aError::RequestTooLarge(limit).status_body()),
    )
        .into_response()
}

/// The caller of an A2A route: its principal, or the A2A error that refuses it (a token in
/// the URL query, or no valid bearer). A handler answers that error in its caller's media
/// type where the operation calls for it, so checks that come first still do.
pub struct Caller(Result<Principal, A2aError>);

impl FromRequestParts<AppState> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        let who = crate::state::caller(state, parts.uri.query(), &parts.headers).await;
        Ok(Caller(who.map_err(A2aError::from)))
    }
}

/// The JSON answer, or the error as google.rpc.Status.
fn answer<B: Serialize>(media: Media, result: Result<B, A2aError>) -> Response {
    match result {
        Ok(v) => ok(media, &v),
        Err(e) => error_response(&e, media),
    }
}

/// The stream as server-sent events, or (before any event) the error as google.rpc.Status.
fn streamed(media: Media, started: Result<TaskStream, A2aError>) -> Response {
    match started {
        Ok(stream) => sse(media, stream),
        Err(e) => error_response(&e, media),
    }
}

/// The caller and the SendMessageRequest of a send or stream call.
fn sender(
    caller: Caller,
    media: Media,
    body: &[u8],
) -> Result<(Principal, SendMessageRequest), A2aError> {
    let who = caller.0?;
    let malformed =
        |e: serde_json::Error| A2aError::InvalidRequest(format!("SendMessageRequest: {e}"));
    let req = match media.version {
        Version::V1 => serde_json::from_slice(body).map_err(malformed)?,
        Version::V03 => v03::rest::send_request(&serde_json::from_slice(body).map_err(malformed)?)?,
    };
    Ok((who, req))
}

/// A task in the caller's version.
fn task_json(media: Media, task: &Task) -> Value {
    match media.version {
        Version::V1 => wire::to_json(task),
        Version::V03 => v03::rest::task(task),
    }
}

async fn send_message(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    axum::Extension(activation): axum::Extension<extensions::Activation>,
    caller: Caller,
    body: Bytes,
) -> Response {
    let result = async {
        let (who, req) = sender(caller, media, &body)?;
        Ok::<_, A2aError>(
            match (
                media.version,
                state.tasks.send(&who, req, media.via(&activation)).await?,
            ) {
                (Version::V1, sent) => wire::to_json(&sent),
                (Version::V03, Sent::Task(t)) => v03::rest::event(&StreamResponse::Task(t)),
                (Version::V03, Sent::Message(m)) => v03::rest::event(&StreamResponse::Message(m)),
            },
        )
    }
    .await;
    answer(media, result)
}

#[derive(Debug, Deserialize)]
pub struct TaskPath {
    task: String,
}

async fn get_task(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    Path(TaskPath { task }): Path<TaskPath>,
    Query(q): Query<HashMap<String, String>>,
    caller: Caller,
) -> Response {
    if let Some(id) = task.strip_suffix(":subscribe") {
        return subscribe(&state, media, caller, id).await;
    }
    let result = async {
        let who = caller.0?;
        let history = number(&q, "historyLength")?;
        let task = state.tasks.get(&who, &task, history).await?;
        Ok::<_, A2aError>(task_json(media, &task))
    }
    .await;
    answer(media, result)
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`.
async fn task_action(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    Path(TaskPath { task }): Path<TaskPath>,
    caller: Caller,
) -> Response {
    if let Some(id) = task.strip_suffix(":subscribe") {
        return subscribe(&state, media, caller, id).await;
    }
    let result = async {
        let who = caller.0?;
        match task.rsplit_once(':') {
            Some((id, "cancel")) => Ok(task_json(media, &state.tasks.cancel(&who, id).await?)),
            _ => Err(A2aError::MethodNotFound(format!(
                "no operation POST /tasks/{task}"
            ))),
        }
    }
    .await;
    answer(media, result)
}

async fn list_tasks(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    Query(q): Query<HashMap<String, String>>,
    caller: Caller,
) -> Response {
    let result = async {
        if media.version == Version::V03 {
            return Err(A2aError::UnsupportedOperation(
                "ListTasks is not part of the A2A 0.3 REST binding; use the 1.0 routes".into(),
            ));
        }
        let who = caller.0?;
        let query = list_request(&q)?;
        let page = state.tasks.list(&who, query).await?;
        Ok::<_, A2aError>(page)
    }
    .await;
    answer(media, result)
}

/// ListTasks from query parameters: the request's own field names, typed as in JSON.
fn list_request(q: &HashMap<String, String>) -> Result<ListTasksRequest, A2aError> {
    let mut fields = serde_json::Map::new();
    for (name, value) in q {
        let typed = match name.as_str() {
            "pageSize" | "historyLength" => Value::from(number(q, name)?),
            "includeArtifacts" => match value.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                other => {
                    return Err(A2aError::InvalidParams(format!(
                        "includeArtifacts {other:?} is not true or false"
                    )));
                }
            },
            _ => Value::String(value.clone()),
        };
        fields.insert(name.clone(), typed);
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| A2aError::InvalidParams(format!("ListTasks: {e}")))
}

fn number(q: &HashMap<String, String>, name: &str) -> Result<Option<u32>, A2aError> {
    q.get(name)
        .map(|v| {
            v.parse::<u32>().map_err(|_| {
                A2aError::InvalidParams(format!("{name} {v:?} is not a non-negative integer"))
            })
        })
        .transpose()
}

/// Server-sent events: each StreamResponse as `data:`; a failure after the first event as
/// `event: error` with a google.rpc.Status.
fn sse(media: Media, stream: TaskStream) -> Response {
    let events = stream.into_events().map(move |item| {
        Ok::<_, std::convert::Infallible>(match item {
            Ok(event) => {
                let data = match media.version {
                    Version::V1 => wire::to_json(&event),
                    Version::V03 => v03::rest::event(&event),
                };
                Event::default().data(data.to_string())
            }
            Err(e) => Event::default()
                .event("error")
                .data(serde_json::to_string(&e.status_body()).unwrap_or_default()),
        })
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn stream_message(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    axum::Extension(activation): axum::Extension<extensions::Activation>,
    caller: Caller,
    body: Bytes,
) -> Response {
    let started = async {
        let (who, req) = sender(caller, media, &body)?;
        let stream = (state.tasks)
            .send_stream(&who, req, media.via(&activation))
            .await?;
        Ok(stream.cut_by(state.revocations.lease(&who, "sse", None)))
    }
    .await;
    streamed(media, started)
}

/// `GET|POST /tasks/{id}:subscribe`: errors before the first event are plain responses.
async fn subscribe(state: &AppState, media: Media, caller: Caller, id: &str) -> Response {
    let started = async {
        let who = caller.0?;
        let stream = state.tasks.subscribe(&who, id).await?;
        Ok(stream.cut_by(state.revocations.lease(&who, "sse", None)))
    }
    .await;
    streamed(media, started)
}

/// A push config in the caller's version.
fn push_json(media: Media, config: &TaskPushNotificationConfig) -> Value {
    match media.version {
        Version::V1 => wire::to_json(config),
        Version::V03 => v03::rest::push_config(config),
    }
}

async fn create_push(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    Path(TaskPath { task }): Path<TaskPath>,
    caller: Caller,
    body: Bytes,
) -> Response {
    let result = async {
        let who = caller.0?;
        let malformed = |e: serde_json::Error| {
            A2aError::InvalidRequest(format!("TaskPushNotificationConfig: {e}"))
        };
        let config = match media.version {
            Version::V1 => serde_json::from_slice(&body).map_err(malformed)?,
            Version::V03 => {
                v03::rest::create_push_request(&serde_json::from_slice(&body).map_err(malformed)?)?
            }
        };
        let stored = state
            .tasks
            .create_push(&who, media.version, &task, config)
            .await?;
        Ok::<_, A2aError>(push_json(media, &stored))
    }
    .await;
    answer(media, result)
}

#[derive(Debug, Deserialize)]
pub struct PushPath {
    task: String,
    config: String,
}

async fn get_push(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    Path(PushPath { task, config }): Path<PushPath>,
    caller: Caller,
) -> Response {
    let result = async {
        let who = caller.0?;
        let config = state.tasks.get_push(&who, &task, &config).await?;
        Ok::<_, A2aError>(push_json(media, &config))
    }
    .await;
    answer(media, result)
}

async fn list_push(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    Path(TaskPath { task }): Path<TaskPath>,
    Query(q): Query<HashMap<String, String>>,
    caller: Caller,
) -> Response {
    let result = async {
        let who = caller.0?;
        let page_size = number(&q, "pageSize")?;
        let (configs, next) = state
            .tasks
            .list_push(
                &who,
                &task,
                page_size,
                q.get("pageToken").map(String::as_str),
            )
            .await?;
        Ok::<_, A2aError>(ListPushConfigsResponse {
            configs: configs.iter().map(|c| push_json(media, c)).collect(),
            next_page_token: next,
        })
    }
    .await;
    answer(media, result)
}

async fn delete_push(
    State(state): State<AppState>,
    axum::Extension(media): axum::Extension<Media>,
    Path(PushPath { task, config }): Path<PushPath>,
    caller: Caller,
) -> Response {
    let result = async {
        let who = caller.0?;
        state.tasks.delete_push(&who, &task, &config).await?;
        Ok::<_, A2aError>(Done {})
    }
    .await;
    answer(media, result)
}

async fn extended_card(axum::Extension(media): axum::Extension<Media>) -> Response {
    error_response(
        &A2aError::UnsupportedOperation(
            "this agent has no extended card (capabilities.extendedAgentCard is false)".into(),
        ),
        media,
    )
}
