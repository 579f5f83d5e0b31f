//! The hot replay ring: the newest broadcast frames of a session, as retained. Frames leave
//! it only once they are persisted, so whatever is not here is in the store.

use std::collections::VecDeque;

use crate::store::Frame;

/// Whether a client that saw every frame up to `after` can be replayed the rest: `floor`
/// is the newest frame retention dropped (frames after it are kept), `current` the newest
/// frame. Live sessions and closed ones (served from the store) follow this one rule.
pub fn replayable(after: u64, floor: u64, current: u64) -> bool {
    (floor..=current).contains(&after)
}

pub struct Ring {
    frames: VecDeque<Frame>,
    bytes: usize,
    max_frames: usize,
    max_bytes: usize,
}

impl Ring {
    pub fn new(max_frames: usize, max_bytes: usize) -> Ring {
        Ring {
            frames: VecDeque::new(),
            bytes: 0,
            max_frames: max_frames.max(1),
            max_bytes,
        }
    }

    pub fn push(&mut self, frame: Frame) {
        self.bytes += frame.size();
        self.frames.push_back(frame);
    }

    /// Drops the oldest frames beyond the frame and byte bounds, never one that is not yet
    /// persisted (sequence above `persisted_upto`).
    pub fn evict(&mut self, persisted_upto: u64) {
        while self.frames.len() > self.max_frames || self.bytes > self.max_bytes {
            match self.frames.front() {
                Some(f) if f.sequence <= persisted_upto => {
                    self.bytes -= f.size();
                    self.frames.pop_front();
                }
                _ => break,
            }
        }
    }

    pub fn oldest(&self) -> Option<u64> {
        self.frames.front().map(|f| f.sequence)
    }

    /// Frames with a sequence above `after`, oldest first.
    pub fn after(&self, after: u64) -> impl Iterator<Item = &Frame> {
        let start = self.frames.partition_point(|f| f.sequence <= after);
        self.frames.range(start..)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::store::FrameBody;

    fn output(sequence: u64, data: &'static [u8]) -> Frame {
        Frame {
            sequence,
            created_at: 0,
            body: FrameBody::Output {
                envelope_id: String::new(),
                data: Bytes::from_static(data),
            },
        }
    }

    #[test]
    fn eviction_keeps_unpersisted_frames_and_respects_the_frame_bound() {
        let mut ring = Ring::new(3, usize::MAX);
        for s in 1..=6 {
            ring.push(output(s, b"x"));
        }
        ring.evict(2);
        assert_eq!(ring.oldest(), Some(3));
        ring.evict(6);
        assert_eq!(ring.oldest(), Some(4));
        let seqs: Vec<u64> = ring.after(4).map(|e| e.sequence).collect();
        assert_eq!(seqs, vec![5, 6]);
    }

    #[test]
    fn byte_bound_evicts_persisted_frames_early() {
        let mut ring = Ring::new(100, 4);
        for s in 1..=4 {
            ring.push(output(s, b"ab"));
        }
        ring.evict(4);
        assert_eq!(ring.oldest(), Some(3));
    }

    #[test]
    fn replay_runs_from_the_retention_floor_to_the_newest_frame() {
        assert!(replayable(10, 10, 20), "everything after the floor is kept");
        assert!(
            replayable(20, 10, 20),
            "nothing missed is nothing to replay"
        );
        assert!(!replayable(9, 10, 20), "frame 10 was dropped");
        assert!(!replayable(21, 10, 20), "a sequence never handed out");
        assert!(replayable(0, 0, 0), "a new session");
    }
}
