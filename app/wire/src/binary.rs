//! The frames that are not JSON envelopes: `PW1O`/`PW1I` under `pty-ws.v1.binary`, and PTY
//! output in the agentic-sandbox executor's shape, built without a JSON value in between.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

/// Binary PTY frames under `pty-ws.v1.binary` (binding §3.1): output is `PW1O`, the u64
/// big-endian session sequence, the stream id (1 = the PTY) and raw bytes; input is `PW1I`
/// and raw bytes.
pub const BINARY_OUTPUT_MAGIC: &[u8; 4] = b"PW1O";
pub const BINARY_INPUT_MAGIC: &[u8; 4] = b"PW1I";
pub const BINARY_STREAM_PTY: u8 = 1;

/// A `PW1O` output frame.
pub fn binary_output(sequence: u64, data: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(13 + data.len());
    frame.extend_from_slice(BINARY_OUTPUT_MAGIC);
    frame.extend_from_slice(&sequence.to_be_bytes());
    frame.push(BINARY_STREAM_PTY);
    frame.extend_from_slice(data);
    frame
}

/// One frame in the agentic-sandbox executor's shape: `{op, seq, ts, payload}`, the op a
/// top-level snake_case name.
pub fn executor_frame<P: Serialize>(op: &str, seq: Option<u64>, ts: &str, payload: P) -> Vec<u8> {
    #[derive(Serialize)]
    struct Frame<'a, P> {
        op: &'a str,
        seq: Option<u64>,
        ts: &'a str,
        payload: P,
    }
    let frame = Frame {
        op,
        seq,
        ts,
        payload,
    };
    serde_json::to_vec(&frame).expect("an executor frame serializes")
}

/// PTY output in the executor's shape: `{op: "output", seq, ts, payload: {data}}`, `data`
/// in base64, written directly (what `executor_frame` makes of it, byte for byte).
pub fn executor_output(sequence: u64, ts: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + base64_len(data));
    out.extend_from_slice(b"{\"op\":\"output\",\"seq\":");
    out.extend_from_slice(sequence.to_string().as_bytes());
    out.extend_from_slice(b",\"ts\":");
    json_string(&mut out, ts);
    out.extend_from_slice(b",\"payload\":{\"data\":\"");
    base64_onto(&mut out, data);
    out.extend_from_slice(b"\"}}");
    out
}

/// The spec's session envelope of PTY output (`SessionFrame::Output` on stdout), written
/// directly: what `server::encode_envelope` makes of it, byte for byte, without a copy of
/// the bytes or a scan of their base64 for characters to escape.
pub fn output_envelope(op: &str, id: &str, ts: &str, sequence: u64, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + base64_len(data));
    out.extend_from_slice(b"{\"op\":");
    json_string(&mut out, op);
    out.extend_from_slice(b",\"id\":");
    json_string(&mut out, id);
    out.extend_from_slice(b",\"ts\":");
    json_string(&mut out, ts);
    out.extend_from_slice(b",\"sequence\":");
    out.extend_from_slice(sequence.to_string().as_bytes());
    out.extend_from_slice(b",\"payload\":{\"kind\":\"Output\",\"stream\":\"stdout\",\"data\":\"");
    base64_onto(&mut out, data);
    out.extend_from_slice(b"\"}}");
    out
}

fn base64_len(data: &[u8]) -> usize {
    data.len().div_ceil(3) * 4
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("a string serializes into memory");
}

fn base64_onto(out: &mut Vec<u8>, data: &[u8]) {
    let start = out.len();
    out.resize(start + base64_len(data), 0);
    let written = STANDARD
        .encode_slice(data, &mut out[start..])
        .expect("the room is base64's length");
    out.truncate(start + written);
}

/// The sequence, stream id and bytes of a `PW1O` frame.
pub fn parse_binary_output(frame: &[u8]) -> Option<(u64, u8, &[u8])> {
    let rest = frame.strip_prefix(BINARY_OUTPUT_MAGIC)?;
    let (seq, rest) = rest.split_first_chunk::<8>()?;
    let (stream, data) = rest.split_first()?;
    Some((u64::from_be_bytes(*seq), *stream, data))
}

/// A `PW1I` input frame.
pub fn binary_input(data: &[u8]) -> Vec<u8> {
    [BINARY_INPUT_MAGIC.as_slice(), data].concat()
}
