//! The STDIO binding's frames (the draft A2A custom binding §2): `Content-Length` headers
//! with strict parsing, then the body. The agent (`bindings::stdio`) and the client
//! (`client::stdio`) both read and write them.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

pub use wire::stdio::{VARIANT_JSON, VARIANT_PROTO};
const MAX_HEADER_BYTES: usize = 8 * 1024;

/// One read from the parent.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Frame(Vec<u8>),
    /// Stdin ended between frames.
    Eof,
    TooLarge(usize),
    /// Broken framing: the session cannot go on.
    Malformed(String),
}

/// Reads `Content-Length` frames with strict headers.
pub struct FrameReader<R> {
    inner: BufReader<R>,
    max_body: usize,
    /// The last frame's headers, names lowercased.
    headers: Vec<(String, String)>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, max_body: usize) -> FrameReader<R> {
        FrameReader {
            inner: BufReader::new(inner),
            max_body,
            headers: Vec::new(),
        }
    }

    /// A header of the last frame read.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub async fn next(&mut self) -> Incoming {
        self.headers.clear();
        let mut length = None;
        let mut header_bytes = 0;
        let mut first = true;
        loop {
            let mut line = Vec::new();
            let limit = (MAX_HEADER_BYTES - header_bytes + 1) as u64;
            let read = (&mut self.inner)
                .take(limit)
                .read_until(b'\n', &mut line)
                .await;
            let n = match read {
                Ok(n) => n,
                Err(e) => return Incoming::Malformed(format!("reading stdin: {e}")),
            };
            if n == 0 {
                return if first {
                    Incoming::Eof
                } else {
                    Incoming::Malformed("stdin ended inside a frame header".into())
                };
            }
            first = false;
            header_bytes += n;
            if header_bytes > MAX_HEADER_BYTES {
                return Incoming::Malformed(format!(
                    "a header block over {MAX_HEADER_BYTES} bytes"
                ));
            }
            let Some(line) = line.strip_suffix(b"\r\n") else {
                return Incoming::Malformed("a header line must end with CRLF".into());
            };
            if line.is_empty() {
                break;
            }
            let Ok(line) = std::str::from_utf8(line) else {
                return Incoming::Malformed("a header line is not UTF-8".into());
            };
            if line.starts_with([' ', '\t']) {
                return Incoming::Malformed("folded header lines are not allowed".into());
            }
            let Some((name, value)) = line.split_once(':') else {
                return Incoming::Malformed(format!("header line without a colon: {line:?}"));
            };
            if name.is_empty() || name.ends_with([' ', '\t']) {
                return Incoming::Malformed(format!("bad header name {name:?}"));
            }
            self.headers
                .push((name.to_ascii_lowercase(), value.trim().to_owned()));
            if name.eq_ignore_ascii_case("content-length") {
                let value = value.trim();
                if length.is_some()
                    || value.is_empty()
                    || !value.bytes().all(|b| b.is_ascii_digit())
                {
                    return Incoming::Malformed(format!("bad Content-Length {value:?}"));
                }
                length = value.parse::<usize>().ok().or(Some(usize::MAX));
            }
        }
        let Some(length) = length else {
            return Incoming::Malformed("a frame without Content-Length".into());
        };
        if length > self.max_body {
            return Incoming::TooLarge(length);
        }
        let mut body = vec![0; length];
        match self.inner.read_exact(&mut body).await {
            Ok(_) => Incoming::Frame(body),
            Err(_) => Incoming::Malformed("stdin ended inside a frame body".into()),
        }
    }
}

/// Encodes one JSON frame.
pub fn frame(body: &[u8]) -> Vec<u8> {
    frame_with("application/json", &[], body)
}

/// Encodes one frame with more headers (`stdio-proto` routes in them).
pub fn frame_with(content_type: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!(
        "Content-Length: {}\r\nContent-Type: {content_type}\r\n",
        body.len()
    );
    for (name, value) in headers {
        // A value never carries a line break into the header block.
        if !value.contains(['\r', '\n']) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}
