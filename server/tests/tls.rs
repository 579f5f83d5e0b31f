//! HTTPS and WSS with `--tls-cert/--tls-key`: a client that trusts the certificate's CA
//! reads the API and attaches over wss on a non-loopback listen address, with no
//! `--allow-insecure-ws`, and submits A202 objects there; a client that does not trust it is
//! refused by the handshake.

mod common;

use std::sync::Arc;

use common::*;
use futures_util::StreamExt;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::Value;
use server::a202::keys::Algorithm;
use server::a202::seal::{Signer, seal};
use tokio_rustls::rustls;
use tokio_tungstenite::Connector;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use wire::card::SupersetCard;

/// A CA, and a server certificate for 127.0.0.1 and localhost signed by it, as PEM files.
fn certificates(dir: &std::path::Path) -> String {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(dir.join("cert.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    ca.pem()
}

fn client_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::pem::PemObject::from_pem_slice(ca_pem.as_bytes()).unwrap();
    roots.add(ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

#[tokio::test]
async fn tls_serves_https_and_wss_on_a_non_loopback_address() {
    let certs = tempfile::tempdir().unwrap();
    let ca_pem = certificates(certs.path());
    let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    let s = TestServer::start(&[
        "--listen",
        "0.0.0.0:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ])
    .await;
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let card: Value = https
        .get(format!(
            "https://{}/agents/local/.well-known/agent-card.json",
            s.addr
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let addr = s.addr.replace("127.0.0.1", "0.0.0.0");
    let card: SupersetCard = serde_json::from_value(card).unwrap();
    assert_eq!(card.url, format!("https://{addr}/agents/local/jsonrpc"));
    assert_eq!(
        card.card.supported_interfaces[2].url,
        format!("wss://{addr}/agents/local/sessions/{{session_id}}/attach")
    );
    let (status, created) = s
        .call(
            https
                .post(format!("https://{}/agents/local/sessions", s.addr))
                .json(&serde_json::json!({ "argv": ["cat"] })),
            ADMIN,
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let created: Session = serde_json::from_value(created).unwrap();
    let sid = created.session_id.as_str();

    // wss: no --allow-insecure-ws needed on 0.0.0.0, because it is not plain ws.
    let mut req = format!("wss://{}/agents/local/sessions/{sid}/attach", s.addr)
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_str(&bearer_protocols(ADMIN)).unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async_tls_with_config(
        req,
        None,
        false,
        Some(Connector::Rustls(client_config(&ca_pem))),
    )
    .await
    .expect("wss attach");
    let hello = ws.next().await.unwrap().unwrap();
    assert!(hello.to_text().unwrap().contains("binding_hello"));

    // gRPC over h2 on the same listener.
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca_pem))
        .domain_name("localhost");
    let channel = tonic::transport::Endpoint::from_shared(format!("https://{}", s.addr))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .expect("a gRPC channel over TLS");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(bytes::Bytes::from(
        server::bindings::proto::encode("lf.a2a.v1.ListTasksRequest", &serde_json::json!({}))
            .unwrap(),
    ));
    req.metadata_mut()
        .insert("authorization", format!("Bearer {ADMIN}").parse().unwrap());
    let path = "/lf.a2a.v1.A2AService/ListTasks".parse().unwrap();
    let listed = grpc
        .unary(req, path, server::bindings::grpc::RawCodec)
        .await
        .expect("ListTasks over gRPC with TLS");
    server::bindings::proto::decode("lf.a2a.v1.ListTasksResponse", listed.get_ref()).unwrap();

    // The A202 HTTPS binding takes objects here: HTTPS off loopback is no insecure endpoint.
    let (signer, _) = Signer::generate("key_tls_es_01", Algorithm::Es256).unwrap();
    let mut offer: Value = serde_json::from_str(include_str!("fixtures/a202/offer.json")).unwrap();
    let bytes = seal(
        &mut offer,
        &[(&signer, "offer_submission")],
        "2026-11-02T09:31:00Z",
    )
    .unwrap();
    let submitted = https
        .post(format!("https://{}/a202/objects", s.addr))
        .bearer_auth(ADMIN)
        .header("Content-Type", "application/a202-commercial+json")
        .header(
            "A202-Extensions",
            "https://schemas.a202.org/a2a-ext/commercial/0.1",
        )
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(submitted.status(), 202);

    // A client that does not trust the CA fails the handshake; plain HTTP gets no answer.
    let untrusting = reqwest::Client::new();
    assert!(
        untrusting
            .get(format!("https://{}/healthz", s.addr))
            .send()
            .await
            .is_err()
    );
    assert!(
        reqwest::get(format!("http://{}/healthz", s.addr))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_key_that_does_not_fit_the_certificate_stops_the_start_with_a_clear_error() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let other = KeyPair::generate().unwrap();
    std::fs::write(certs.path().join("other.pem"), other.serialize_pem()).unwrap();
    let out = std::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(certs.path().join("data"))
        .arg("--tls-cert")
        .arg(certs.path().join("cert.pem"))
        .arg("--tls-key")
        .arg(certs.path().join("other.pem"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("do not fit together"), "{err}");
    let out = std::process::Command::new(bin())
        .args(["serve", "--tls-cert", "x.pem"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "--tls-cert needs --tls-key");
}
