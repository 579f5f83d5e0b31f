//! The gRPC binding (lf.a2a.v1.A2AService on the HTTP listener, h2c) through a tonic client:
//! bearer in the metadata, errors as google.rpc.Status with an ErrorInfo in A2A's gRPC
//! codes, and one task model with the other bindings.
//!
//! Raw JSON on purpose: these tests pin the ProtoJSON and google.rpc.Status names as the
//! specs write them, apart from the `wire` types the server encodes with.

mod common;

use bytes::Bytes;
use common::*;
use serde_json::{Value, json};
use server::bindings::grpc::RawCodec;
use server::bindings::proto;
use tonic::metadata::MetadataValue;
use tonic_types::StatusExt;

/// Calls `method` with `request` (1.0 ProtoJSON of `request_type`); the answer as JSON.
async fn call(
    s: &TestServer,
    method: &str,
    request: Value,
    metadata: &[(&'static str, &str)],
) -> Result<Value, tonic::Status> {
    let (request_type, answer_type, _) = proto::method_types(method).unwrap();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", s.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(Bytes::from(proto::encode(request_type, &request).unwrap()));
    for (k, v) in metadata {
        req.metadata_mut()
            .insert(*k, MetadataValue::try_from(*v).unwrap());
    }
    let path = format!("/lf.a2a.v1.A2AService/{method}").parse().unwrap();
    let answer = grpc.unary(req, path, RawCodec).await?;
    Ok(proto::decode(answer_type, answer.get_ref()).unwrap())
}

const AUTH: (&str, &str) = ("authorization", "Bearer test-admin-token-0123456789");

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|i| i.reason)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_task_sent_over_grpc_reads_back_identically_over_http_json() {
    let s = TestServer::start(&[]).await;
    let sent = call(
        &s,
        "SendMessage",
        json!({ "message": { "messageId": "g1", "role": "ROLE_USER", "parts": [{ "text": "echo over-grpc" }] } }),
        &[AUTH],
    )
    .await
    .unwrap();
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "over-grpc\r\n");
    let id = task["id"].as_str().unwrap();
    let req = s
        .http
        .get(s.url(&format!("/tasks/{id}")))
        .header("A2A-Version", "1.0");
    let (_, over_rest) = s.call(req, ADMIN).await;
    assert_eq!(over_rest["contextId"], task["contextId"]);
    assert_eq!(over_rest["artifacts"], task["artifacts"]);
    let got = call(&s, "GetTask", json!({ "id": id }), &[AUTH])
        .await
        .unwrap();
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn grpc_errors_are_statuses_with_error_info_in_the_codes_of_the_a2a_table() {
    let s = TestServer::start(&[]).await;
    let missing = call(&s, "GetTask", json!({ "id": "nope" }), &[AUTH])
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    assert_eq!(reason(&missing), "TASK_NOT_FOUND");

    let anonymous = call(&s, "ListTasks", json!({}), &[]).await.unwrap_err();
    assert_eq!(anonymous.code(), tonic::Code::Unauthenticated);
    let bad = ("authorization", "Bearer not-a-token");
    let refused = call(&s, "ListTasks", json!({}), &[bad]).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    let old = call(&s, "ListTasks", json!({}), &[AUTH, ("a2a-version", "0.3")])
        .await
        .unwrap_err();
    assert_eq!(old.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&old), "VERSION_NOT_SUPPORTED");

    let card = call(&s, "GetExtendedAgentCard", json!({}), &[AUTH])
        .await
        .unwrap_err();
    assert_eq!(card.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&card), "UNSUPPORTED_OPERATION");
}
