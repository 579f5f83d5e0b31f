//! The A202 commercial extension against the real server: the declaration in the card and
//! the preflight document, objects over the A2A carrier (raw parts, activation, the
//! transaction in the extension payload) and over plain HTTPS (202 / 409 / 412 / insecure
//! endpoint), the A202-0001 fixture cases through `ptyhost a202 check`, and the runtime
//! case: a carrier task that fails or is canceled changes nothing commercial.
//!
//! Raw JSON on purpose: these tests pin A202's signed objects, which the tests tamper with
//! member by member as the specs write them, apart from the `wire` types the server encodes
//! with.

#[path = "../common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};
use server::a202::keys::Algorithm;
use server::a202::seal::{Signer, seal};

mod https_and_client;
mod objects;

const URI: &str = "https://schemas.a202.org/a2a-ext/commercial/0.1";
const MEDIA: &str = "application/a202-commercial+json";
const OFFER: &str = include_str!("../fixtures/a202/offer.json");

/// A server that trusts one ES256 key, and that key.
struct Market {
    s: TestServer,
    signer: Signer,
    _keys: tempfile::TempDir,
}

impl Market {
    async fn open(args: &[&str]) -> Market {
        let keys = tempfile::tempdir().unwrap();
        let (signer, _) = Signer::generate("key_harbour_es_01", Algorithm::Es256).unwrap();
        let actor = json!({ "organization_id": "org_harbour_lab", "agent_id": "agt_harbour_sales_01", "mandate_id": "mnd_harbour_sales_01" });
        let path = keys.path().join("keys.json");
        let record = signer.key_record(&actor, "2026-01-01T00:00:00Z");
        std::fs::write(&path, json!([record]).to_string()).unwrap();
        let mut all = vec!["--a202-keys", path.to_str().unwrap()];
        all.extend_from_slice(args);
        Market {
            s: TestServer::start(&all).await,
            signer,
            _keys: keys,
        }
    }

    /// The fixture offer as `id` in transaction `txn`, sealed with the trusted key.
    fn offer(&self, id: &str, txn: &str) -> Vec<u8> {
        let mut o: Value = serde_json::from_str(OFFER).unwrap();
        o["id"] = json!(id);
        o["transaction_id"] = json!(txn);
        seal(
            &mut o,
            &[(&self.signer, "offer_submission")],
            "2026-11-02T09:31:00Z",
        )
        .unwrap()
    }

    fn root(&self, path: &str) -> String {
        format!("http://{}{path}", self.s.addr)
    }

    /// A transaction's stream as the server reports it (`null` when it has none).
    async fn stream(&self, txn: &str) -> Value {
        let (status, v) = self
            .s
            .call(
                self.s
                    .http
                    .get(self.root(&format!("/a202/transactions/{txn}"))),
                ADMIN,
            )
            .await;
        assert!(status == 200 || status == 404, "{status} {v}");
        if status == 404 { Value::Null } else { v }
    }

    /// Polls a task until it is in `want`.
    async fn wait_state(&self, id: &str, want: &str) {
        for _ in 0..200 {
            let (_, t) = self
                .s
                .call(
                    self.s
                        .http
                        .get(self.s.url(&format!("/tasks/{id}")))
                        .header("A2A-Version", "1.0"),
                    ADMIN,
                )
                .await;
            if t["status"]["state"] == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {id} never reached {want}");
    }

    /// SendMessage over JSON-RPC 1.0; the answer and the echoed activation header.
    async fn send(&self, message: Value, activate: bool) -> (Value, Option<String>) {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": { "message": message } });
        let mut req = self
            .s
            .http
            .post(self.root("/jsonrpc"))
            .bearer_auth(ADMIN)
            .header("A2A-Version", "1.0")
            .header("Content-Type", "application/a2a+json")
            .body(body.to_string());
        if activate {
            req = req.header("A2A-Extensions", URI);
        }
        let resp = req.send().await.unwrap();
        let echo = resp
            .headers()
            .get("a2a-extensions")
            .map(|v| v.to_str().unwrap().to_owned());
        (resp.json().await.unwrap(), echo)
    }

    /// POST /a202/objects; the status, the echoed activation and the body.
    async fn post(&self, bytes: &[u8], headers: &[(&str, &str)]) -> (u16, Option<String>, String) {
        let mut req = self
            .s
            .http
            .post(self.root("/a202/objects"))
            .bearer_auth(ADMIN)
            .body(bytes.to_vec());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let echo = resp
            .headers()
            .get("a202-extensions")
            .map(|v| v.to_str().unwrap().to_owned());
        (resp.status().as_u16(), echo, resp.text().await.unwrap())
    }
}

/// A message carrying `bytes` as a raw part, naming `txn` in the extension payload, plus
/// any `extra` parts.
fn carrying(bytes: &[u8], txn: Option<&str>, extra: &[Value]) -> Value {
    let mut parts = vec![json!({
        "raw": base64::engine::general_purpose::STANDARD.encode(bytes),
        "mediaType": MEDIA,
    })];
    parts.extend_from_slice(extra);
    let mut message = json!({
        "messageId": uuid::Uuid::now_v7().to_string(),
        "role": "ROLE_USER",
        "parts": parts,
    });
    if let Some(txn) = txn {
        message["metadata"] = json!({ URI: { "transaction_id": txn } });
    }
    message
}

fn a202_code(answer: &Value) -> &str {
    answer["error"]["data"][0]["metadata"]["a202_code"]
        .as_str()
        .unwrap_or("")
}

const HTTPS_HEADERS: [(&str, &str); 2] = [("Content-Type", MEDIA), ("A202-Extensions", URI)];

/// Runs `ptyhost a202 ARGS`: the exit code and stdout.
async fn a202_cli(args: &[&str]) -> (i32, String) {
    let out = tokio::process::Command::new(bin())
        .arg("a202")
        .args(args)
        .env(
            "PTYHOST_A2A_CACHE",
            std::env::temp_dir().join("ptyhost-a202-test-cache.json"),
        )
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `ptyhost a202 --carrier CARRIER send BASE FILE` as the admin: the exit code and the
/// JSON it prints.
async fn cli_send(carrier: &str, base: &str, file: &std::path::Path) -> (i32, Value) {
    let (code, out) = a202_cli(&[
        "--carrier",
        carrier,
        "send",
        base,
        file.to_str().unwrap(),
        "--token",
        ADMIN,
        "--json",
    ])
    .await;
    (
        code,
        serde_json::from_str(&out).unwrap_or(Value::String(out)),
    )
}

/// An action envelope for `txn` that expects its stream at `expected`.
fn action(m: &Market, id: &str, txn: &str, expected: i64) -> Vec<u8> {
    let mut a: Value = serde_json::from_str(OFFER).unwrap();
    let proposed = a["payload"].clone();
    a["id"] = json!(id);
    a["object_type"] = json!("action_envelope");
    a["transaction_id"] = json!(txn);
    a["payload"] = json!({
        "action_type": "offer.submit",
        "expected_sequence": expected,
        "session_id": "ses_quay_harbour_01",
        "idempotency_key": format!("idem-{id}"),
        "proposed_object": proposed,
    });
    seal(
        &mut a,
        &[(&m.signer, "action_submission")],
        "2026-11-02T09:35:00Z",
    )
    .unwrap()
}
