//! Workspace snapshots as archives: a workspace written to a tar stream, compressed with
//! zstd, and stored in chunks as it is made (so neither side holds it whole: a file in the
//! store's directory on SQLite, rows on PostgreSQL); and an archive unpacked into a fresh
//! workspace. What a snapshot holds: the workspace's
//! directories, regular files (with their modes and times) and symbolic links, as links,
//! never followed. Not sockets, FIFOs or devices, not memory or processes.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use crate::store::Store;

/// The bytes of one stored chunk.
const CHUNK: usize = crate::store::SNAPSHOT_CHUNK;
/// zstd's level: its default, which `zstd -3` uses too.
const LEVEL: i32 = 3;
/// How much the archive gathers before the compressor sees it: large pieces keep zstd on
/// its contiguous path.
const PIECE: usize = 1 << 20;
/// Mode bits an unpacked entry never gets: set-user-ID, set-group-ID and sticky.
const MASK: u32 = 0o7000;

/// What a snapshot took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The archive's bytes.
    pub bytes: u64,
    /// Entries in it: directories, files and links.
    pub files: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The archive would pass `limit` bytes (the snapshot or store cap).
    #[error("the snapshot passes its limit of {limit} bytes ({what})")]
    TooLarge { limit: u64, what: &'static str },
    #[error("snapshot {0} has no archive here")]
    Missing(String),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// Writes `dir` into snapshot `id`'s chunks; fails (with nothing kept) once the archive
/// passes `limit` bytes, which `what` names.
pub async fn take(
    store: &Store,
    id: &str,
    dir: &Path,
    (limit, what): (u64, &'static str),
) -> Result<Taken, SnapshotError> {
    let (tx, mut chunks) = mpsc::channel::<Vec<u8>>(2);
    let dir = dir.to_path_buf();
    let packing = tokio::task::spawn_blocking(move || pack(&dir, ChunkWriter::new(tx)));
    let (mut bytes, mut n) = (0u64, 0u64);
    let mut over = false;
    while let Some(chunk) = chunks.recv().await {
        bytes += chunk.len() as u64;
        if bytes > limit {
            over = true;
            break;
        }
        store.snapshots().put_chunk(id, n, &chunk).await?;
        n += 1;
    }
    // Dropping the receiver ends a packer that is past the limit.
    drop(chunks);
    let packed = packing.await.map_err(anyhow::Error::from)?;
    if over {
        return Err(SnapshotError::TooLarge { limit, what });
    }
    let files = packed.map_err(anyhow::Error::from)?;
    Ok(Taken { bytes, files })
}

/// Unpacks snapshot `id` into `dir` (an empty workspace).
pub async fn restore(store: &Store, id: &str, dir: &Path) -> Result<(), SnapshotError> {
    if store.snapshots().get(id).await?.is_none() {
        return Err(SnapshotError::Missing(id.to_owned()));
    }
    let (tx, rx) = mpsc::channel::<Vec<u8>>(2);
    let dir = dir.to_path_buf();
    let unpacking = tokio::task::spawn_blocking(move || unpack(ChunkReader::new(rx), &dir));
    let mut n = 0;
    while let Some(chunk) = store.snapshots().chunk(id, n).await? {
        if tx.send(chunk).await.is_err() {
            break;
        }
        n += 1;
    }
    drop(tx);
    unpacking
        .await
        .map_err(anyhow::Error::from)?
        .map_err(|e| anyhow::Error::from(e).context(format!("unpacking snapshot {id}")))?;
    Ok(())
}

/// Archives `dir` into `out`; the entries written. zstd compresses in a worker thread of
/// its own while this one reads the files, as `tar | zstd` would.
fn pack(dir: &Path, out: impl Write) -> io::Result<u64> {
    let mut encoder = zstd::Encoder::new(out, LEVEL)?;
    encoder.multithread(1)?;
    let mut tar = tar::Builder::new(io::BufWriter::with_capacity(PIECE, encoder));
    tar.follow_symlinks(false);
    let mut files = 0;
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let path = dir.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&path)?.collect::<io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = rel.join(entry.file_name());
            let kind = entry.file_type()?;
            if kind.is_dir() {
                tar.append_dir(&name, entry.path())?;
                pending.push(name);
            } else if kind.is_file() || kind.is_symlink() {
                tar.append_path_with_name(entry.path(), &name)?;
            } else {
                continue;
            }
            files += 1;
        }
    }
    let encoder = tar
        .into_inner()?
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    encoder.finish()?.flush()?;
    Ok(files)
}

/// Unpacks an archive from `input` into `dir`: no entry lands outside it (tar refuses
/// `..`, absolute paths and writes through links), and none keeps a set-ID or sticky bit.
fn unpack(input: impl Read, dir: &Path) -> io::Result<()> {
    let mut tar = tar::Archive::new(zstd::Decoder::new(input)?);
    tar.set_preserve_permissions(true);
    tar.set_preserve_mtime(true);
    tar.set_mask(MASK);
    tar.set_overwrite(true);
    tar.unpack(dir)
}

/// Gathers written bytes into chunks and sends each whole one on.
struct ChunkWriter {
    buf: Vec<u8>,
    tx: mpsc::Sender<Vec<u8>>,
}

impl ChunkWriter {
    fn new(tx: mpsc::Sender<Vec<u8>>) -> ChunkWriter {
        ChunkWriter {
            buf: Vec::with_capacity(CHUNK),
            tx,
        }
    }

    fn send(&mut self) -> io::Result<()> {
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx
            .blocking_send(chunk)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the snapshot was stopped"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    /// The last, partial chunk goes when the archive is done (`flush` after `finish`).
    fn flush(&mut self) -> io::Result<()> {
        match self.buf.is_empty() {
            true => Ok(()),
            false => self.send(),
        }
    }
}

/// Reads the chunks received, in order, as one stream.
struct ChunkReader {
    rx: mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl ChunkReader {
    fn new(rx: mpsc::Receiver<Vec<u8>>) -> ChunkReader {
        ChunkReader {
            rx,
            chunk: Vec::new(),
            at: 0,
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.rx.blocking_recv() {
                Some(next) => (self.chunk, self.at) = (next, 0),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.chunk.len() - self.at);
        out[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn round_trip(src: &Path, dst: &Path) -> u64 {
        let (tx, rx) = mpsc::channel(1024);
        let files = pack(src, ChunkWriter::new(tx)).unwrap();
        unpack(ChunkReader::new(rx), dst).unwrap();
        files
    }

    #[test]
    fn a_workspace_comes_back_with_its_modes_and_links_as_links() {
        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::create_dir_all(src.path().join("a/b")).unwrap();
        std::fs::write(src.path().join("a/b/data"), vec![7u8; 3 * CHUNK]).unwrap();
        let tool = src.path().join("tool.sh");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o4755)).unwrap();
        symlink("/etc/passwd", src.path().join("out")).unwrap();
        assert_eq!(round_trip(src.path(), dst.path()), 5);
        assert_eq!(
            std::fs::read(dst.path().join("a/b/data")).unwrap(),
            vec![7u8; 3 * CHUNK]
        );
        let mode = std::fs::metadata(dst.path().join("tool.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "kept executable, set-ID dropped");
        let link = dst.path().join("out");
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_link(link).unwrap(), Path::new("/etc/passwd"));
    }
}
