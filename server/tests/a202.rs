//! The A202 commercial extension against the real server: the declaration in the card and
//! the preflight document, objects over the A2A carrier (raw parts, activation, the
//! transaction in the extension payload) and over plain HTTPS (202 / 409 / 412 / insecure
//! endpoint), the A202-0001 fixture cases through `ptyhost a202 check`, and the runtime
//! case: a carrier task that fails or is canceled changes nothing commercial.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};
use server::a202::keys::Algorithm;
use server::a202::seal::{Signer, seal};

const URI: &str = "https://schemas.a202.org/a2a-ext/commercial/0.1";
const MEDIA: &str = "application/a202-commercial+json";
const OFFER: &str = include_str!("fixtures/a202/offer.json");

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

#[tokio::test]
async fn the_card_and_the_preflight_document_declare_the_extension_exactly_once() {
    let m = Market::open(&[]).await;
    for path in [
        "/.well-known/agent-card.json",
        "/agents/local/.well-known/agent-card.json",
    ] {
        let card: Value = m.s.public(m.root(path)).await;
        let ours: Vec<&Value> = card["capabilities"]["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["uri"] == URI)
            .collect();
        assert_eq!(ours.len(), 1, "{path}");
        assert_eq!(ours[0]["required"], false);
        assert_eq!(
            ours[0]["params"],
            json!({ "read_versions": ["0.1"], "write_version": "0.1" })
        );
        assert!(ours[0]["description"].as_str().unwrap().contains("A202"));
    }
    let doc: Value =
        m.s.public(m.root("/.well-known/a202-capability.json"))
            .await;
    assert_eq!(doc["extensions"][0]["uri"], URI);
    assert_eq!(doc["extensions"][0]["params"]["write_version"], "0.1");

    // Required by configuration: the card says so and a request that does not activate it
    // is ExtensionSupportRequired; one that does is echoed.
    let strict = TestServer::start(&["--a202-required"]).await;
    let card: Value = strict
        .public(format!(
            "http://{}/.well-known/agent-card.json",
            strict.addr
        ))
        .await;
    let entry = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == URI)
        .unwrap();
    assert_eq!(entry["required"], true);
    let get = |activate: bool| {
        let mut req = strict
            .http
            .get(strict.url("/tasks"))
            .bearer_auth(ADMIN)
            .header("A2A-Version", "1.0");
        if activate {
            req = req.header("A2A-Extensions", URI);
        }
        req.send()
    };
    let refused = get(false).await.unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        body["error"]["details"][0]["reason"],
        "EXTENSION_SUPPORT_REQUIRED"
    );
    let ok = get(true).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["a2a-extensions"], URI);
}

#[tokio::test]
async fn objects_over_a2a_are_verified_appended_and_receipted() {
    let m = Market::open(&[]).await;
    let offer = m.offer("off_rack_a2a_01", "txn_rack_a2a_01");
    let (answer, echo) = m
        .send(carrying(&offer, Some("txn_rack_a2a_01"), &[]), true)
        .await;
    assert_eq!(
        echo.as_deref(),
        Some(URI),
        "silence is not acceptance: the activation is echoed"
    );
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    let receipt = &task["metadata"][URI]["receipts"][0];
    assert_eq!(
        (
            receipt["id"].as_str(),
            receipt["sequence"].as_i64(),
            receipt["duplicate"].as_bool()
        ),
        (Some("off_rack_a2a_01"), Some(1), Some(false))
    );
    assert_eq!(receipt["signatures"][0]["outcome"], "verified");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["data"]["receipts"][0],
        *receipt
    );
    let stream = m.stream("txn_rack_a2a_01").await;
    assert_eq!(stream["sequence"], 1);
    assert_eq!(stream["objects"][0]["status"], "open");
    assert_eq!(stream["objects"][0]["carrier"], "a2a");

    // The same bytes again, over 0.3 JSON-RPC (a file part): recognised, not appended.
    let message03 = json!({
        "kind": "message", "messageId": "a202-o3", "role": "user",
        "parts": [{ "kind": "file", "file": { "bytes": base64::engine::general_purpose::STANDARD.encode(&offer), "mimeType": MEDIA } }],
        "metadata": { URI: { "transaction_id": "txn_rack_a2a_01" } },
    });
    let resp = m
        .s
        .http
        .post(m.root("/jsonrpc"))
        .bearer_auth(ADMIN)
        .header("X-A2A-Extensions", URI)
        .json(&json!({ "jsonrpc": "2.0", "id": 2, "method": "message/send", "params": { "message": message03 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-a2a-extensions"], URI);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    assert_eq!(
        v["result"]["metadata"][URI]["receipts"][0]["duplicate"],
        true
    );
    assert_eq!(m.stream("txn_rack_a2a_01").await["sequence"], 1);
}

#[tokio::test]
async fn refused_objects_change_nothing_and_name_their_code() {
    let m = Market::open(&[]).await;
    let offer = m.offer("off_rack_refused_01", "txn_rack_refused_01");
    // Not activated: A202-EXTENSION-UNSUPPORTED.
    let (v, echo) = m
        .send(carrying(&offer, Some("txn_rack_refused_01"), &[]), false)
        .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(a202_code(&v), "A202-EXTENSION-UNSUPPORTED");
    assert_eq!(echo, None);
    // The extension payload names another transaction: A202-STREAM-MISMATCH.
    let (v, _) = m
        .send(carrying(&offer, Some("txn_someone_else_01"), &[]), true)
        .await;
    assert_eq!(a202_code(&v), "A202-STREAM-MISMATCH", "{v}");
    let (v, _) = m.send(carrying(&offer, None, &[]), true).await;
    assert_eq!(a202_code(&v), "A202-STREAM-MISMATCH", "{v}");
    // Re-serialized: the same JSON, other bytes.
    let pretty =
        serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(&offer).unwrap()).unwrap();
    let (v, _) = m
        .send(carrying(&pretty, Some("txn_rack_refused_01"), &[]), true)
        .await;
    assert_eq!(a202_code(&v), "kernel_validation", "{v}");
    // A structured view alone is not the object.
    let view = json!({
        "messageId": "view-only", "role": "ROLE_USER",
        "parts": [{ "data": serde_json::from_slice::<Value>(&offer).unwrap(), "mediaType": MEDIA }],
        "metadata": { URI: { "transaction_id": "txn_rack_refused_01" } },
    });
    let (v, _) = m.send(view, true).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not the object"),
        "{v}"
    );
    // Tampered bytes (still canonical): the hash no longer matches.
    let tampered = String::from_utf8(offer.clone())
        .unwrap()
        .replace("\"880.00\"", "\"80.00\"");
    let (v, _) = m
        .send(
            carrying(tampered.as_bytes(), Some("txn_rack_refused_01"), &[]),
            true,
        )
        .await;
    assert_eq!(a202_code(&v), "A202-EVIDENCE-HASH-MISMATCH", "{v}");
    // A refused object with a command: the command does not run either.
    let (v, _) = m
        .send(
            carrying(
                &pretty,
                Some("txn_rack_refused_01"),
                &[json!({ "text": "touch ran" })],
            ),
            true,
        )
        .await;
    assert!(v.get("error").is_some(), "{v}");
    assert_eq!(
        m.stream("txn_rack_refused_01").await,
        Value::Null,
        "nothing appended"
    );
    let (_, tasks) =
        m.s.call(
            m.s.http.get(m.s.url("/tasks")).header("A2A-Version", "1.0"),
            ADMIN,
        )
        .await;
    assert_eq!(tasks["tasks"], json!([]), "no carrier task was created");
}

/// A202-0001 §5 runtime case: a signed offer is appended, then the carrier task that
/// delivered it fails — and, separately, is canceled. The stream (sequence, objects) and
/// the offers' status are unchanged; the offers stay open.
#[tokio::test]
async fn carrier_task_failure_does_not_transition_the_transaction() {
    let m = Market::open(&[]).await;
    let txn = "txn_rack_runtime_01";
    let rest = |path: &str| {
        m.s.http
            .post(m.s.url(path))
            .bearer_auth(ADMIN)
            .header("A2A-Version", "1.0")
            .header("A2A-Extensions", URI)
            .header("Content-Type", "application/a2a+json")
    };
    let send = |bytes: Vec<u8>, command: &'static str| {
        let body = json!({
            "message": carrying(&bytes, Some(txn), &[json!({ "text": command })]),
            "configuration": { "returnImmediately": true },
        });
        rest("/message:send").body(body.to_string()).send()
    };
    // Failed: the command exits 3 after its offer was appended.
    let sent: Value = send(m.offer("off_rack_runtime_01", txn), "sleep 0.3; exit 3")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        sent["task"]["metadata"][URI]["receipts"][0]["sequence"], 1,
        "{sent}"
    );
    let before = m.stream(txn).await;
    assert_eq!(before["sequence"], 1);
    m.wait_state(&id, "TASK_STATE_FAILED").await;
    assert_eq!(
        m.stream(txn).await,
        before,
        "a failed carrier task changes nothing"
    );

    // Canceled: a long command, canceled after its offer was appended.
    let sent: Value = send(m.offer("off_rack_runtime_02", txn), "sleep 100")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    m.wait_state(&id, "TASK_STATE_WORKING").await;
    let before = m.stream(txn).await;
    assert_eq!(before["sequence"], 2);
    let canceled = rest(&format!("/tasks/{id}:cancel")).send().await.unwrap();
    assert_eq!(canceled.status(), 200);
    m.wait_state(&id, "TASK_STATE_CANCELED").await;
    let after = m.stream(txn).await;
    assert_eq!(after, before, "a canceled carrier task changes nothing");
    let statuses: Vec<&str> = after["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["open", "open"], "both offers remain acceptable");
}

#[tokio::test]
async fn the_https_binding_answers_202_412_409_and_echoes_its_header() {
    let m = Market::open(&[]).await;
    let offer = m.offer("off_rack_https_01", "txn_rack_https_01");
    // No activation, or only some other URI: 412, nothing taken.
    for headers in [
        vec![("Content-Type", MEDIA)],
        vec![
            ("Content-Type", MEDIA),
            (
                "A202-Extensions",
                "https://schemas.a202.invalid/a2a-ext/commercial/0.1",
            ),
        ],
    ] {
        let (status, echo, body) = m.post(&offer, &headers).await;
        assert_eq!(status, 412, "{body}");
        assert_eq!(echo, None);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["code"],
            "A202-EXTENSION-UNSUPPORTED"
        );
    }
    assert_eq!(m.stream("txn_rack_https_01").await, Value::Null);
    // Accepted: 202 with no body, the activation echoed.
    let (status, echo, body) = m.post(&offer, &HTTPS_HEADERS).await;
    assert_eq!(
        (status, echo.as_deref(), body.as_str()),
        (202, Some(URI), "")
    );
    let stream = m.stream("txn_rack_https_01").await;
    assert_eq!(
        (
            stream["sequence"].as_i64(),
            stream["objects"][0]["carrier"].as_str()
        ),
        (Some(1), Some("https"))
    );
    // The same bytes again are recognised; other bytes under the same id and version
    // conflict with what the stream holds: 409 with the stream's sequence.
    assert_eq!(m.post(&offer, &HTTPS_HEADERS).await.0, 202);
    let mut other: Value = serde_json::from_str(OFFER).unwrap();
    other["id"] = json!("off_rack_https_01");
    other["transaction_id"] = json!("txn_rack_https_01");
    other["payload"]["terms"]["core"]["total"]["amount"] = json!("990.00");
    let other = seal(
        &mut other,
        &[(&m.signer, "offer_submission")],
        "2026-11-02T10:00:00Z",
    )
    .unwrap();
    let (status, echo, body) = m.post(&other, &HTTPS_HEADERS).await;
    assert_eq!((status, echo.as_deref()), (409, Some(URI)), "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (body["code"].as_str(), body["current_sequence"].as_i64()),
        (Some("A202-SEQUENCE-CONFLICT"), Some(1))
    );
    // Refusals with their codes; the wrong media type is 415.
    let (status, _, body) = m.post(b"{\"not\":\"an object\"}", &HTTPS_HEADERS).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["refusal"],
        "kernel_validation"
    );
    let (status, _, _) = m
        .post(
            &offer,
            &[
                ("Content-Type", "application/json"),
                ("A202-Extensions", URI),
            ],
        )
        .await;
    assert_eq!(status, 415);
    assert_eq!(m.stream("txn_rack_https_01").await["sequence"], 1);
    // No token: 401; an observer cannot submit.
    let anonymous =
        m.s.http
            .post(m.root("/a202/objects"))
            .body(offer.clone())
            .send()
            .await
            .unwrap();
    assert_eq!(anonymous.status(), 401);
    let observer = m.s.token("pty:observe", None).await;
    let (status, _) =
        m.s.call(
            m.s.http
                .post(m.root("/a202/objects"))
                .header("Content-Type", MEDIA)
                .header("A202-Extensions", URI)
                .body(offer.clone()),
            &observer,
        )
        .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn plain_http_off_loopback_is_an_insecure_endpoint() {
    let m = Market::open(&["--listen", "0.0.0.0:0", "--allow-insecure-ws"]).await;
    let offer = m.offer("off_rack_insecure_01", "txn_rack_insecure_01");
    let (status, _, body) = m.post(&offer, &HTTPS_HEADERS).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["code"],
        "A202-ENDPOINT-INSECURE"
    );
    assert_eq!(m.stream("txn_rack_insecure_01").await, Value::Null);
    // The client refuses a plain-HTTP endpoint off loopback before sending anything.
    let out = a202_cli(&["check", "http://192.0.2.10:9/"]).await;
    assert_eq!((out.0, out.1.trim()), (1, "A202-ENDPOINT-INSECURE"));
}

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

#[tokio::test]
async fn valid_extension_declaration_lets_the_client_send_over_both_carriers() {
    let m = Market::open(&[]).await;
    let base = m.root("");
    for carrier in ["a2a", "https"] {
        let (code, out) = a202_cli(&["--carrier", carrier, "check", &base, "--json"]).await;
        assert_eq!(code, 0, "{carrier}: {out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (v["outcome"].as_str(), v["write_version"].as_str()),
            (Some("supported"), Some("0.1"))
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file: PathBuf = dir.path().join("offer.json");
    // The file need not be canonical: the client sends its RFC 8785 bytes.
    let offer: Value =
        serde_json::from_slice(&m.offer("off_rack_cli_01", "txn_rack_cli_01")).unwrap();
    std::fs::write(&file, serde_json::to_vec_pretty(&offer).unwrap()).unwrap();
    let (code, out) = cli_send("a2a", &base, &file).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["receipts"][0]["sequence"], 1, "{out}");
    let mut second = offer.clone();
    second["id"] = json!("off_rack_cli_02");
    second["signatures"] = json!([]);
    seal(
        &mut second,
        &[(&m.signer, "offer_submission")],
        "2026-11-02T09:40:00Z",
    )
    .unwrap();
    std::fs::write(&file, second.to_string()).unwrap();
    let (code, out) = cli_send("https", &base, &file).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["status"], 202);
    let stream = m.stream("txn_rack_cli_01").await;
    let carriers: Vec<&str> = stream["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["carrier"].as_str().unwrap())
        .collect();
    assert_eq!(carriers, ["a2a", "https"]);
    // A refusal over A2A names its code: tampered after sealing, the hash no longer fits.
    let mut tampered = second.clone();
    tampered["id"] = json!("off_rack_cli_03");
    std::fs::write(&file, tampered.to_string()).unwrap();
    let (code, out) = cli_send("a2a", &base, &file).await;
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["code"], "A202-EVIDENCE-HASH-MISMATCH");
}

#[tokio::test]
async fn declaration_missing_and_an_unretrievable_card_are_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let card = dir.path().join("card.json");
    std::fs::write(
        &card,
        json!({ "name": "elsewhere", "capabilities": { "extensions": [
            { "uri": "https://schemas.example.invalid/unrelated-ext/1.0", "required": false, "params": {} }
        ]}})
        .to_string(),
    )
    .unwrap();
    let file = dir.path().join("offer.json");
    std::fs::write(&file, OFFER).unwrap();
    for args in [
        vec!["check", card.to_str().unwrap()],
        vec!["send", card.to_str().unwrap(), file.to_str().unwrap()],
        vec!["check", "http://127.0.0.1:9/"],
        vec!["--carrier", "https", "check", "http://127.0.0.1:9/"],
    ] {
        let (code, out) = a202_cli(&args).await;
        assert_eq!(
            (code, out.trim()),
            (1, "A202-EXTENSION-UNSUPPORTED"),
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn declaration_version_mismatch_is_refused_in_both_directions() {
    let old = TestServer::start(&[]).await;
    let newer =
        TestServer::start(&["--a202-read-versions", "0.2", "--a202-write-version", "0.2"]).await;
    let wide = TestServer::start(&[
        "--a202-read-versions",
        "0.1,0.2",
        "--a202-write-version",
        "0.1",
    ])
    .await;
    let at = |s: &TestServer| format!("http://{}", s.addr);
    let ours = [
        "--a202-read-versions",
        "0.1,0.2",
        "--a202-write-version",
        "0.2",
    ];
    for carrier in ["a2a", "https"] {
        let check = |local: &[&str], s: &TestServer| {
            let args: Vec<String> = ["--carrier", carrier, "--json"]
                .iter()
                .chain(local)
                .map(|a| a.to_string())
                .chain(["check".to_owned(), at(s)])
                .collect();
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                a202_cli(&args).await
            }
        };
        // They write 0.2, which we (0.1) do not read.
        let (code, out) = check(&[], &newer).await;
        assert_eq!(code, 1, "{carrier}: {out}");
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap()["code"],
            "A202-EXTENSION-UNSUPPORTED"
        );
        // We write 0.2, which they (0.1) do not read, although we read what they write.
        let (code, out) = check(&ours, &old).await;
        assert_eq!(code, 1, "{carrier}: {out}");
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap()["code"],
            "A202-EXTENSION-UNSUPPORTED"
        );
        // Both directions hold: they read 0.2 and write 0.1, we read 0.1 and write 0.2.
        let (code, out) = check(&ours, &wide).await;
        assert_eq!(code, 0, "{carrier}: {out}");
    }
    // Our own declaration must not write what it cannot read.
    let bad = tokio::process::Command::new(bin())
        .args([
            "serve",
            "--a202-read-versions",
            "0.1",
            "--a202-write-version",
            "0.2",
            "--data-dir",
        ])
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .await
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("write version 0.2"));
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

#[tokio::test]
async fn streams_survive_a_crash_and_actions_append_only_at_their_expected_sequence() {
    let mut m = Market::open(&[]).await;
    let txn = "txn_rack_durable_01";
    assert_eq!(
        m.post(&m.offer("off_rack_durable_01", txn), &HTTPS_HEADERS)
            .await
            .0,
        202
    );
    let before = m.stream(txn).await;
    let keys = m._keys.path().join("keys.json");
    m.s.crash_and_restart(&["--a202-keys", keys.to_str().unwrap()])
        .await;
    assert_eq!(
        m.stream(txn).await,
        before,
        "an accepted object survives a crash"
    );

    // The stream is at 1: an action expecting 0 conflicts and consumes nothing; one
    // expecting 1 appends at 2.
    let (status, _, body) = m
        .post(&action(&m, "act_rack_durable_01", txn, 0), &HTTPS_HEADERS)
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["current_sequence"],
        1
    );
    let (status, _, body) = m
        .post(&action(&m, "act_rack_durable_02", txn, 1), &HTTPS_HEADERS)
        .await;
    assert_eq!(status, 202, "{body}");
    let after = m.stream(txn).await;
    assert_eq!(after["sequence"], 2);
    assert_eq!(after["objects"][1]["object_type"], "action_envelope");
}
