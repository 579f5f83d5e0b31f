//! The two variants of the STDIO binding as codecs of one session loop: `stdio-json`
//! (JSON-RPC 2.0 in `Content-Length` frames) and `stdio-proto` (protobuf bodies routed by
//! `A2A-*` headers).

use serde_json::Value;
use tokio::io::AsyncRead;
use wire::a2a::StreamResponse;

use super::{Codec, Out, Read, exit, stamp};
use crate::a2a::{A2aError, Version, v03};
use crate::bindings::proto;
use crate::framing::{FrameReader, frame_with};

/// `stdio-json`: JSON-RPC 2.0 requests, answers and errors; a stream's events are results
/// under the request's id, then `streamEnd`.
#[derive(Clone)]
pub(super) struct JsonCodec(pub(super) Out);

impl Codec for JsonCodec {
    type Id = Value;
    type Item = Value;

    fn key(id: &Value) -> String {
        id.to_string()
    }

    fn read<R: AsyncRead + Unpin>(&self, _: &FrameReader<R>, body: &[u8]) -> Read<Value> {
        let out = &self.0;
        let msg: Value = match crate::json::parse_unique(body) {
            Ok(v) => v,
            Err(e) if e.is_data() => {
                let e = A2aError::InvalidRequest(format!("the request is ambiguous: {e}"));
                out.error(&Value::Null, &e);
                return Read::Answered;
            }
            Err(e) => {
                out.raw_error(&Value::Null, -32700, &format!("parse error: {e}"));
                return Read::Exit(exit::PROTOCOL);
            }
        };
        if let Some(kind) = msg.get("type").and_then(Value::as_str) {
            if kind == "heartbeat" {
                return Read::Answered;
            }
            tracing::error!(kind, "a control frame out of place");
            return Read::Exit(exit::PROTOCOL);
        }
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        if msg.get("cancelStream") == Some(&Value::Bool(true)) {
            return Read::Cancel(id);
        }
        let method = msg.get("method").and_then(Value::as_str);
        let (Some(method), true, true) = (
            method,
            msg.get("jsonrpc").and_then(Value::as_str) == Some("2.0"),
            id.is_string() || id.is_number(),
        ) else {
            let refusal = "not a JSON-RPC 2.0 request with an id and a method";
            out.error(&id, &A2aError::InvalidRequest(refusal.into()));
            return Read::Answered;
        };
        if method == "system/shutdown" {
            return Read::Shutdown(id);
        }
        Read::Request {
            streaming: matches!(method, "SendStreamingMessage" | "SubscribeToTask"),
            method: method.to_owned(),
            params: msg.get("params").cloned().unwrap_or_else(empty),
            id,
        }
    }

    fn too_large(&self) {
        self.0.raw_error(&Value::Null, -32000, "Message too large");
    }

    fn answer(&self, id: &Value, _: &str, result: Value) {
        self.0.result(id, result);
    }

    fn shape(&self, _: &str, version: Version, event: StreamResponse) -> Result<Value, A2aError> {
        Ok(match version {
            Version::V1 => serde_json::to_value(event).map_err(|_| A2aError::Internal)?,
            Version::V03 => v03::event(&event),
        })
    }

    fn event(&self, id: &Value, item: Value) {
        self.0.result(id, item);
    }

    fn end(&self, id: &Value) {
        self.0.stream_end(id);
    }

    fn error(&self, id: &Value, e: &A2aError) {
        self.0.error(id, e);
    }

    fn shut_down(&self, id: &Value) {
        self.0.result(id, empty());
    }
}

/// `stdio-proto`: the same operations as `stdio-json`, with each request's kind, id and
/// method in `A2A-Kind` / `A2A-Id` / `A2A-Method` and protobuf bodies (proto/a2a.proto).
/// Control frames (heartbeat) stay JSON and carry no `A2A-Kind`.
#[derive(Clone)]
pub(super) struct ProtoCodec(pub(super) Out);

impl ProtoCodec {
    fn send(&self, kind: &str, id: &str, body: &[u8]) {
        let headers = [("A2A-Kind", kind), ("A2A-Id", id)];
        let _ = (self.0.tx).send(frame_with("application/x-protobuf", &headers, body));
    }

    /// A value of the method's answer type, stamped, in protobuf.
    fn encode(&self, method: &str, mut v: Value) -> Result<Vec<u8>, A2aError> {
        let answer_type = proto::method_types(method).map_or("", |(_, answer, _)| answer);
        stamp(&mut v, &self.0.mark);
        proto::encode(answer_type, &v).map_err(|e| A2aError::from(anyhow::anyhow!(e)))
    }
}

impl Codec for ProtoCodec {
    type Id = String;
    type Item = Vec<u8>;

    fn key(id: &String) -> String {
        id.clone()
    }

    fn read<R: AsyncRead + Unpin>(&self, reader: &FrameReader<R>, body: &[u8]) -> Read<String> {
        let id = reader.header("A2A-Id").unwrap_or("").to_owned();
        let method = reader.header("A2A-Method").unwrap_or("").to_owned();
        match reader.header("A2A-Kind") {
            None => {
                return match serde_json::from_slice::<Value>(body) {
                    Ok(v) if v["type"] == "heartbeat" => Read::Answered,
                    _ => {
                        tracing::error!("a frame without A2A-Kind that is no heartbeat");
                        Read::Exit(exit::PROTOCOL)
                    }
                };
            }
            Some("cancel") => return Read::Cancel(id),
            Some("request") => {}
            Some(other) => {
                tracing::error!(kind = other, "an A2A-Kind a parent does not send");
                return Read::Exit(exit::PROTOCOL);
            }
        }
        let Some((request_type, _, streaming)) = proto::method_types(&method) else {
            self.error(
                &id,
                &A2aError::MethodNotFound(format!("no method {method:?}")),
            );
            return Read::Answered;
        };
        let params = match proto::decode(request_type, body) {
            Ok(p) => p,
            Err(e) => {
                self.error(&id, &A2aError::InvalidParams(e));
                return Read::Answered;
            }
        };
        if method == "system/shutdown" {
            return Read::Shutdown(id);
        }
        Read::Request {
            id,
            method,
            params,
            streaming,
        }
    }

    fn too_large(&self) {
        self.send("error", "", &proto::error(-32000, "Message too large", ""));
    }

    fn answer(&self, id: &String, method: &str, result: Value) {
        match self.encode(method, result) {
            Ok(bytes) => self.send("response", id, &bytes),
            Err(e) => self.error(id, &e),
        }
    }

    fn shape(&self, method: &str, _: Version, event: StreamResponse) -> Result<Vec<u8>, A2aError> {
        self.encode(
            method,
            serde_json::to_value(event).map_err(|_| A2aError::Internal)?,
        )
    }

    fn event(&self, id: &String, item: Vec<u8>) {
        self.send("stream", id, &item);
    }

    fn end(&self, id: &String) {
        self.send("streamEnd", id, &[]);
    }

    fn error(&self, id: &String, e: &A2aError) {
        self.send(
            "error",
            id,
            &proto::error(e.jsonrpc_code(), &e.to_string(), e.reason()),
        );
    }

    fn shut_down(&self, id: &String) {
        self.send("response", id, &[]);
    }
}

/// `{}`: the params of a request without them, and the answer to `system/shutdown`.
fn empty() -> Value {
    Value::Object(serde_json::Map::new())
}
