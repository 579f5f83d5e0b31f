//! Workspace snapshots: a row each, and the archive in numbered chunks of
//! [`SNAPSHOT_CHUNK`] bytes. On SQLite the archive is a file in the store's directory
//! (SQLite writes large blobs a tenth as fast as a file takes them); on PostgreSQL its
//! chunks are rows, so that every node of a cluster restores it. A snapshot is listed once
//! complete; one left incomplete (its writer died) is swept.

use std::path::PathBuf;

use anyhow::{Context, Result};
use sqlx::Row;
use sqlx::any::AnyRow;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use super::Db;

/// The bytes of every chunk of an archive but its last.
pub const SNAPSHOT_CHUNK: usize = 4 << 20;

/// One snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotRow {
    pub id: String,
    pub instance_id: String,
    /// The session it was taken of.
    pub session_id: String,
    pub label: Option<String>,
    /// The archive's bytes (compressed).
    pub bytes: u64,
    /// Entries in it: files, directories and links.
    pub files: u64,
    pub created_at: i64,
}

/// The snapshots' rows, and on SQLite the folder of their archives.
#[derive(Clone)]
pub struct Snapshots(pub(super) Db, pub(super) Option<PathBuf>);

super::handle!(Snapshots);

const COLUMNS: &str = "id, instance_id, session_id, label, bytes, files, created_at";

fn snapshot_row(r: &AnyRow) -> SnapshotRow {
    SnapshotRow {
        id: r.get("id"),
        instance_id: r.get("instance_id"),
        session_id: r.get("session_id"),
        label: r.get("label"),
        bytes: r.get::<i64, _>("bytes").max(0) as u64,
        files: r.get::<i64, _>("files").max(0) as u64,
        created_at: r.get("created_at"),
    }
}

impl Snapshots {
    /// Starts writing snapshot `s` (not listed until `finish`).
    pub async fn begin(&self, s: &SnapshotRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO snapshots (id, instance_id, session_id, label, bytes, files, created_at,
             complete) VALUES ($1, $2, $3, $4, 0, 0, $5, 0)",
        )
        .bind(&s.id)
        .bind(&s.instance_id)
        .bind(&s.session_id)
        .bind(&s.label)
        .bind(s.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The archive file of snapshot `id` (SQLite), and the one it is written to first.
    fn files(&self, id: &str) -> Option<(PathBuf, PathBuf)> {
        let dir = self.1.as_ref()?;
        Some((
            dir.join(format!("{id}.tar.zst")),
            dir.join(format!("{id}.part")),
        ))
    }

    /// Chunk `n` of snapshot `id`'s archive; chunks come in order.
    pub async fn put_chunk(&self, id: &str, n: u64, data: &[u8]) -> Result<()> {
        if let Some((_, part)) = self.files(id) {
            let mut file = match n {
                0 => {
                    tokio::fs::create_dir_all(part.parent().unwrap_or(&part)).await?;
                    tokio::fs::File::create(&part).await?
                }
                _ => {
                    tokio::fs::OpenOptions::new()
                        .append(true)
                        .open(&part)
                        .await?
                }
            };
            file.write_all(data)
                .await
                .with_context(|| format!("writing {}", part.display()))?;
            return Ok(());
        }
        sqlx::query("INSERT INTO snapshot_chunks (snapshot_id, n, data) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(n as i64)
            .bind(data)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Snapshot `id` is whole: `bytes` in `files` entries. Its archive is on disk first.
    pub async fn finish(&self, id: &str, bytes: u64, files: u64) -> Result<()> {
        if let Some((done, part)) = self.files(id) {
            tokio::fs::File::open(&part).await?.sync_all().await?;
            tokio::fs::rename(&part, &done).await?;
            let dir = done.parent().unwrap_or(&done).to_path_buf();
            tokio::fs::File::open(dir).await?.sync_all().await?;
        }
        sqlx::query("UPDATE snapshots SET bytes = $1, files = $2, complete = 1 WHERE id = $3")
            .bind(bytes as i64)
            .bind(files as i64)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deletes snapshot `id` and its archive; false when there was none.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        if let Some((done, part)) = self.files(id) {
            for file in [done, part] {
                match tokio::fs::remove_file(&file).await {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM snapshot_chunks WHERE snapshot_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM snapshots WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// The complete snapshots of `instance_id`, oldest first.
    pub async fn list(&self, instance_id: &str) -> Result<Vec<SnapshotRow>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM snapshots WHERE instance_id = $1 AND complete = 1
             ORDER BY created_at, id"
        )))
        .bind(instance_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(snapshot_row).collect())
    }

    /// A complete snapshot.
    pub async fn get(&self, id: &str) -> Result<Option<SnapshotRow>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM snapshots WHERE id = $1 AND complete = 1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(snapshot_row))
    }

    /// Chunk `n` of snapshot `id`, if there is one.
    pub async fn chunk(&self, id: &str, n: u64) -> Result<Option<Vec<u8>>> {
        if let Some((done, _)) = self.files(id) {
            let mut file = tokio::fs::File::open(&done)
                .await
                .with_context(|| format!("opening {}", done.display()))?;
            file.seek(std::io::SeekFrom::Start(n * SNAPSHOT_CHUNK as u64))
                .await?;
            let mut chunk = Vec::with_capacity(SNAPSHOT_CHUNK);
            file.take(SNAPSHOT_CHUNK as u64)
                .read_to_end(&mut chunk)
                .await?;
            return Ok((!chunk.is_empty()).then_some(chunk));
        }
        let row = sqlx::query("SELECT data FROM snapshot_chunks WHERE snapshot_id = $1 AND n = $2")
            .bind(id)
            .bind(n as i64)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.get("data")))
    }

    /// The bytes every complete snapshot's archive takes.
    pub async fn total_bytes(&self) -> Result<u64> {
        let v: i64 =
            sqlx::query_scalar("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM snapshots")
                .fetch_one(&self.pool)
                .await?;
        Ok(v.max(0) as u64)
    }

    /// What the archives take outside the database (SQLite's files; none on PostgreSQL,
    /// whose chunks the database's own count holds).
    pub async fn bytes_on_disk(&self) -> Result<u64> {
        match self.1 {
            Some(_) => self.total_bytes().await,
            None => Ok(0),
        }
    }

    /// Deletes snapshots left incomplete since before `before` (unix ms) by a writer that
    /// died; their count.
    pub async fn sweep_incomplete(&self, before: i64) -> Result<u64> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM snapshots WHERE complete = 0 AND created_at < $1")
                .bind(before)
                .fetch_all(&self.pool)
                .await?;
        for id in &ids {
            self.delete(id).await?;
        }
        Ok(ids.len() as u64)
    }
}
