//! The files routes: `PUT|GET|DELETE B/sessions/{sid}/files/{path}`, streamed both ways,
//! with ETag and Range on reads, over `files`. Every refusal is a google.rpc.Status and
//! every transfer an audit record.

use crate::audit::Detail;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_util::io::ReaderStream;

use crate::audit::{self, Event};
use crate::auth::{Principal, Scope};
use crate::files::{self, Download, FileError, Found, RelPath};
use crate::state::{ApiError, AppState};

/// A download reads the file this much at a time (each read is a trip to a blocking thread).
const READ_CHUNK: usize = 512 * 1024;

#[derive(Debug, Deserialize)]
pub struct FilePath {
    sid: String,
    #[serde(default)]
    path: String,
}

impl IntoResponse for FileError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, Json(self.status_body())).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

/// An authentication refusal in the files routes' vocabulary.
fn refused(e: ApiError) -> FileError {
    let code = match e.status {
        StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
        StatusCode::FORBIDDEN => "PERMISSION_DENIED",
        StatusCode::TOO_MANY_REQUESTS => "RESOURCE_EXHAUSTED",
        StatusCode::BAD_REQUEST => "INVALID_ARGUMENT",
        _ => "INTERNAL",
    };
    FileError::new(e.status.as_u16(), code, code, e.message)
}

fn record(state: &AppState, event: Event, sid: &str, who: &Principal, detail: Detail) {
    state.audit.record(
        audit::Record::new(event, sid)
            .by(&who.token_id)
            .detail(detail),
    );
}

/// `PUT`: the body becomes the file (201 when it is new, 204 when it replaced one).
pub async fn put(
    State(state): State<AppState>,
    who: Result<Principal, ApiError>,
    Path(FilePath { sid, path }): Path<FilePath>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, FileError> {
    let who = who.map_err(refused)?;
    let path = RelPath::parse(&path)?;
    let root = files::session_root(
        &state.sessions,
        &who,
        &sid,
        Scope::Control,
        "writing a file",
    )
    .await?;
    let limit = state.files.max_file_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(FileError::too_large(limit));
    }
    let written = files::write(&root, &path, body.into_data_stream(), limit).await?;
    let shown = path.as_path().display().to_string();
    record(
        &state,
        Event::FileWritten,
        &sid,
        &who,
        Detail::file(&shown, written.bytes, "http"),
    );
    Ok(if written.replaced {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (
            StatusCode::CREATED,
            Json(wire::control::FileCreated {
                path: shown,
                size: written.bytes,
            }),
        )
            .into_response()
    })
}

/// `GET`: a file (with ETag and one byte range) or a directory's listing.
pub async fn get(
    State(state): State<AppState>,
    who: Result<Principal, ApiError>,
    Path(FilePath { sid, path }): Path<FilePath>,
    headers: HeaderMap,
) -> Result<Response, FileError> {
    let who = who.map_err(refused)?;
    let path = RelPath::parse(&path)?;
    let needed = match state.files.observer_downloads {
        true => Scope::Observe,
        false => Scope::Control,
    };
    let root = files::session_root(&state.sessions, &who, &sid, needed, "reading a file").await?;
    let shown = path.as_path().display().to_string();
    match files::read(&root, &path).await? {
        // A listing moves no file: it is not audited (the UI polls it).
        Found::Dir(list) => Ok(Json(list).into_response()),
        Found::File(file) => {
            let (resp, bytes) = download(file, &headers).await?;
            if bytes > 0 || resp.status() == StatusCode::OK {
                let detail = Detail::file(shown, bytes, "http");
                record(&state, Event::FileRead, &sid, &who, detail);
            }
            Ok(resp)
        }
    }
}

/// The file's answer to `headers` (If-None-Match, Range, If-Range), and the bytes it sends.
async fn download(mut d: Download, headers: &HeaderMap) -> Result<(Response, u64), FileError> {
    let etag = HeaderValue::from_str(&d.etag).expect("an ETag is ASCII");
    let header_is = |name, value: &str| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == value || t.trim() == "*"))
    };
    let mut builder = Response::builder()
        .header(header::ETAG, etag)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::LAST_MODIFIED, httpdate::fmt_http_date(d.modified));
    if header_is(header::IF_NONE_MATCH, &d.etag) {
        let resp = builder.status(StatusCode::NOT_MODIFIED).body(Body::empty());
        return Ok((resp.expect("a valid response"), 0));
    }
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .filter(|_| {
            !headers.contains_key(header::IF_RANGE) || header_is(header::IF_RANGE, &d.etag)
        });
    let (status, start, len) = match range {
        None => (StatusCode::OK, 0, d.len),
        Some(spec) => {
            let ranges = http_range_header::parse_range_header(spec)
                .and_then(|r| r.validate(d.len))
                .map_err(|_| FileError::range_not_satisfiable(d.len))?;
            match ranges.as_slice() {
                [one] => {
                    let content_range = format!("bytes {}-{}/{}", one.start(), one.end(), d.len);
                    builder = builder.header(header::CONTENT_RANGE, content_range);
                    let len = one.end() - one.start() + 1;
                    (StatusCode::PARTIAL_CONTENT, *one.start(), len)
                }
                // Several ranges: the whole file (a server may ignore Range).
                _ => (StatusCode::OK, 0, d.len),
            }
        }
    };
    if start > 0 {
        d.file
            .seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(|e| FileError::io(e, "the file"))?;
    }
    let body = Body::from_stream(ReaderStream::with_capacity(d.file.take(len), READ_CHUNK));
    let resp = builder
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, len)
        .body(body)
        .expect("a valid response");
    Ok((resp, len))
}

/// `DELETE`: removes a file (204).
pub async fn delete(
    State(state): State<AppState>,
    who: Result<Principal, ApiError>,
    Path(FilePath { sid, path }): Path<FilePath>,
) -> Result<StatusCode, FileError> {
    let who = who.map_err(refused)?;
    let path = RelPath::parse(&path)?;
    let root = files::session_root(
        &state.sessions,
        &who,
        &sid,
        Scope::Control,
        "deleting a file",
    )
    .await?;
    files::remove(&root, &path).await?;
    let shown = path.as_path().display().to_string();
    record(
        &state,
        Event::FileDeleted,
        &sid,
        &who,
        Detail::File {
            path: shown,
            bytes: None,
            via: None,
        },
    );
    Ok(StatusCode::NO_CONTENT)
}
