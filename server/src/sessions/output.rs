//! A session's output after a cursor, from its stored frames (what an agent reads back):
//! the bytes in order, and the cursor to read on from. Frames are stored in sequence order,
//! so a cursor never skips output that was not stored yet; it comes on the next read.

use crate::sessions::SessionId;
use std::time::Duration;

use anyhow::Result;

use super::{SessionHandle, Sessions};
use crate::store::FrameBody;

/// Frames read from the store at a time.
const PAGE: u32 = 256;
/// A read of a running session waits this long at most for what it has printed to be stored.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Output read after a cursor.
#[derive(Debug, Default, PartialEq)]
pub struct OutputRead {
    pub data: Vec<u8>,
    /// The last sequence read: the next read starts after it.
    pub cursor: u64,
    /// More output is stored after `cursor` (the read stopped at its byte bound).
    pub more: bool,
    /// Output after the cursor asked for was gone (retention); the read starts at the oldest kept.
    pub gap: bool,
}

impl Sessions {
    /// The output of session `sid` after sequence `after`, up to about `max_bytes` (whole
    /// frames; the first frame is taken whatever its size): a running session's, once what
    /// it printed before the call is stored.
    pub async fn output_after(
        &self,
        sid: &str,
        after: u64,
        max_bytes: usize,
    ) -> Result<OutputRead> {
        let floor = match self.live(&SessionId::from(sid)) {
            Some(h) => {
                let printed = h.current_sequence();
                let _ = tokio::time::timeout(FLUSH_WAIT, h.stored_past(printed.saturating_sub(1)))
                    .await;
                h.replay_floor()
            }
            None => (self.view(&SessionId::from(sid)).await?).map_or(0, |v| v.replay_floor),
        };
        let mut read = OutputRead {
            cursor: after.max(floor),
            gap: after < floor,
            ..OutputRead::default()
        };
        loop {
            let page = (self.store())
                .frames()
                .from(sid, read.cursor + 1, PAGE)
                .await?;
            let full = page.len() == PAGE as usize;
            for frame in page {
                if let FrameBody::Output { data, .. } = &frame.body {
                    if !read.data.is_empty() && read.data.len() + data.len() > max_bytes {
                        read.more = true;
                        return Ok(read);
                    }
                    read.data.extend_from_slice(data);
                }
                read.cursor = frame.sequence;
            }
            if !full {
                return Ok(read);
            }
        }
    }
}

impl SessionHandle {
    /// Waits until a frame after `sequence` is stored; false once the session has ended.
    pub async fn stored_past(&self, sequence: u64) -> bool {
        let mut persisted = self.persisted.clone();
        persisted.wait_for(|p| p.upto > sequence).await.is_ok()
    }
}
