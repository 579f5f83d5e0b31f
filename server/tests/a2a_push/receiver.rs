//! A webhook receiver on a loopback port that keeps every request it takes and answers
//! the first few with 500.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::common::{StreamResponse, WAIT, event_of};

/// One request the receiver took: its headers and raw body.
#[derive(Debug, Clone)]
pub struct Delivery {
    headers: HeaderMap,
    pub body: Bytes,
}

impl Delivery {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// A 1.0 delivery: one stream event.
    pub fn event(&self) -> StreamResponse {
        event_of(&self.json())
    }

    /// Checks the signature over the raw body, as a receiver must before parsing it.
    pub fn signed_by(&self, token: &str) -> bool {
        let mut mac = Hmac::<Sha256>::new_from_slice(token.as_bytes()).unwrap();
        mac.update(
            format!(
                "{}.{}.",
                self.header("webhook-id"),
                self.header("webhook-timestamp")
            )
            .as_bytes(),
        );
        mac.update(&self.body);
        let Some(sig) = self.header("webhook-signature").strip_prefix("v1,") else {
            return false;
        };
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(sig) else {
            return false;
        };
        mac.verify_slice(&sig).is_ok()
    }
}

#[derive(Clone, Default)]
pub struct Receiver {
    seen: Arc<Mutex<Vec<Delivery>>>,
    /// Requests still to be answered 500 before the receiver accepts.
    failures: Arc<Mutex<u32>>,
}

impl Receiver {
    pub async fn start(failures: u32) -> (Receiver, String) {
        let r = Receiver::default();
        *r.failures.lock().unwrap() = failures;
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(take))
            .with_state(r.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (r, url)
    }

    pub fn seen(&self) -> Vec<Delivery> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until the deliveries so far satisfy `done`; returns them.
    pub async fn until(&self, done: impl Fn(&[Delivery]) -> bool) -> Vec<Delivery> {
        tokio::time::timeout(WAIT * 2, async {
            loop {
                let seen = self.seen();
                if done(&seen) {
                    return seen;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no such delivery; saw {:?}", self.seen()))
    }
}

async fn take(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    r.seen.lock().unwrap().push(Delivery { headers, body });
    let mut failures = r.failures.lock().unwrap();
    if *failures > 0 {
        *failures -= 1;
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    StatusCode::OK
}
