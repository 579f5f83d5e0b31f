//! The gRPC binding: A2A's `lf.a2a.v1.A2AService` (`proto/a2a.proto`) over HTTP/2 on the
//! same listener as HTTP (h2c without TLS, h2 with `--tls-cert`). A thin adapter: the task
//! methods (send, stream, get, cancel, subscribe) decode prost's messages and map them to
//! the task model directly (`model`); the others turn the request into the 1.0 ProtoJSON
//! that the JSON-RPC binding's `call` takes, and the answer back into protobuf. The bearer
//! token rides in the `authorization` metadata; `a2a-version` and `a2a-extensions` are read
//! as the HTTP bindings read their headers; errors are google.rpc.Status with an ErrorInfo
//! detail, in the gRPC codes of A2A's error table.

use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::{Buf, BufMut, Bytes};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde_json::Value;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic_types::{ErrorDetails, StatusExt};

mod model;
pub use model::pb;

use super::jsonrpc::{self, Reply};
use super::proto;
use crate::a2a::service::TaskStream;
use crate::a2a::{A2aError, Version, Via};
use crate::agentic::Surface;
use crate::state::{AppState, header_bearer};

/// The service's path prefix: `/{package}.{service}/`.
pub const SERVICE: &str = "lf.a2a.v1.A2AService";

/// Serves one RPC (`POST /lf.a2a.v1.A2AService/{method}`).
pub async fn serve(
    State(state): State<AppState>,
    Path(method): Path<String>,
    req: Request,
) -> Response {
    let Some((request_type, answer_type, streaming)) =
        proto::method_types(&method).filter(|_| method != "system/shutdown")
    else {
        let status = tonic::Status::unimplemented(format!("{SERVICE} has no method {method}"));
        return status.into_http::<axum::body::Body>().into_response();
    };
    let rpc = Rpc {
        state,
        method,
        request_type,
        answer_type,
    };
    let mut grpc = tonic::server::Grpc::new(RawCodec);
    let answer = if streaming {
        grpc.server_streaming(rpc, req).await
    } else {
        grpc.unary(rpc, req).await
    };
    answer.map(axum::body::Body::new)
}

/// One RPC of the service: what it is called and the protobuf types it takes and answers.
#[derive(Clone)]
struct Rpc {
    state: AppState,
    method: String,
    request_type: &'static str,
    answer_type: &'static str,
}

/// What an RPC answers: one message, encoded, or a task's stream.
enum Answer {
    Once(Bytes),
    Stream(Box<TaskStream>),
}

/// A request's message, or INVALID_ARGUMENT.
fn decode<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, A2aError> {
    M::decode(bytes)
        .map_err(|e| A2aError::InvalidRequest(format!("the request does not decode: {e}")))
}

fn once(m: impl prost::Message) -> Answer {
    Answer::Once(Bytes::from(m.encode_to_vec()))
}

impl Rpc {
    /// The caller's request, answered, and the headers to echo.
    async fn run(&self, request: tonic::Request<Bytes>) -> Result<(Answer, HeaderMap), A2aError> {
        let (metadata, _, bytes) = request.into_parts();
        let headers = metadata.into_headers();
        if let Some(v) = headers.get("a2a-version").and_then(|v| v.to_str().ok())
            && !Version::V1.accepts(v.trim())
        {
            return Err(A2aError::VersionNotSupported(format!(
                "A2A-Version {v} is not served over gRPC (1.0 is)"
            )));
        }
        let who = crate::state::authenticate(&self.state, &headers, header_bearer(&headers))
            .await
            .map_err(|e| A2aError::Unauthenticated(e.to_string()))?;
        let activation = super::activate(&self.state.tasks, &headers, Surface::Other)?;
        let (tasks, bytes) = (&self.state.tasks, bytes.as_ref());
        let via = Via {
            version: Version::V1,
            extensions: &activation.uris,
        };
        let answer = match self.method.as_str() {
            "SendMessage" => once(model::sent(
                tasks
                    .send(&who, model::send_request(decode(bytes)?)?, via)
                    .await?,
            )),
            "GetTask" => {
                let r = model::get_request(decode(bytes)?)?;
                once(model::task(tasks.get(&who, &r.id, r.history_length).await?))
            }
            "CancelTask" => {
                let r: pb::CancelTaskRequest = decode(bytes)?;
                once(model::task(tasks.cancel(&who, &r.id).await?))
            }
            "SendStreamingMessage" => {
                let r = model::send_request(decode(bytes)?)?;
                Answer::Stream(Box::new(tasks.send_stream(&who, r, via).await?))
            }
            "SubscribeToTask" => {
                let r: pb::SubscribeToTaskRequest = decode(bytes)?;
                Answer::Stream(Box::new(tasks.subscribe(&who, &r.id).await?))
            }
            _ => self.through_json(&who, bytes, &activation.uris).await?,
        };
        let mut echoed = HeaderMap::new();
        activation.echo(&mut echoed);
        let answer = match answer {
            Answer::Stream(stream) => {
                let lease = self.state.revocations.lease(&who, "grpc", None);
                Answer::Stream(Box::new(stream.cut_by(lease)))
            }
            once => once,
        };
        Ok((answer, echoed))
    }

    /// The other methods, through the JSON-RPC binding's `call` in 1.0 ProtoJSON.
    async fn through_json(
        &self,
        who: &crate::auth::Principal,
        bytes: &[u8],
        extensions: &[&'static str],
    ) -> Result<Answer, A2aError> {
        let params = proto::decode(self.request_type, bytes)
            .map_err(|e| A2aError::InvalidRequest(format!("the request does not decode: {e}")))?;
        let reply = jsonrpc::call(&self.state.tasks, who, &self.method, params, extensions).await?;
        Ok(match reply {
            Reply::Value(v) => Answer::Once(self.encode(&v).map_err(|e| {
                tracing::error!(error = %e, method = %self.method, "a gRPC answer does not encode");
                A2aError::Internal
            })?),
            Reply::Stream(stream, _) => Answer::Stream(stream),
        })
    }

    fn encode(&self, value: &Value) -> Result<Bytes, String> {
        let empty = Value::Object(serde_json::Map::new());
        let value = if value.is_null() { &empty } else { value };
        proto::encode(self.answer_type, value).map(Bytes::from)
    }
}

fn respond<T>(body: T, echoed: HeaderMap) -> tonic::Response<T> {
    let mut resp = tonic::Response::new(body);
    *resp.metadata_mut() = tonic::metadata::MetadataMap::from_headers(echoed);
    resp
}

impl tonic::server::UnaryService<Bytes> for Rpc {
    type Response = Bytes;
    type Future = BoxFuture<'static, Result<tonic::Response<Bytes>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let rpc = self.clone();
        Box::pin(async move {
            match rpc.run(request).await.map_err(|e| status(&e))? {
                (Answer::Once(bytes), echoed) => Ok(respond(bytes, echoed)),
                (Answer::Stream(..), _) => Err(tonic::Status::internal("a unary method streamed")),
            }
        })
    }
}

impl tonic::server::ServerStreamingService<Bytes> for Rpc {
    type Response = Bytes;
    type ResponseStream = BoxStream<'static, Result<Bytes, tonic::Status>>;
    type Future = BoxFuture<'static, Result<tonic::Response<Self::ResponseStream>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let rpc = self.clone();
        Box::pin(async move {
            let (answer, echoed) = rpc.run(request).await.map_err(|e| status(&e))?;
            let Answer::Stream(stream) = answer else {
                return Err(tonic::Status::internal("a streaming method answered once"));
            };
            let events = stream.into_events().map(|event| match event {
                Ok(event) => Ok(Bytes::from(prost::Message::encode_to_vec(&model::event(
                    event,
                )))),
                Err(e) => Err(status(&e)),
            });
            Ok(respond(events.boxed(), echoed))
        })
    }
}

/// An A2A error as a gRPC status: the code of A2A's error table, the message, and a
/// google.rpc.ErrorInfo detail with its reason.
fn status(e: &A2aError) -> tonic::Status {
    use tonic::Code;
    let code = match e.http().1 {
        "NOT_FOUND" => Code::NotFound,
        "FAILED_PRECONDITION" => Code::FailedPrecondition,
        "INVALID_ARGUMENT" => Code::InvalidArgument,
        "UNIMPLEMENTED" => Code::Unimplemented,
        "UNAUTHENTICATED" => Code::Unauthenticated,
        "PERMISSION_DENIED" => Code::PermissionDenied,
        _ => Code::Internal,
    };
    let details = ErrorDetails::with_error_info(
        e.reason(),
        "a2a-protocol.org",
        std::collections::HashMap::new(),
    );
    tonic::Status::with_error_details(code, e.to_string(), details)
}

/// Messages as their protobuf bytes: the service's types are dynamic (`proto`), so tonic
/// frames and unframes bytes and the adapter encodes and decodes them.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

impl RawCodec {
    /// A task's message is a few hundred bytes: buffers of 1 KiB (tonic's default is
    /// 8 KiB, allocated per call and per direction) grow when a message is larger.
    fn buffers() -> BufferSettings {
        BufferSettings::new(1024, 32 * 1024)
    }
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        dst.put(item);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        RawCodec::buffers()
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Self::Error> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        RawCodec::buffers()
    }
}
