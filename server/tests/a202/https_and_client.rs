use super::*;

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
