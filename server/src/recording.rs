//! A session's stored frames as an asciicast v2 recording (`GET B/sessions/{sid}/
//! recording.cast`, `ptyhost session export`): a header (size, start, title), `o` events
//! for its output, `r` events for its resizes and `m` markers where its A2A tasks started.
//! Streamed a page of frames at a time, so a long session is never held in memory.

use std::collections::VecDeque;

use bytes::Bytes;
use futures_util::Stream;
use serde::Serialize;
use serde_json::Value;

use crate::store::{FrameBody, SessionRow, Store};

/// Frames read from the store at a time: with output frames of 64 KiB at most, a page
/// holds 16 MiB at most.
const PAGE: u32 = 256;

/// The recording of `row`'s session, line by line, in chunks of a page each.
pub fn cast(store: Store, row: SessionRow) -> impl Stream<Item = anyhow::Result<Bytes>> + Send {
    let state = Cast {
        store,
        row,
        after: 0,
        started: false,
        done: false,
        markers: VecDeque::new(),
        carry: Vec::new(),
    };
    futures_util::stream::try_unfold(state, |mut c| async move {
        if c.done {
            return Ok(None);
        }
        let chunk = c.next_chunk().await?;
        Ok(Some((Bytes::from(chunk), c)))
    })
}

struct Cast {
    store: Store,
    row: SessionRow,
    /// The last sequence written.
    after: u64,
    started: bool,
    done: bool,
    /// Task starts not written yet: (unix ms, command), oldest first.
    markers: VecDeque<(i64, String)>,
    /// The start of a UTF-8 character that the next output frame completes.
    carry: Vec<u8>,
}

impl Cast {
    async fn next_chunk(&mut self) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            self.markers = task_starts(&self.store, &self.row.id).await?.into();
            out.extend(serde_json::to_vec(&self.header().await?)?);
            out.push(b'\n');
        }
        let frames = self
            .store
            .frames()
            .from(&self.row.id, self.after + 1, PAGE)
            .await?;
        if frames.is_empty() {
            while let Some((at, label)) = self.markers.pop_front() {
                self.event(&mut out, at, "m", &label);
            }
            if !self.carry.is_empty() {
                let rest = String::from_utf8_lossy(&std::mem::take(&mut self.carry)).into_owned();
                self.event(
                    &mut out,
                    self.row.closed_at.unwrap_or(self.row.created_at),
                    "o",
                    &rest,
                );
            }
            self.done = true;
            return Ok(out);
        }
        for f in frames {
            self.after = f.sequence;
            while self
                .markers
                .front()
                .is_some_and(|(at, _)| *at <= f.created_at)
            {
                let (at, label) = self.markers.pop_front().expect("a front marker");
                self.event(&mut out, at, "m", &label);
            }
            match f.body {
                FrameBody::Output { data, .. } => {
                    let text = utf8(&mut self.carry, &data);
                    if !text.is_empty() {
                        self.event(&mut out, f.created_at, "o", &text);
                    }
                }
                FrameBody::Envelope { kind, text } if kind == "Resize" => {
                    if let Some((cols, rows)) = size(&text, "Resize") {
                        self.event(&mut out, f.created_at, "r", &format!("{cols}x{rows}"));
                    }
                }
                FrameBody::Envelope { .. } => {}
            }
        }
        Ok(out)
    }

    /// The header: the size the recording starts at (the session's start size; for one
    /// stored before that was kept, its first keyframe's or resize's, else its size now),
    /// when it started and what ran.
    async fn header(&self) -> anyhow::Result<Header> {
        let (cols, rows) = match self.store.sessions().start_size(&self.row.id).await? {
            Some((cols, rows)) => (u64::from(cols), u64::from(rows)),
            None => self
                .store
                .frames()
                .first_sized_frame(&self.row.id)
                .await?
                .and_then(|text| size(&text, "Keyframe").or_else(|| size(&text, "Resize")))
                .unwrap_or((self.row.cols.into(), self.row.rows.into())),
        };
        let title = self
            .row
            .label
            .clone()
            .unwrap_or_else(|| self.row.argv.join(" "));
        Ok(Header {
            version: 2,
            width: cols,
            height: rows,
            timestamp: self.row.created_at / 1000,
            title,
        })
    }

    /// One event line, timed from the session's start.
    fn event(&self, out: &mut Vec<u8>, at: i64, code: &str, data: &str) {
        let secs = (at - self.row.created_at).max(0) as f64 / 1000.0;
        serde_json::to_writer(&mut *out, &(secs, code, data)).expect("an event serializes");
        out.push(b'\n');
    }
}

/// The size a stored frame's envelope gives, if it is a frame of `kind`.
/// An asciicast v2 header.
#[derive(Serialize)]
struct Header {
    version: u8,
    width: u64,
    height: u64,
    timestamp: i64,
    title: String,
}

fn size(text: &[u8], kind: &str) -> Option<(u64, u64)> {
    let v: Value = serde_json::from_slice(text).ok()?;
    let p = &v["payload"];
    if p["kind"] != kind {
        return None;
    }
    match kind {
        "Keyframe" => Some((p["snapshot_cols"].as_u64()?, p["snapshot_rows"].as_u64()?)),
        _ => Some((p["cols"].as_u64()?, p["rows"].as_u64()?)),
    }
}

/// When each of the session's tasks started (its id is a UUIDv7, which says when it was
/// made) and what it ran, oldest first.
async fn task_starts(store: &Store, sid: &str) -> anyhow::Result<Vec<(i64, String)>> {
    let mut starts: Vec<(i64, String)> = store
        .tasks()
        .of_context(sid)
        .await?
        .iter()
        .filter_map(|json| {
            let task: wire::a2a::Task = serde_json::from_str(json).ok()?;
            let (secs, nanos) = uuid::Uuid::parse_str(&task.id)
                .ok()?
                .get_timestamp()?
                .to_unix();
            let at = secs as i64 * 1000 + i64::from(nanos / 1_000_000);
            let command = task.history.first().map(|m| m.text()).unwrap_or_default();
            Some((at, format!("task {}: {command}", task.id)))
        })
        .collect();
    starts.sort();
    Ok(starts)
}

/// `data` as text, after the incomplete character `carry` held; an incomplete character at
/// its end waits in `carry` for the next frame, and bytes that are no UTF-8 become U+FFFD.
fn utf8(carry: &mut Vec<u8>, data: &[u8]) -> String {
    carry.extend_from_slice(data);
    let complete = match std::str::from_utf8(carry) {
        Ok(_) => carry.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => incomplete_tail(carry),
    };
    let rest = carry.split_off(complete);
    let text = String::from_utf8_lossy(carry).into_owned();
    *carry = rest;
    text
}

/// Where a trailing, possibly incomplete, UTF-8 sequence starts (the length when there is
/// none).
fn incomplete_tail(bytes: &[u8]) -> usize {
    let start = bytes.len().saturating_sub(3);
    for i in (start..bytes.len()).rev() {
        let b = bytes[i];
        if b & 0xC0 != 0x80 {
            let need = match b {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if bytes.len() - i < need {
                i
            } else {
                bytes.len()
            };
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_between_frames_is_written_whole_and_invalid_bytes_are_replaced() {
        let mut carry = Vec::new();
        let e = "é".as_bytes();
        assert_eq!(utf8(&mut carry, &[b'a', e[0]]), "a");
        assert_eq!(utf8(&mut carry, &[e[1], b'b']), "éb");
        assert_eq!(utf8(&mut carry, &[0xff, b'c', e[0]]), "\u{fffd}c");
        assert_eq!(utf8(&mut carry, &[e[1]]), "é");
        assert!(carry.is_empty());
    }
}
