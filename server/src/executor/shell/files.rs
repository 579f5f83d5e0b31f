//! A message's files. Its FileParts (raw bytes, or a URL under `--fetch-file-urls`) are
//! written into the session's working directory under their filenames before its command
//! runs, and the history keeps a reference in place of the bytes. The files a data part
//! names as `outputs` come back as artifacts once the command has exited: their bytes up
//! to `INLINE_MAX`, else a reference.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use wire::a2a::{Artifact, Content, Message, Part};

use super::command_data_parts;
use crate::audit::{self, Event};
use crate::executor::ExecutorRefusal;
use crate::files::{self, FileError, Found, RelPath, Root};
use crate::sessions::SessionHandle;

/// An output file this large or smaller travels in its artifact; a larger one by reference.
pub const INLINE_MAX: u64 = 1024 * 1024;

/// What the shell executor may do with files, and how it names them.
#[derive(Debug, Clone)]
pub struct FileAccess {
    pub settings: files::FileSettings,
    /// The agent's HTTP base (`{public_url}/agents/{instance_id}`): references are URLs of
    /// its files routes. Without one (STDIO) they are `file:` URLs.
    pub base_url: Option<String>,
}

impl FileAccess {
    /// Where a client finds `rel` of session `sid`, whose working directory is `dir`.
    fn reference(&self, sid: &str, dir: &Path, rel: &RelPath) -> String {
        match &self.base_url {
            Some(base) => {
                let base = reqwest::Url::parse(base).expect("the base URL parses");
                rel.route(&base, sid).unwrap_or(base).to_string()
            }
            None => reqwest::Url::from_file_path(dir.join(rel.as_path())).map_or_else(
                |()| dir.join(rel.as_path()).display().to_string(),
                |u| u.to_string(),
            ),
        }
    }
}

/// A refused file in an executor's words: the client's mistake, or the server's.
fn refused(e: FileError) -> ExecutorRefusal {
    match e.status {
        400..=499 => ExecutorRefusal::InvalidParams(e.message),
        _ => ExecutorRefusal::Failed(anyhow::anyhow!(e.message)),
    }
}

async fn working_dir(session: &SessionHandle) -> Result<(PathBuf, Root), ExecutorRefusal> {
    let dir = session.working_dir().await.ok_or_else(|| {
        ExecutorRefusal::Failed(anyhow::anyhow!(
            "the working directory of session {} is unknown",
            session.id
        ))
    })?;
    let root = Root::open(&dir).map_err(refused)?;
    Ok((dir, root))
}

/// A file for the working directory: raw bytes or a URL, and not an A202 object (those
/// travel as raw parts too, and the task service takes them).
fn is_file(part: &Part) -> bool {
    matches!(part.content, Content::Raw(_) | Content::Url(_))
        && part.media_type.as_deref() != Some(crate::a202::MEDIA_TYPE)
}

fn file_name(part: &Part) -> Result<RelPath, ExecutorRefusal> {
    let name = part.filename.as_deref().unwrap_or("");
    let rel = RelPath::parse(name).map_err(refused)?;
    if rel.as_path().as_os_str().is_empty() {
        return Err(ExecutorRefusal::InvalidParams(
            "a file part needs a filename (where it goes in the working directory)".into(),
        ));
    }
    Ok(rel)
}

/// Refuses the message's file parts that could not be written whatever the session: no
/// filename, one that leaves the working directory, a URL this server does not fetch.
pub(super) fn check_inputs(access: &FileAccess, message: &Message) -> Result<(), ExecutorRefusal> {
    for part in message.parts.iter().filter(|p| is_file(p)) {
        match part.content {
            Content::Raw(_) => {}
            Content::Url(_) if access.settings.fetch_urls => {}
            Content::Url(_) => return Err(ExecutorRefusal::InvalidParams(NO_FETCH.into())),
            _ => continue,
        }
        file_name(part)?;
    }
    Ok(())
}

const NO_FETCH: &str =
    "a file part with a url needs a server started with --fetch-file-urls; send its bytes instead";

/// Writes the message's file parts into the session's working directory; each raw part's
/// bytes are replaced by a reference to where they went.
pub(super) async fn take_inputs(
    access: &FileAccess,
    session: &SessionHandle,
    audit: &audit::Audit,
    message: &mut Message,
) -> Result<(), ExecutorRefusal> {
    let limit = access.settings.max_file_bytes;
    let mut root = None;
    for part in message.parts.iter_mut().filter(|p| is_file(p)) {
        let rel = file_name(part)?;
        if root.is_none() {
            root = Some(working_dir(session).await?);
        }
        let (dir, root) = root.as_ref().expect("opened above");
        let written = match &part.content {
            Content::Raw(bytes) => {
                let body = futures_util::stream::once(async {
                    Ok::<_, std::io::Error>(Bytes::from(bytes.clone()))
                });
                files::write(root, &rel, body, limit).await
            }
            Content::Url(url) if access.settings.fetch_urls => {
                let body = fetch(url).await?;
                files::write(root, &rel, body, limit).await
            }
            _ => return Err(ExecutorRefusal::InvalidParams(NO_FETCH.into())),
        }
        .map_err(refused)?;
        audit.record(audit::Record::new(Event::FileWritten, &session.id).detail(
            audit::Detail::file(rel.as_path().display().to_string(), written.bytes, "a2a"),
        ));
        if matches!(part.content, Content::Raw(_)) {
            part.content = Content::Url(access.reference(&session.id, dir, &rel));
        }
    }
    Ok(())
}

/// The body of `url` (http or https), as a stream.
async fn fetch(
    url: &str,
) -> Result<impl futures_util::Stream<Item = Result<Bytes, reqwest::Error>>, ExecutorRefusal> {
    let invalid = |m: String| ExecutorRefusal::InvalidParams(m);
    let parsed = reqwest::Url::parse(url).map_err(|e| invalid(format!("url {url:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "url {url:?}: only http and https are fetched"
        )));
    }
    let resp = reqwest::get(parsed)
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| invalid(format!("fetching {url:?} failed: {e}")))?;
    Ok(resp.bytes_stream())
}

/// The files a message's data part names as `outputs` (relative to the working directory).
pub(super) fn requested_outputs(message: &Message) -> Result<Vec<RelPath>, ExecutorRefusal> {
    let mut out = Vec::new();
    for data in command_data_parts(message) {
        let Some(outputs) = data.get("outputs") else {
            continue;
        };
        let names = outputs
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<&str>>>());
        let Some(names) = names else {
            return Err(ExecutorRefusal::InvalidParams(
                "outputs must be an array of paths".into(),
            ));
        };
        for name in names {
            let rel = RelPath::parse(name).map_err(refused)?;
            if rel.as_path().as_os_str().is_empty() {
                return Err(ExecutorRefusal::InvalidParams(
                    "an output names a file, not \"\"".into(),
                ));
            }
            out.push(rel);
        }
    }
    Ok(out)
}

/// The output files as artifacts (`file:{path}`), and the paths that could not be read
/// with why.
pub(super) async fn output_artifacts(
    access: &FileAccess,
    session: &SessionHandle,
    audit: &audit::Audit,
    outputs: &[RelPath],
) -> (Vec<Artifact>, Vec<String>) {
    let (mut artifacts, mut missing) = (Vec::new(), Vec::new());
    if outputs.is_empty() {
        return (artifacts, missing);
    }
    let (dir, root) = match working_dir(session).await {
        Ok(opened) => opened,
        Err(e) => {
            missing.extend(
                outputs
                    .iter()
                    .map(|o| format!("{}: {e}", o.as_path().display())),
            );
            return (artifacts, missing);
        }
    };
    for rel in outputs {
        let shown = rel.as_path().display().to_string();
        let part = match files::read(&root, rel).await {
            Ok(Found::File(mut d)) if d.len <= INLINE_MAX => {
                let mut bytes = Vec::with_capacity(d.len as usize);
                match d.file.read_to_end(&mut bytes).await {
                    Ok(_) => Content::Raw(bytes),
                    Err(e) => {
                        missing.push(format!("{shown}: {e}"));
                        continue;
                    }
                }
            }
            Ok(Found::File(_)) => Content::Url(access.reference(&session.id, &dir, rel)),
            Ok(Found::Dir(_)) => {
                missing.push(format!("{shown}: a directory"));
                continue;
            }
            Err(e) => {
                missing.push(e.message);
                continue;
            }
        };
        if let Content::Raw(b) = &part {
            audit.record(
                audit::Record::new(Event::FileRead, &session.id).detail(audit::Detail::file(
                    &shown,
                    b.len() as u64,
                    "a2a",
                )),
            );
        }
        let media_type = mime_guess::from_path(rel.as_path())
            .first_or_octet_stream()
            .essence_str()
            .to_owned();
        artifacts.push(Artifact {
            artifact_id: format!("file:{shown}"),
            name: Some(shown.clone()),
            description: Some(format!("the output file {shown}")),
            parts: vec![Part {
                content: part,
                media_type: Some(media_type),
                filename: Some(shown),
                metadata: None,
            }],
            metadata: None,
        });
    }
    (artifacts, missing)
}
