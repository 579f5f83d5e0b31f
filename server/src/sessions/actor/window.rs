//! The flow-control window of a member that acknowledges output (`ptyhost.ack`).

use super::*;

/// A flow-controlled member's output in flight: (sequence, bytes) not yet acknowledged.
#[derive(Debug, Default)]
pub(super) struct Window {
    in_flight: std::collections::VecDeque<(u64, usize)>,
    bytes: usize,
    /// Output was skipped: the member needs a keyframe once it has caught up.
    skipped: bool,
}

impl Window {
    /// Whether an output frame fits the window (it is then in flight).
    pub(super) fn admit(&mut self, seq: u64, len: usize) -> bool {
        if self.skipped || self.bytes + len > wire::FLOW_WINDOW_BYTES {
            self.skipped = true;
            return false;
        }
        self.in_flight.push_back((seq, len));
        self.bytes += len;
        true
    }

    /// Acknowledges up to `sequence`; true when the member has caught up after a skip and
    /// should now get a keyframe.
    pub(super) fn ack(&mut self, sequence: u64) -> bool {
        while let Some(&(seq, len)) = self.in_flight.front() {
            if seq > sequence {
                break;
            }
            self.in_flight.pop_front();
            self.bytes -= len;
        }
        let resume = self.skipped && self.bytes <= wire::FLOW_RESUME_BYTES;
        if resume {
            self.skipped = false;
        }
        resume
    }
}
