//! Files in and out of a session's working directory. Every path is resolved beneath that
//! directory by cap-std (`openat2` with `RESOLVE_BENEATH` on Linux), so no `..`, absolute
//! path or symlink leads out of it, not even a symlink swapped in while a transfer runs: a
//! transfer holds the directory it resolved, not its name. Knows no HTTP.

mod error;

use crate::sessions::SessionId;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use cap_std::fs::{Dir, MetadataExt, OpenOptions};
use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;
use wire::control::{FileEntry, FileKind, FileList};

pub use error::FileError;

/// What `serve` allows.
#[derive(Debug, Clone)]
pub struct FileSettings {
    /// The largest file a transfer may write.
    pub max_file_bytes: u64,
    /// Observers (`pty:observe`) may read files, not only controllers.
    pub observer_downloads: bool,
    /// A message's FilePart may name a URL for ptyhost to fetch.
    pub fetch_urls: bool,
}

/// A path relative to the working directory: no root, no `..`, no NUL; `.` components and
/// repeated slashes dropped. Empty names the directory itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath(PathBuf);

impl RelPath {
    pub fn parse(path: &str) -> Result<RelPath, FileError> {
        if path.contains('\0') {
            return Err(FileError::invalid_path(path, "it contains a NUL byte"));
        }
        let mut rel = PathBuf::new();
        for c in Path::new(path).components() {
            match c {
                Component::Normal(name) => rel.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(FileError::invalid_path(path, "`..` is not allowed"));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(FileError::invalid_path(
                        path,
                        "it must be relative to the session's working directory",
                    ));
                }
            }
        }
        Ok(RelPath(rel))
    }

    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// The directory a file goes in and its name; `None` for the directory itself.
    fn split(&self) -> Option<(&Path, OsString)> {
        let name = self.0.file_name()?.to_owned();
        Some((here(self.0.parent().unwrap_or(Path::new(""))), name))
    }

    /// Where the files routes serve this path of session `sid` under the HTTP base `base`:
    /// `{base}/sessions/{sid}/files/{path}`, each segment percent-encoded (`None` for a base
    /// that cannot have a path).
    pub fn route(&self, base: &reqwest::Url, sid: &str) -> Option<reqwest::Url> {
        let mut url = base.clone();
        url.path_segments_mut()
            .ok()?
            .pop_if_empty()
            .extend(["sessions", sid, "files"])
            .extend(self.0.iter().map(|c| c.to_string_lossy()));
        Some(url)
    }

    /// The path as cap-std opens it: `.` for the directory itself.
    fn at(&self) -> &Path {
        here(&self.0)
    }

    pub fn display(&self) -> String {
        self.0.display().to_string()
    }
}

fn here(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

/// A session's working directory, opened: the root every path of a request resolves under.
#[derive(Clone)]
pub struct Root(Arc<Dir>);

impl Root {
    pub fn open(dir: &Path) -> Result<Root, FileError> {
        Dir::open_ambient_dir(dir, cap_std::ambient_authority())
            .map(|d| Root(Arc::new(d)))
            .map_err(|e| FileError::io(e, &dir.display().to_string()))
    }
}

/// The session's working directory, opened, once `who` may do `what` there (`needed`): a
/// session the caller may not see is not found.
pub async fn session_root(
    sessions: &crate::sessions::Sessions,
    who: &crate::auth::Principal,
    sid: &str,
    needed: crate::auth::Scope,
    what: &str,
) -> Result<Root, FileError> {
    let not_found = || FileError::not_found(format!("no session {sid}"));
    if !who.sees_session(sid) {
        return Err(not_found());
    }
    if who.scope < needed {
        return Err(FileError::permission_denied(format!(
            "{what} needs {needed}; the token has {}",
            who.scope
        )));
    }
    let view = sessions
        .view(&SessionId::from(sid))
        .await
        .map_err(|e| FileError::internal(&e))?
        .ok_or_else(not_found)?;
    let dir = sessions
        .working_dir(&view)
        .await
        .ok_or_else(|| FileError::not_found(format!("session {sid} has no working directory")))?;
    Root::open(&dir)
}

/// A file opened for reading.
pub struct Download {
    pub file: tokio::fs::File,
    pub len: u64,
    pub modified: SystemTime,
    /// Changes whenever the file's size or modification time does.
    pub etag: String,
}

pub enum Found {
    File(Download),
    Dir(FileList),
}

/// Runs a filesystem call off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
}

/// Streams `body` into `path`, creating its parent directories. The bytes go to a hidden
/// file beside it, renamed over `path` only once all of them are written and synced: a
/// reader never sees half a file, and a transfer that fails or is cut leaves nothing.
pub async fn write<S, E>(
    root: &Root,
    path: &RelPath,
    body: S,
    limit: u64,
) -> Result<Written, FileError>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::fmt::Display,
{
    let shown = path.display();
    let Some((parent, name)) = path.split() else {
        return Err(FileError::is_directory(&shown));
    };
    let (root_dir, parent) = (root.0.clone(), parent.to_owned());
    let dir = blocking(move || match root_dir.open_dir(&parent) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            root_dir.create_dir_all(&parent)?;
            root_dir.open_dir(&parent)
        }
        opened => opened,
    })
    .await
    .map_err(|e| FileError::io(e, &shown))?;
    let mut partial = Partial::create(dir, name)
        .await
        .map_err(|e| FileError::io(e, &shown))?;
    let mut written = 0u64;
    let mut body = std::pin::pin!(body);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| FileError::body(&e.to_string()))?;
        written += chunk.len() as u64;
        if written > limit {
            return Err(FileError::too_large(limit));
        }
        partial
            .file
            .write_all(&chunk)
            .await
            .map_err(|e| FileError::io(e, &shown))?;
    }
    let replaced = partial
        .commit()
        .await
        .map_err(|e| FileError::io(e, &shown))?;
    Ok(Written {
        bytes: written,
        replaced,
    })
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Written {
    pub bytes: u64,
    /// A file of that name was there before.
    pub replaced: bool,
}

/// A file being written under a hidden name; removed when dropped before `commit`.
struct Partial {
    dir: Arc<Dir>,
    temp: String,
    name: OsString,
    file: tokio::fs::File,
    committed: bool,
}

impl Partial {
    async fn create(dir: Dir, name: OsString) -> io::Result<Partial> {
        let dir = Arc::new(dir);
        let temp = format!(".ptyhost-upload-{}", uuid::Uuid::now_v7());
        let (d, t) = (dir.clone(), temp.clone());
        let file =
            blocking(move || d.open_with(&t, OpenOptions::new().write(true).create_new(true)))
                .await?;
        Ok(Partial {
            dir,
            temp,
            name,
            file: tokio::fs::File::from_std(file.into_std()),
            committed: false,
        })
    }

    /// Renames the file into place; whether it replaced one.
    async fn commit(&mut self) -> io::Result<bool> {
        self.file.flush().await?;
        self.file.sync_all().await?;
        let (dir, temp, name) = (self.dir.clone(), self.temp.clone(), self.name.clone());
        let replaced = blocking(move || {
            let before = dir.symlink_metadata(&name).ok();
            if before.as_ref().is_some_and(|m| m.is_dir()) {
                return Err(io::Error::from(io::ErrorKind::IsADirectory));
            }
            dir.rename(&temp, &dir, &name)?;
            Ok(before.is_some())
        })
        .await?;
        self.committed = true;
        Ok(replaced)
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.committed {
            let _ = self.dir.remove_file(&self.temp);
        }
    }
}

/// Opens a file for reading, or lists a directory.
pub async fn read(root: &Root, path: &RelPath) -> Result<Found, FileError> {
    let shown = path.display();
    let (root, at) = (root.0.clone(), path.at().to_owned());
    blocking(move || {
        let at = at.as_path();
        let meta = root.metadata(at)?;
        if meta.is_dir() {
            return list(&root.open_dir(at)?).map(Found::Dir);
        }
        let file = root.open(at)?;
        let meta = file.metadata()?;
        let modified = meta.modified()?.into_std();
        let nanos = modified
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Ok(Found::File(Download {
            file: tokio::fs::File::from_std(file.into_std()),
            len: meta.len(),
            modified,
            etag: format!("\"{:x}-{nanos:x}\"", meta.len()),
        }))
    })
    .await
    .map_err(|e| FileError::io(e, &shown))
}

fn list(dir: &Dir) -> io::Result<FileList> {
    let mut entries = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = dir.symlink_metadata(entry.file_name()) else {
            continue;
        };
        let kind = match meta.file_type() {
            t if t.is_symlink() => FileKind::Symlink,
            t if t.is_dir() => FileKind::Dir,
            t if t.is_file() => FileKind::File,
            _ => FileKind::Other,
        };
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.into_std().duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        entries.push(FileEntry {
            name,
            size: meta.len(),
            mode: meta.mode() & 0o7777,
            mtime: crate::clock::rfc3339(mtime),
            kind,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(FileList { entries })
}

/// Removes a file (never a directory).
pub async fn remove(root: &Root, path: &RelPath) -> Result<(), FileError> {
    let shown = path.display();
    if path.split().is_none() {
        return Err(FileError::is_directory(&shown));
    }
    let (root, rel) = (root.0.clone(), path.0.clone());
    blocking(move || {
        if root.symlink_metadata(&rel)?.is_dir() {
            return Err(io::Error::from(io::ErrorKind::IsADirectory));
        }
        root.remove_file(&rel)
    })
    .await
    .map_err(|e| FileError::io(e, &shown))
}

#[cfg(test)]
mod tests;
