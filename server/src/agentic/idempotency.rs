//! `idempotency/v1` on HTTP+JSON and JSON-RPC: a SendMessage (or SendStreamingMessage)
//! that activates it is keyed on its message id and bound to the SHA-256 of its
//! JCS-canonical request without that id. The first request with a key runs and its
//! response (status, A2A headers, body; a stream's whole event text) is stored; a retry
//! with the same request within the TTL gets it back with `Idempotent-Replayed: true` and
//! runs nothing; one with another request is refused 422. The cache is a store table, so
//! it outlives the process and the nodes of a cluster share it. A response is stored
//! before its client has all of it (a stream: before its end), so no answer a client saw
//! can be lost to a crash; a request a crashed process was running lets go of its key
//! when that node starts again.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{ExtensionRefusal, IDEMPOTENCY_URI};
use crate::clock;
use crate::store::{IdempotencyClaim, Store};

/// The header a replayed response carries.
pub const REPLAYED: &str = "idempotent-replayed";

/// The response headers a replay repeats; the rest describe the connection, not the answer.
const KEPT_HEADERS: [&str; 3] = ["content-type", "a2a-extensions", "x-a2a-extensions"];

/// How long a retry waits for the first request with its key to finish.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(30);

/// How often expired entries are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(600);

#[derive(Clone)]
pub struct Cache {
    store: Store,
    ttl: Duration,
    /// The node requests run on here.
    node_id: String,
}

/// A request's key: its message id and the hash of the rest of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub message_id: String,
    pub hash: String,
}

/// What a request does once its key is looked up.
pub enum Begun {
    /// It runs; its response is recorded through the claim.
    Fresh(Claim),
    /// It gets the first response again.
    Replay(Response),
}

impl Cache {
    /// The cache of node `node_id`, with a sweep of expired entries every ten minutes; the
    /// requests a previous process of the node left unanswered let go of their keys.
    pub async fn start(store: Store, ttl: Duration, node_id: &str) -> anyhow::Result<Cache> {
        let released = store.idempotency().release_unanswered(node_id).await?;
        if released > 0 {
            tracing::info!(
                released,
                "idempotency keys of requests a previous process left unanswered"
            );
        }
        let cache = Cache {
            store,
            ttl,
            node_id: node_id.to_owned(),
        };
        let sweeper = cache.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            loop {
                every.tick().await;
                if let Err(e) = sweeper
                    .store
                    .idempotency()
                    .expire(sweeper.expired_before())
                    .await
                {
                    tracing::warn!(error = %e, "sweeping expired idempotency entries failed");
                }
            }
        });
        Ok(cache)
    }

    fn expired_before(&self) -> i64 {
        clock::now_ms() - i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// Looks the request's key up for `binding` (where its response is valid): a fresh
    /// claim, the replay of the first response, or a refusal (another request under the
    /// key; another binding's; the first still running past the wait).
    pub async fn begin(&self, key: Key, binding: &str) -> Result<Begun, ExtensionRefusal> {
        let deadline = tokio::time::Instant::now() + IN_FLIGHT_WAIT;
        loop {
            let claim = self
                .store
                .idempotency()
                .claim(
                    &key.message_id,
                    &key.hash,
                    (binding, &self.node_id),
                    clock::now_ms(),
                    self.expired_before(),
                )
                .await
                .map_err(internal)?;
            let held = match claim {
                IdempotencyClaim::Taken => {
                    return Ok(Begun::Fresh(Claim {
                        cache: self.clone(),
                        message_id: key.message_id,
                        recorded: false,
                    }));
                }
                IdempotencyClaim::Held(row) => row,
            };
            if held.request_hash != key.hash || held.binding != binding {
                return Err(reused(&key, &held.request_hash, &held.binding, binding));
            }
            if held.status != 0 {
                return Ok(Begun::Replay(replay(held.status, &held.headers, held.body)));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ExtensionRefusal {
                    http: 409,
                    jsonrpc: -32409,
                    jsonrpc_message: "Idempotent request still in progress",
                    reason: "IDEMPOTENCY_REQUEST_IN_PROGRESS",
                    detail: format!(
                        "the first request with messageId {} is still running",
                        key.message_id
                    ),
                    data: wire::to_json(RefusalData::of(
                        "IDEMPOTENCY_REQUEST_IN_PROGRESS",
                        &key.message_id,
                    )),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The key of a send's params (`{message, configuration?, metadata?}`): `None` when they
/// name no message id, which the binding then refuses. A message id that is no UUID is
/// refused (400): the extension keys only on ids with a UUID's entropy.
pub fn key(params: &Value) -> Result<Option<Key>, ExtensionRefusal> {
    let Some(message_id) = params.pointer("/message/messageId").and_then(Value::as_str) else {
        return Ok(None);
    };
    let uuid_shaped = message_id.len() == 36 && uuid::Uuid::try_parse(message_id).is_ok();
    if !uuid_shaped {
        return Err(ExtensionRefusal {
            http: 400,
            jsonrpc: -32602,
            jsonrpc_message: "Invalid params",
            reason: "INVALID_PARAMS",
            detail: format!(
                "messageId {message_id:?} is not a UUID (idempotency/v1 keys on UUIDs)"
            ),
            data: wire::to_json(RefusalData::of("INVALID_PARAMS", message_id)),
        });
    }
    let mut rest = params.clone();
    if let Some(message) = rest.get_mut("message").and_then(Value::as_object_mut) {
        message.remove("messageId");
    }
    let canonical = serde_jcs::to_vec(&rest).map_err(|e| internal(e.into()))?;
    let hash = Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Some(Key {
        message_id: message_id.to_owned(),
        hash,
    }))
}

fn reused(key: &Key, original: &str, first_binding: &str, binding: &str) -> ExtensionRefusal {
    let detail = if original == key.hash {
        format!(
            "messageId {} was first sent over {first_binding}, not {binding}",
            key.message_id
        )
    } else {
        format!(
            "messageId {} was sent before with a different request",
            key.message_id
        )
    };
    ExtensionRefusal {
        http: 422,
        jsonrpc: -32422,
        jsonrpc_message: "Idempotency key reused with different payload",
        reason: "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD",
        detail,
        data: wire::to_json(RefusalData {
            original_request_hash: Some(original),
            submitted_request_hash: Some(&key.hash),
            ..RefusalData::of(
                "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD",
                &key.message_id,
            )
        }),
    }
}

/// The `data` of an idempotency refusal: its code and key, and for a reused key both
/// request hashes.
#[derive(Serialize)]
struct RefusalData<'a> {
    code: &'static str,
    message_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    original_request_hash: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    submitted_request_hash: Option<&'a str>,
}

impl<'a> RefusalData<'a> {
    fn of(code: &'static str, message_id: &'a str) -> RefusalData<'a> {
        RefusalData {
            code,
            message_id,
            original_request_hash: None,
            submitted_request_hash: None,
        }
    }
}

fn internal(e: anyhow::Error) -> ExtensionRefusal {
    tracing::error!(error = %format!("{e:#}"), "the idempotency cache failed");
    ExtensionRefusal {
        http: 500,
        jsonrpc: -32603,
        jsonrpc_message: "Internal error",
        reason: "INTERNAL",
        detail: "internal error".into(),
        data: Value::Null,
    }
}

/// A stored response, as first sent, marked replayed.
fn replay(status: i64, headers: &str, body: Vec<u8>) -> Response {
    let status = u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, body).into_response();
    let stored: Map<String, Value> = serde_json::from_str(headers).unwrap_or_default();
    for (name, value) in stored {
        if let (Ok(name), Some(Ok(value))) = (
            HeaderName::try_from(name),
            value.as_str().map(HeaderValue::from_str),
        ) {
            resp.headers_mut().insert(name, value);
        }
    }
    resp.headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}

/// The request that took a key. Its response is recorded as it is sent; if it is dropped
/// with none, the key is let go.
pub struct Claim {
    cache: Cache,
    message_id: String,
    recorded: bool,
}

impl Claim {
    /// The response, recorded. A whole body is stored before it is sent. A stream's
    /// events go out as they come and are stored before the stream ends; one its client
    /// stops reading is stored as far as it went.
    pub async fn record(mut self, resp: Response) -> Response {
        self.recorded = true;
        let (parts, body) = resp.into_parts();
        let mut recorder = Recorder {
            store: self.cache.store.clone(),
            message_id: self.message_id.clone(),
            status: parts.status.as_u16(),
            headers: kept(&parts.headers),
            body: Vec::new(),
            stored: false,
        };
        let streamed = (parts.headers.get(header::CONTENT_TYPE))
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
        if !streamed {
            return match axum::body::to_bytes(body, usize::MAX).await {
                Ok(bytes) => {
                    recorder.body = bytes.to_vec();
                    recorder.store().await;
                    Response::from_parts(parts, Body::from(bytes))
                }
                Err(_) => Response::from_parts(parts, Body::empty()),
            };
        }
        let chunks = body.into_data_stream();
        let body = futures_util::stream::unfold(
            (chunks, recorder),
            |(mut chunks, mut recorder)| async move {
                match chunks.next().await {
                    Some(chunk) => {
                        if let Ok(bytes) = &chunk {
                            recorder.body.extend_from_slice(bytes);
                        }
                        Some((chunk, (chunks, recorder)))
                    }
                    None => {
                        recorder.store().await;
                        None
                    }
                }
            },
        );
        Response::from_parts(parts, Body::from_stream(body))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.recorded {
            let (store, id) = (self.cache.store.clone(), self.message_id.clone());
            tokio::spawn(async move {
                if let Err(e) = store.idempotency().release(&id).await {
                    tracing::warn!(error = %e, "letting go of an idempotency key failed");
                }
            });
        }
    }
}

fn kept(headers: &HeaderMap) -> String {
    let kept: Map<String, Value> = KEPT_HEADERS
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some(((*name).to_owned(), Value::from(value)))
        })
        .collect();
    Value::Object(kept).to_string()
}

/// A response being recorded: stored once (if it is dropped before, what it holds is
/// stored then).
struct Recorder {
    store: Store,
    message_id: String,
    status: u16,
    headers: String,
    body: Vec<u8>,
    stored: bool,
}

impl Recorder {
    async fn store(&mut self) {
        self.stored = true;
        let what = format!("recording the response to {}", self.message_id);
        let (id, status, headers, body) =
            (&self.message_id, self.status, &self.headers, &self.body);
        (self.store)
            .until_written(&what, || {
                self.store.idempotency().complete(id, status, headers, body)
            })
            .await;
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.stored {
            return;
        }
        let mut rest = Recorder {
            store: self.store.clone(),
            message_id: std::mem::take(&mut self.message_id),
            status: self.status,
            headers: std::mem::take(&mut self.headers),
            body: std::mem::take(&mut self.body),
            stored: false,
        };
        self.stored = true;
        tokio::spawn(async move { rest.store().await });
    }
}

/// Whether a request activated the extension.
pub fn activated(extensions: &[&'static str]) -> bool {
    extensions.contains(&IDEMPOTENCY_URI)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(message_id: &str, text: &str) -> Value {
        json!({ "message": { "messageId": message_id, "role": "ROLE_USER", "parts": [{ "text": text }] } })
    }

    #[test]
    fn the_key_is_the_message_id_and_the_hash_leaves_it_out_and_ignores_key_order() {
        let id = "0193e5a0-7c1d-7b2a-9f00-000000000001";
        let a = key(&params(id, "ls")).unwrap().unwrap();
        assert_eq!(a.message_id, id);
        assert_eq!(a.hash.len(), 64);
        let other_id = key(&params("0193e5a0-7c1d-7b2a-9f00-000000000002", "ls"))
            .unwrap()
            .unwrap();
        assert_eq!(a.hash, other_id.hash, "the id is outside the hash");
        let reordered: Value = serde_json::from_str(&format!(
            r#"{{"message":{{"parts":[{{"text":"ls"}}],"role":"ROLE_USER","messageId":"{id}"}}}}"#
        ))
        .unwrap();
        assert_eq!(key(&reordered).unwrap().unwrap().hash, a.hash);
        assert_ne!(key(&params(id, "ls -la")).unwrap().unwrap().hash, a.hash);
        let expected =
            Sha256::digest(br#"{"message":{"parts":[{"text":"ls"}],"role":"ROLE_USER"}}"#);
        let expected: String = expected.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(a.hash, expected);
    }

    #[test]
    fn a_message_id_that_is_no_uuid_is_refused_and_none_is_no_key() {
        let refused = key(&params("msg-1", "ls")).unwrap_err();
        assert_eq!((refused.http, refused.jsonrpc), (400, -32602));
        assert_eq!(key(&json!({ "message": {} })).unwrap(), None);
    }
}
