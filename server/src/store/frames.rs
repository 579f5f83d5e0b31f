//! Replay frames: written behind in batches (output as LZ4 when that is smaller), read by
//! sequence range or from the last keyframe, pruned outside both retention bounds.

use std::borrow::Cow;
use std::sync::LazyLock;

use anyhow::Result;
use bytes::Bytes;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::Db;

/// One broadcast frame of a session as retained for replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub sequence: u64,
    pub created_at: i64,
    pub body: FrameBody,
}

/// Output keeps its PTY bytes and the id of the envelope it went out under (its JSON text
/// is rendered again on replay); every other frame keeps its exact envelope text.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameBody {
    Output { envelope_id: String, data: Bytes },
    Envelope { kind: String, text: Bytes },
}

impl Frame {
    /// The bytes it holds, for the ring's byte bound.
    pub fn size(&self) -> usize {
        match &self.body {
            FrameBody::Output { data, .. } => data.len(),
            FrameBody::Envelope { text, .. } => text.len(),
        }
    }
}

/// Output bytes as stored: an LZ4 block when that is smaller (terminal output mostly is,
/// and LZ4 passes over what is not at memory speed), else as they are.
pub(super) fn compress(data: &Bytes) -> (Cow<'_, [u8]>, Option<&'static str>) {
    if data.len() >= COMPRESS_FROM {
        let block = lz4_flex::compress_prepend_size(data);
        if block.len() < data.len() {
            return (Cow::Owned(block), Some("lz4"));
        }
    }
    (Cow::Borrowed(&data[..]), None)
}

pub(super) fn stored_frame(r: &AnyRow) -> Result<Frame> {
    let body = match r.get::<Option<Vec<u8>>, _>("data") {
        Some(data) => FrameBody::Output {
            envelope_id: r
                .get::<Option<String>, _>("envelope_id")
                .unwrap_or_default(),
            data: match r.get::<Option<String>, _>("compression").as_deref() {
                None => Bytes::from(data),
                Some("lz4") => Bytes::from(lz4_flex::decompress_size_prepended(&data)?),
                Some(other) => anyhow::bail!("unknown frame compression {other:?}"),
            },
        },
        None => FrameBody::Envelope {
            kind: r.get("kind"),
            text: Bytes::from(r.get::<Option<String>, _>("frame").unwrap_or_default()),
        },
    };
    Ok(Frame {
        sequence: r.get::<i64, _>("sequence") as u64,
        created_at: r.get("created_at"),
        body,
    })
}

/// The columns `stored_frame` reads.
pub(super) const FRAME_COLUMNS: &str =
    "sequence, kind, created_at, frame, envelope_id, data, compression";

/// Output shorter than this is stored as it is (an echo, a prompt).
pub(super) const COMPRESS_FROM: usize = 256;

/// The replay frames of sessions, their sequence reservations and their retention.
#[derive(Clone)]
pub struct Frames(pub(super) Db);

super::handle!(Frames);

impl Frames {
    // ---- frames ----

    /// Appends frames in one transaction and records the session's last sequence; returns
    /// the bytes they take in the store.
    pub async fn insert(&self, session_id: &str, frames: &[Frame]) -> Result<u64> {
        if frames.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool.begin().await?;
        let stored = insert_frames_in(&mut tx, session_id, frames).await?;
        tx.commit().await?;
        Ok(stored)
    }

    /// Frames with `after < sequence < before`, in order.
    pub async fn between(&self, session_id: &str, after: u64, before: u64) -> Result<Vec<Frame>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {FRAME_COLUMNS} FROM frames
             WHERE session_id = $1 AND sequence > $2 AND sequence < $3 ORDER BY sequence"
        )))
        .bind(session_id)
        .bind(after as i64)
        .bind(before.min(i64::MAX as u64) as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(stored_frame).collect()
    }

    /// A page of a session's stored frames from `start` on (inclusive), at most `limit`.
    pub async fn from(&self, session_id: &str, start: u64, limit: u32) -> Result<Vec<Frame>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {FRAME_COLUMNS} FROM frames WHERE session_id = $1 AND sequence >= $2
             ORDER BY sequence LIMIT $3"
        )))
        .bind(session_id)
        .bind(start.min(i64::MAX as u64) as i64)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(stored_frame).collect()
    }

    /// A page of a session's stored frames of these kinds (none of them `Output`) from
    /// `start` on, at most `limit`: what a timeline marks (resizes, membership changes).
    /// Each kind is a range of the `frames_by_kind` index, and the sort keeps no more than
    /// a page (both backends sort with a limit in bounded memory).
    pub async fn of_kinds(
        &self,
        session_id: &str,
        kinds: &[&str],
        start: u64,
        limit: u32,
    ) -> Result<Vec<Frame>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {FRAME_COLUMNS} FROM frames WHERE session_id = $1 AND kind IN ({})
             AND sequence >= $3 ORDER BY sequence LIMIT $4",
            self.values_of("$2")
        )))
        .bind(session_id)
        .bind(serde_json::to_string(kinds)?)
        .bind(start.min(i64::MAX as u64) as i64)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(stored_frame).collect()
    }

    /// The last stored frame at or before unix ms `at`, if any.
    pub async fn sequence_at(&self, session_id: &str, at: i64) -> Result<Option<u64>> {
        let row = sqlx::query(
            "SELECT sequence FROM frames WHERE session_id = $1 AND created_at <= $2
             ORDER BY created_at DESC, sequence DESC LIMIT 1",
        )
        .bind(session_id)
        .bind(at)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.get::<i64, _>(0) as u64))
    }

    /// The last keyframe at or before `sequence`, if any.
    pub async fn keyframe_before(&self, session_id: &str, sequence: u64) -> Result<Option<u64>> {
        let row = sqlx::query(
            "SELECT sequence FROM frames WHERE session_id = $1 AND kind = 'Keyframe' AND sequence <= $2
             ORDER BY sequence DESC LIMIT 1",
        )
        .bind(session_id)
        .bind(sequence.min(i64::MAX as u64) as i64)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.get::<i64, _>(0) as u64))
    }

    /// The envelope of a session's first keyframe or resize (it says the size it started
    /// at).
    pub async fn first_sized_frame(&self, session_id: &str) -> Result<Option<Vec<u8>>> {
        let row = sqlx::query(
            "SELECT frame FROM frames WHERE session_id = $1 AND kind IN ('Keyframe', 'Resize')
             ORDER BY sequence LIMIT 1",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row
            .and_then(|r| r.get::<Option<String>, _>(0))
            .map(String::into_bytes))
    }

    /// The last keyframe of a session and every frame after it (all frames if it has none).
    pub async fn from_last_keyframe(&self, session_id: &str) -> Result<Vec<Frame>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {FRAME_COLUMNS} FROM frames WHERE session_id = $1
             AND sequence >= COALESCE((SELECT MAX(sequence) FROM frames
                                       WHERE session_id = $2 AND kind = 'Keyframe'), 0)
             ORDER BY sequence"
        )))
        .bind(session_id)
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(stored_frame).collect()
    }

    /// Drops the oldest frames that are outside both retention bounds (older than
    /// `before_ms` and at or below `upto_sequence`), always a prefix of the history, and
    /// raises the session's replay floor to match. Returns the new floor, if it moved.
    pub async fn prune(
        &self,
        session_id: &str,
        upto_sequence: u64,
        before_ms: i64,
    ) -> Result<Option<u64>> {
        let mut tx = self.pool.begin().await?;
        let floor: Option<i64> = sqlx::query(
            "SELECT MAX(sequence) FROM frames WHERE session_id = $1 AND sequence <= $2 AND created_at < $3",
        )
        .bind(session_id)
        .bind(upto_sequence as i64)
        .bind(before_ms)
        .fetch_one(&mut *tx)
        .await?
        .get(0);
        let Some(floor) = floor else {
            return Ok(None);
        };
        raise_floor(&mut tx, session_id, floor).await?;
        tx.commit().await?;
        Ok(Some(floor as u64))
    }
}

impl Frames {
    /// Drops session `id`'s frames up to `floor` and raises its replay floor to it.
    pub async fn raise_replay_floor(&self, id: &str, floor: u64) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        raise_floor(&mut tx, id, floor as i64).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The most frames one INSERT writes. A batch goes as INSERTs of a power of two of frames,
/// the largest that fits first (25 frames: 16, 8 and 1), so that a connection prepares at
/// most seven statements and its statement cache holds them all.
const FRAMES_PER_INSERT: usize = 64;

/// The columns of `frames` one INSERT row binds, in their order.
const INSERT_COLUMNS: &str =
    "session_id, sequence, kind, created_at, frame, envelope_id, data, compression, bytes";
const INSERT_PARAMS: usize = 9;

/// The sizes of the INSERTs that write `n` frames.
fn insert_chunks(mut n: usize) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (n > 0).then(|| {
            let rows = FRAMES_PER_INSERT.min(1 << n.ilog2());
            n -= rows;
            rows
        })
    })
}

/// The INSERT of `rows` frames, a power of two up to `FRAMES_PER_INSERT`.
fn insert_sql(rows: usize) -> &'static str {
    static SQL: LazyLock<Vec<String>> = LazyLock::new(|| {
        (0..=FRAMES_PER_INSERT.ilog2())
            .map(|shift| {
                let values = super::values_list(1 << shift, INSERT_PARAMS);
                format!("INSERT INTO frames ({INSERT_COLUMNS}) VALUES {values}")
            })
            .collect()
    });
    &SQL[rows.ilog2() as usize]
}

/// One frame as its INSERT row binds it.
struct FrameColumns<'a> {
    sequence: i64,
    kind: &'a str,
    created_at: i64,
    text: Option<&'a str>,
    envelope_id: Option<&'a str>,
    data: Option<Cow<'a, [u8]>>,
    compression: Option<&'static str>,
    bytes: i64,
}

impl<'a> FrameColumns<'a> {
    fn of(f: &'a Frame) -> Result<FrameColumns<'a>> {
        let (kind, text, envelope_id, data, compression) = match &f.body {
            FrameBody::Output { envelope_id, data } => {
                let (data, compression) = compress(data);
                (
                    "Output",
                    None,
                    Some(envelope_id.as_str()),
                    Some(data),
                    compression,
                )
            }
            FrameBody::Envelope { kind, text } => (
                kind.as_str(),
                Some(std::str::from_utf8(text)?),
                None,
                None,
                None,
            ),
        };
        let bytes = text.map_or(0, str::len) + data.as_ref().map_or(0, |d| d.len());
        Ok(FrameColumns {
            sequence: f.sequence as i64,
            kind,
            created_at: f.created_at,
            text,
            envelope_id,
            data,
            compression,
            bytes: bytes as i64,
        })
    }
}

/// `Frames::insert` within a transaction.
pub(super) async fn insert_frames_in(
    tx: &mut sqlx::AnyConnection,
    session_id: &str,
    frames: &[Frame],
) -> Result<u64> {
    let Some(last) = frames.last() else {
        return Ok(0);
    };
    let rows = frames
        .iter()
        .map(FrameColumns::of)
        .collect::<Result<Vec<_>>>()?;
    let mut rest = &rows[..];
    for size in insert_chunks(rows.len()) {
        let (chunk, after) = rest.split_at(size);
        rest = after;
        let mut query = sqlx::query(insert_sql(size));
        for r in chunk {
            query = query
                .bind(session_id)
                .bind(r.sequence)
                .bind(r.kind)
                .bind(r.created_at)
                .bind(r.text)
                .bind(r.envelope_id)
                .bind(r.data.as_deref())
                .bind(r.compression)
                .bind(r.bytes);
        }
        query.execute(&mut *tx).await?;
    }
    sqlx::query("UPDATE sessions SET last_sequence = $1 WHERE id = $2 AND last_sequence < $3")
        .bind(last.sequence as i64)
        .bind(session_id)
        .bind(last.sequence as i64)
        .execute(&mut *tx)
        .await?;
    Ok(rows.iter().map(|r| r.bytes as u64).sum())
}

/// Drops session `id`'s frames up to `floor` and raises its replay floor to it.
pub(super) async fn raise_floor(tx: &mut sqlx::AnyConnection, id: &str, floor: i64) -> Result<()> {
    sqlx::query("DELETE FROM frames WHERE session_id = $1 AND sequence <= $2")
        .bind(id)
        .bind(floor)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE sessions SET replay_floor = CASE WHEN replay_floor < $1 THEN $1 ELSE replay_floor END
         WHERE id = $2")
        .bind(floor)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

impl Frames {
    /// Records that session `id` may hand out sequences up to `upto` before it reserves
    /// more; a session recovered after a crash numbers on from above it.
    pub async fn reserve_sequences(&self, id: &str, upto: u64) -> Result<()> {
        sqlx::query(
            "UPDATE sessions SET sequence_reserved =
             CASE WHEN sequence_reserved < $1 THEN $1 ELSE sequence_reserved END WHERE id = $2",
        )
        .bind(upto as i64)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_written_in_power_of_two_inserts_of_at_most_sixty_four_frames() {
        let chunks = |n| insert_chunks(n).collect::<Vec<_>>();
        assert_eq!(chunks(0), Vec::<usize>::new());
        assert_eq!(chunks(1), [1]);
        assert_eq!(chunks(25), [16, 8, 1]);
        assert_eq!(chunks(64), [64]);
        assert_eq!(chunks(150), [64, 64, 16, 4, 2]);
        for n in 0..300 {
            assert_eq!(chunks(n).iter().sum::<usize>(), n);
        }
        assert_eq!(insert_sql(2).matches('(').count(), 3);
        assert!(insert_sql(64).ends_with("$576)"));
    }
}
