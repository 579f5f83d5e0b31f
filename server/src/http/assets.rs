//! The web UI's files: the site `cargo xtask build` wrote, embedded in the binary at build
//! time, so that ptyhost serves its UI from any directory; or, for UI work, the files under
//! `--site-root` (e.g. `cargo leptos watch`'s output).
//!
//! Embedded files go out precompressed (brotli or gzip, as the request accepts) with a
//! strong ETag; the hashed bundle (`pkg/ptyhost.{hash}.*`) is cached for a year, everything
//! else is revalidated.

use std::path::PathBuf;

use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

#[derive(rust_embed::Embed)]
#[folder = "$PTYHOST_SITE_DIR"]
struct Site;

/// The bundle's base name: `ptyhost` and the content hash `cargo xtask build` put in it.
const BUNDLE: &str = "ptyhost";

pub enum Assets {
    Embedded,
    Dir(PathBuf),
}

impl Assets {
    /// `--site-root` when given, else what the binary embeds.
    pub fn new(site_root: Option<PathBuf>) -> Assets {
        match site_root {
            Some(dir) => Assets::Dir(dir),
            None => {
                if Site::iter().next().is_none() {
                    tracing::warn!(
                        "this binary embeds no web UI (it was built without `cargo xtask build`); \
                         the pages will load without their scripts"
                    );
                }
                Assets::Embedded
            }
        }
    }

    /// The name the page loads the bundle under: `ptyhost.{hash}` for an xtask build,
    /// `ptyhost` for cargo-leptos's unhashed output.
    pub fn output_name(&self) -> String {
        let names: Vec<String> = match self {
            Assets::Embedded => Site::iter().map(|n| n.into_owned()).collect(),
            Assets::Dir(dir) => std::fs::read_dir(dir.join("pkg"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| format!("pkg/{}", e.file_name().to_string_lossy()))
                .collect(),
        };
        names
            .iter()
            .find_map(|n| bundle_hash(n.strip_prefix("pkg/")?.strip_suffix(".js")?))
            .map_or_else(|| BUNDLE.to_owned(), |hash| format!("{BUNDLE}.{hash}"))
    }

    pub fn site_root(&self) -> String {
        match self {
            Assets::Embedded => String::new(),
            Assets::Dir(dir) => dir.display().to_string(),
        }
    }

    /// The file a GET or HEAD asks for, or `None` (then the app renders the page).
    pub async fn serve(&self, req: &Parts) -> Option<Response> {
        if req.method != Method::GET && req.method != Method::HEAD {
            return None;
        }
        match self {
            Assets::Embedded => embedded(req),
            Assets::Dir(dir) => {
                let req = Request::from_parts(req.clone(), Body::empty());
                let service = tower_http::services::ServeDir::new(dir)
                    .precompressed_br()
                    .precompressed_gzip();
                let resp = match tower::ServiceExt::oneshot(service, req).await {
                    Ok(resp) => resp,
                    Err(never) => match never {},
                };
                (resp.status() != StatusCode::NOT_FOUND).then(|| resp.map(Body::new))
            }
        }
    }
}

/// `hash` of `ptyhost.{hash}` (16 hex digits), the only names that never change content.
fn bundle_hash(stem: &str) -> Option<&str> {
    let hash = stem.strip_prefix(BUNDLE)?.strip_prefix('.')?;
    let hash = hash.strip_suffix("_bg").unwrap_or(hash);
    (hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hash)
}

fn embedded(req: &Parts) -> Option<Response> {
    let path = req.uri.path().trim_start_matches('/');
    let file = Site::get(path)?;
    let (encoding, body) = [("br", ".br"), ("gzip", ".gz")]
        .into_iter()
        .filter(|(coding, _)| accepts(&req.headers, coding))
        .find_map(|(coding, suffix)| Some((Some(coding), Site::get(&format!("{path}{suffix}"))?)))
        .unwrap_or((None, file.clone()));
    let hash = file.metadata.sha256_hash();
    let etag = format!(
        "\"{}{}\"",
        hash[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        encoding.map(|e| format!("-{e}")).unwrap_or_default()
    );
    let immutable = path
        .strip_prefix("pkg/")
        .and_then(|name| name.rsplit_once('.'))
        .is_some_and(|(stem, _)| bundle_hash(stem).is_some());
    let mut headers = HeaderMap::new();
    let put = |headers: &mut HeaderMap, name, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(name, v);
        }
    };
    put(&mut headers, header::CONTENT_TYPE, file.metadata.mimetype());
    put(&mut headers, header::ETAG, &etag);
    put(&mut headers, header::VARY, "accept-encoding");
    put(
        &mut headers,
        header::CACHE_CONTROL,
        if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        },
    );
    if let Some(coding) = encoding {
        put(&mut headers, header::CONTENT_ENCODING, coding);
    }
    let fresh = req
        .headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if fresh {
        return Some((StatusCode::NOT_MODIFIED, headers).into_response());
    }
    let body = if req.method == Method::HEAD {
        Body::empty()
    } else {
        // Embedded files are 'static: sent without a copy.
        match body.data {
            std::borrow::Cow::Borrowed(bytes) => Body::from(bytes::Bytes::from_static(bytes)),
            std::borrow::Cow::Owned(bytes) => Body::from(bytes),
        }
    };
    Some((headers, body).into_response())
}

/// Whether `Accept-Encoding` takes `coding` (listed, or `*`, with a non-zero q).
fn accepts(headers: &HeaderMap, coding: &str) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or("").trim();
            let zero = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (name.eq_ignore_ascii_case(coding) || name == "*") && !zero
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).unwrap(),
        );
        h
    }

    #[test]
    fn accept_encoding_is_read_with_its_q_values() {
        assert!(accepts(&with("gzip, deflate, br, zstd"), "br"));
        assert!(accepts(&with("gzip;q=0.5"), "gzip"));
        assert!(!accepts(&with("gzip;q=0, br"), "gzip"));
        assert!(accepts(&with("*"), "br"));
        assert!(!accepts(&with("identity"), "gzip"));
        assert!(!accepts(&HeaderMap::new(), "gzip"));
    }

    #[test]
    fn only_the_hashed_bundle_counts_as_hashed() {
        assert_eq!(
            bundle_hash("ptyhost.0123456789abcdef"),
            Some("0123456789abcdef")
        );
        assert_eq!(
            bundle_hash("ptyhost.0123456789abcdef_bg"),
            Some("0123456789abcdef")
        );
        assert_eq!(bundle_hash("ptyhost"), None);
        assert_eq!(bundle_hash("ptyhost.css"), None);
        assert_eq!(bundle_hash("ptyhost.0123456789abcdeg"), None);
    }
}
