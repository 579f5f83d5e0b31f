//! `ptyhost a2a watch`: follows a task through both of its channels at once — a push config
//! registered with a local webhook receiver, and the SSE subscription — and puts their
//! events through one reconciler, which drops duplicates, keeps status order and applies
//! the terminal transition exactly once. Deliveries are verified over the raw body before
//! they are parsed.

use std::collections::HashSet;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use tokio::sync::mpsc;

use crate::a2a::{Version, v03};

/// How old a delivery's timestamp may be.
const MAX_SKEW_SECS: i64 = 300;

/// Checks a delivery's signature (`webhook-signature` over `{id}.{timestamp}.{body}`,
/// HMAC-SHA256 keyed by the config token) and the freshness of its timestamp.
pub fn verify(token: &str, headers: &HeaderMap, body: &[u8], now_secs: i64) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(id), Some(ts), Some(sig)) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    ) else {
        return false;
    };
    let Ok(at) = ts.parse::<i64>() else {
        return false;
    };
    if (now_secs - at).abs() > MAX_SKEW_SECS {
        return false;
    }
    let Some(Ok(sig)) = sig
        .strip_prefix("v1,")
        .map(|s| base64::engine::general_purpose::STANDARD.decode(s))
    else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(token.as_bytes()) else {
        return false;
    };
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// One event from either channel, as 1.0 StreamResponse JSON.
#[derive(Debug)]
pub struct Seen {
    /// A push delivery's (config, protocol version, event id); none for SSE.
    pub delivery: Option<(String, &'static str, String)>,
    pub event: Value,
}

/// Orders and deduplicates a task's events from push and SSE.
#[derive(Default)]
pub struct Reconciler {
    deliveries: HashSet<(String, &'static str, String)>,
    contents: HashSet<String>,
    last_status_at: Option<String>,
    done: bool,
}

impl Reconciler {
    /// The event to act on, if it is new and in order; `None` for a duplicate, a stale
    /// status, or anything after the terminal transition.
    pub fn apply(&mut self, seen: Seen) -> Option<Value> {
        if self.done {
            return None;
        }
        if let Some(key) = seen.delivery
            && !self.deliveries.insert(key)
        {
            return None;
        }
        // The same event may come both ways: its content identifies it.
        if !self.contents.insert(seen.event.to_string()) {
            return None;
        }
        let status = seen
            .event
            .get("statusUpdate")
            .map(|u| &u["status"])
            .or_else(|| seen.event.get("task").map(|t| &t["status"]));
        if let Some(status) = status {
            let at = status["timestamp"].as_str().map(str::to_owned);
            if let (Some(last), Some(at)) = (&self.last_status_at, &at)
                && at < last
            {
                return None;
            }
            if at.is_some() {
                self.last_status_at = at;
            }
            let state = status["state"].as_str().unwrap_or("");
            self.done = matches!(
                state,
                "TASK_STATE_COMPLETED"
                    | "TASK_STATE_FAILED"
                    | "TASK_STATE_CANCELED"
                    | "TASK_STATE_REJECTED"
            );
        }
        Some(seen.event)
    }

    pub fn finished(&self) -> bool {
        self.done
    }
}

/// The receiver's state: the token to verify with, and where verified events go.
#[derive(Clone)]
struct Receiver {
    token: String,
    config_id: String,
    events: mpsc::UnboundedSender<Seen>,
}

async fn take(
    axum::extract::State(r): axum::extract::State<Receiver>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    if !verify(&r.token, &headers, &body, crate::clock::now_ms() / 1000) {
        tracing::warn!("a webhook delivery failed verification; dropped unparsed");
        return StatusCode::UNAUTHORIZED;
    }
    let version = if headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/a2a+json"))
    {
        Version::V1
    } else {
        Version::V03
    };
    let Ok(raw) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let event = match version {
        Version::V1 => raw,
        // A 0.3 delivery is the task itself.
        Version::V03 => match v03::event_in(raw, false).map(serde_json::to_value) {
            Ok(Ok(v)) => v,
            _ => return StatusCode::BAD_REQUEST,
        },
    };
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let _ = r.events.send(Seen {
        delivery: Some((r.config_id.clone(), version.label(), id)),
        event,
    });
    StatusCode::OK
}

/// Serves the webhook on `listener` until `events` is dropped.
pub fn serve(
    listener: tokio::net::TcpListener,
    token: String,
    config_id: String,
    events: mpsc::UnboundedSender<Seen>,
) {
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(take))
        .with_state(Receiver {
            token,
            config_id,
            events,
        });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the webhook receiver stopped");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn signed(token: &str, id: &str, ts: i64, body: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("webhook-id", id.parse().unwrap());
        h.insert("webhook-timestamp", ts.to_string().parse().unwrap());
        let sig = crate::a2a::push::signature(token, id, ts, body);
        h.insert("webhook-signature", sig.parse().unwrap());
        h
    }

    #[test]
    fn deliveries_are_verified_over_the_raw_body_and_their_age() {
        let body = br#"{"statusUpdate":{}}"#;
        let h = signed("tok", "e1", 1000, body);
        assert!(verify("tok", &h, body, 1000));
        assert!(!verify("other", &h, body, 1000), "another key");
        assert!(
            !verify("tok", &h, br#"{"statusUpdate":{} }"#, 1000),
            "another body"
        );
        assert!(
            !verify("tok", &h, body, 1000 + MAX_SKEW_SECS + 1),
            "too old"
        );
        assert!(!verify("tok", &HeaderMap::new(), body, 1000));
    }

    #[test]
    fn the_reconciler_drops_duplicates_and_stale_states_and_ends_once() {
        let status = |state: &str, at: &str| json!({ "statusUpdate": { "status": { "state": state, "timestamp": at } } });
        let mut r = Reconciler::default();
        let push = |id: &str, v: Value, version: &'static str| Seen {
            delivery: Some(("c".into(), version, id.into())),
            event: v,
        };
        assert!(
            r.apply(push(
                "1",
                status("TASK_STATE_WORKING", "2026-01-01T00:00:01Z"),
                "1.0"
            ))
            .is_some()
        );
        // The same event again by SSE, then by a retried push: dropped.
        assert!(
            r.apply(Seen {
                delivery: None,
                event: status("TASK_STATE_WORKING", "2026-01-01T00:00:01Z")
            })
            .is_none()
        );
        assert!(r.apply(push("1", json!({ "other": 1 }), "1.0")).is_none());
        // The same id from the other protocol version is another delivery.
        assert!(
            r.apply(push("1", json!({ "artifactUpdate": { "n": 1 } }), "0.3"))
                .is_some()
        );
        assert!(
            r.apply(push(
                "2",
                status("TASK_STATE_SUBMITTED", "2026-01-01T00:00:00Z"),
                "1.0"
            ))
            .is_none(),
            "stale"
        );
        assert!(
            r.apply(push(
                "3",
                status("TASK_STATE_COMPLETED", "2026-01-01T00:00:02Z"),
                "1.0"
            ))
            .is_some()
        );
        assert!(r.finished());
        assert!(
            r.apply(push(
                "4",
                status("TASK_STATE_FAILED", "2026-01-01T00:00:03Z"),
                "1.0"
            ))
            .is_none(),
            "one terminal transition"
        );
    }
}
