//! `ptyhost files put|get|ls|rm SID PATH`: a session's files over a running server's
//! files routes, streamed from stdin (or --from) and to stdout (or --out).

use anyhow::{Context, Result};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio_util::io::ReaderStream;
use wire::control::{FileKind, FileList};

use crate::config::{FilesArgs, FilesOp};

pub async fn run(args: FilesArgs) -> Result<()> {
    super::init_tracing("warn");
    let http = reqwest::Client::new();
    let (session, path) = match &args.op {
        FilesOp::Put { session, path, .. }
        | FilesOp::Get { session, path, .. }
        | FilesOp::Ls { session, path, .. }
        | FilesOp::Rm { session, path } => (session, path),
    };
    let url = file_url(&args.server.url, session, path)?;
    let request = |method| {
        let r = http.request(method, url.clone());
        match &args.server.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    };
    match &args.op {
        FilesOp::Put { from, .. } => {
            let body = match from {
                Some(file) => {
                    let f = tokio::fs::File::open(file)
                        .await
                        .with_context(|| format!("opening {}", file.display()))?;
                    reqwest::Body::wrap_stream(ReaderStream::new(f))
                }
                None => reqwest::Body::wrap_stream(ReaderStream::new(tokio::io::stdin())),
            };
            checked(request(reqwest::Method::PUT).body(body).send().await?).await?;
        }
        FilesOp::Get { out, .. } => {
            let resp = checked(request(reqwest::Method::GET).send().await?).await?;
            let is_listing = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
            anyhow::ensure!(
                !is_listing,
                "{path} is a directory: list it with `files ls`"
            );
            let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin> = match out {
                Some(file) => Box::new(
                    tokio::fs::File::create(file)
                        .await
                        .with_context(|| format!("creating {}", file.display()))?,
                ),
                None => Box::new(tokio::io::stdout()),
            };
            let mut body = resp.bytes_stream();
            while let Some(chunk) = body.next().await {
                sink.write_all(&chunk?).await?;
            }
            sink.flush().await?;
        }
        FilesOp::Ls { json, .. } => {
            let resp = checked(request(reqwest::Method::GET).send().await?).await?;
            let list: FileList = resp
                .json()
                .await
                .with_context(|| format!("{path} is not a directory"))?;
            if *json {
                println!("{}", serde_json::to_string(&list)?);
            } else {
                for e in &list.entries {
                    let slash = if e.kind == FileKind::Dir { "/" } else { "" };
                    println!("{:04o}\t{}\t{}\t{}{slash}", e.mode, e.size, e.mtime, e.name);
                }
            }
        }
        FilesOp::Rm { .. } => {
            checked(request(reqwest::Method::DELETE).send().await?).await?;
        }
    }
    Ok(())
}

/// `BASE/sessions/{sid}/files/{path}`, each segment percent-encoded; a path the server
/// would refuse (`..`, absolute) is refused here, before it could be normalized away.
fn file_url(base: &str, session: &str, path: &str) -> Result<reqwest::Url> {
    let path = crate::files::RelPath::parse(path).map_err(|e| anyhow::anyhow!(e.message))?;
    let base = reqwest::Url::parse(base).with_context(|| format!("bad --url {base}"))?;
    path.route(&base, session)
        .ok_or_else(|| anyhow::anyhow!("--url {base} cannot be a base"))
}

/// The response when it succeeded, else its google.rpc.Status as the error.
async fn checked(resp: reqwest::Response) -> Result<reqwest::Response> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let error = &body["error"];
    anyhow::bail!(
        "{} {}: {}",
        status.as_u16(),
        error["status"].as_str().unwrap_or("UNKNOWN"),
        error["message"].as_str().unwrap_or("no message")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_url_encodes_each_segment_under_the_base() {
        let u = file_url("http://h:1/agents/local/", "s1", "a dir/x#1.txt").unwrap();
        assert_eq!(
            u.as_str(),
            "http://h:1/agents/local/sessions/s1/files/a%20dir/x%231.txt"
        );
        let u = file_url("http://h:1", "s1", "").unwrap();
        assert_eq!(u.as_str(), "http://h:1/sessions/s1/files");
        assert!(file_url("http://h:1", "s1", "a/../../etc").is_err());
    }
}
