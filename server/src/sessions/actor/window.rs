//! The flow-control window of a member that acknowledges output (`ptyhost.ack`), and the
//! cadence of the session's periodic keyframes.

use tokio::time::{Duration, Instant};

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

/// When the periodic keyframe is due: after `every` outputs, or once `interval` has passed
/// with output since the last one.
#[derive(Debug)]
pub(super) struct KeyframeClock {
    outputs: u64,
    last: Instant,
    every: u64,
    interval: Duration,
}

impl KeyframeClock {
    pub(super) fn new(every: u64, interval: Duration) -> KeyframeClock {
        KeyframeClock {
            outputs: 0,
            last: Instant::now(),
            every,
            interval,
        }
    }

    /// Counts one output frame; true when that makes a keyframe due.
    pub(super) fn output(&mut self) -> bool {
        self.outputs += 1;
        self.outputs >= self.every
    }

    /// Whether the interval has passed with output since the last keyframe.
    pub(super) fn stale(&self, now: Instant) -> bool {
        self.outputs > 0 && now.duration_since(self.last) >= self.interval
    }

    /// A keyframe went out now.
    pub(super) fn reset(&mut self, now: Instant) {
        self.outputs = 0;
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_window_is_skipped_until_an_ack_brings_it_under_the_resume_mark() {
        let mut w = Window::default();
        w.limit(16 * 1024);
        assert!(w.admit(1, 8 * 1024));
        assert!(w.admit(2, 8 * 1024));
        assert!(!w.admit(3, 1), "the window is full");
        assert!(w.skipping());
        assert!(!w.admit(4, 1), "once skipping, everything is skipped");
        assert!(
            !w.ack(1),
            "8 KiB still in flight is above a quarter of the window"
        );
        assert!(w.ack(2), "caught up: the member gets its keyframe");
        assert!(!w.skipping());
        assert!(w.admit(5, 1024));
    }

    #[test]
    fn a_window_asked_for_stays_within_the_extension_s_bounds() {
        let mut w = Window::default();
        w.limit(1);
        assert_eq!(w.size, wire::MIN_WINDOW_BYTES);
        w.limit(usize::MAX);
        assert_eq!(w.size, wire::FLOW_WINDOW_BYTES);
    }

    #[test]
    fn a_keyframe_is_due_after_enough_outputs_or_a_quiet_interval_with_output() {
        let mut k = KeyframeClock::new(3, Duration::from_secs(1));
        let start = Instant::now();
        assert!(
            !k.stale(start + Duration::from_secs(5)),
            "no output, no keyframe"
        );
        assert!(!k.output());
        assert!(!k.output());
        assert!(k.output(), "the third output");
        k.reset(start);
        assert!(!k.output());
        assert!(!k.stale(start + Duration::from_millis(999)));
        assert!(k.stale(start + Duration::from_secs(1)));
    }

    #[test]
    fn an_ack_without_a_skip_never_asks_for_a_keyframe() {
        let mut w = Window::default();
        assert!(w.admit(1, 10));
        assert!(!w.ack(1));
        assert!(
            !w.ack(99),
            "acknowledging beyond what is in flight is harmless"
        );
    }
}
