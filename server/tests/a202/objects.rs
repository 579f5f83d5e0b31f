use super::*;

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
