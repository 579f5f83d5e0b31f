//! The flow-control window of a member that acknowledges output (`ptyhost.ack`).

/// A flow-controlled member's output in flight: (sequence, bytes) not yet acknowledged.
#[derive(Debug)]
pub(super) struct Window {
    in_flight: std::collections::VecDeque<(u64, usize)>,
    bytes: usize,
    /// Output was skipped: the member needs a keyframe once it has caught up.
    skipped: bool,
    /// The window, `FLOW_WINDOW_BYTES` unless the member asked for less.
    size: usize,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            in_flight: Default::default(),
            bytes: 0,
            skipped: false,
            size: wire::FLOW_WINDOW_BYTES,
        }
    }
}

impl Window {
    /// The window the member asked for, within `MIN_WINDOW_BYTES..=FLOW_WINDOW_BYTES`.
    pub(super) fn limit(&mut self, asked: usize) {
        self.size = asked.clamp(wire::MIN_WINDOW_BYTES, wire::FLOW_WINDOW_BYTES);
    }

    /// Whether output is being skipped until the member catches up.
    pub(super) fn skipping(&self) -> bool {
        self.skipped
    }

    /// How little may be in flight before a member that was skipped gets its keyframe.
    fn resume_at(&self) -> usize {
        wire::FLOW_RESUME_BYTES.min(self.size / 4)
    }

    /// Whether an output frame fits the window (it is then in flight).
    pub(super) fn admit(&mut self, seq: u64, len: usize) -> bool {
        if self.skipped || self.bytes + len > self.size {
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
        let resume = self.skipped && self.bytes <= self.resume_at();
        if resume {
            self.skipped = false;
        }
        resume
    }
}
