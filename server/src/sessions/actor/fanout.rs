//! Frames out of the actor: numbered, retained and persisted, then fanned out to each
//! member through its queue and flow window; keyframes, membership and acknowledgements.

use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use wire::{Base64Bytes, ErrorCode, PtyErrorCode, Role, SNAPSHOT_FORMAT, SessionFrame};

use super::backlog::Persist;
use super::shell::ShellSide;
use super::window::Window;
use super::{Actor, Member, REKEY_PACE};
use crate::clock;
use crate::sessions::{
    LiveStatus, MembershipSlot, Outbound, OutputEncoding, SessionRefusal, encode_frame, envelope,
    new_frame, new_output,
};
use crate::store::Frame;

impl Actor {
    /// Numbers, encodes, retains, persists and fans out one frame; `skip` does not get it
    /// through its queue (the joiner receives it in its initial flush instead).
    pub(super) fn broadcast(&mut self, frame: SessionFrame, skip: Option<&str>) -> Bytes {
        self.broadcast_to(frame, |m| skip != Some(m.client_id.as_str()))
    }

    /// `broadcast`, fanned out only to the members `to` picks.
    pub(super) fn broadcast_to(
        &mut self,
        frame: SessionFrame,
        to: impl Fn(&Member) -> bool,
    ) -> Bytes {
        let json = self.number(frame);
        for i in 0..self.members.len() {
            if to(&self.members[i]) {
                self.deliver(i, Outbound::Frame(json.clone()));
            }
        }
        json
    }

    /// Numbers, encodes, retains and persists one frame.
    pub(super) fn number(&mut self, frame: SessionFrame) -> Bytes {
        let seq = self.next_seq();
        let retained = new_frame(seq, &frame, clock::now_ms());
        let json = envelope(&retained);
        self.retain(retained);
        json
    }

    /// Numbers, retains, persists and fans out PTY output in each member's encoding
    /// (`PW1O`, the spec's envelope, the executor's frame), each made once and only if
    /// someone takes it; a member whose acknowledgement window is full skips it.
    pub(super) fn broadcast_output(&mut self, data: Vec<u8>) {
        let seq = self.next_seq();
        let len = data.len();
        let now = clock::now_ms();
        let wanted = |e: OutputEncoding| self.members.iter().any(|m| m.output == e);
        let binary =
            wanted(OutputEncoding::Binary).then(|| Bytes::from(wire::binary_output(seq, &data)));
        let executor = wanted(OutputEncoding::Executor)
            .then(|| Bytes::from(wire::executor_output(seq, &clock::rfc3339(now), &data)));
        let retained = new_output(seq, Bytes::from(data), now);
        let json = wanted(OutputEncoding::Json).then(|| envelope(&retained));
        self.retain(retained);
        let queued = Instant::now().into_std();
        for i in 0..self.members.len() {
            if let Some(flow) = self.members[i].flow.as_mut()
                && !flow.admit(seq, len)
            {
                continue;
            }
            let (frame, binary) = match self.members[i].output {
                OutputEncoding::Binary => (binary.clone(), true),
                OutputEncoding::Json => (json.clone(), false),
                OutputEncoding::Executor => (executor.clone(), false),
            };
            let Some(frame) = frame else {
                continue;
            };
            let out = Outbound::Output {
                frame,
                binary,
                queued,
            };
            self.deliver(i, out);
        }
    }

    /// Keeps a numbered frame for replay: in the ring, and in the store behind. While the
    /// store refuses writes, both are bounded instead: the ring evicts frames not yet
    /// persisted, and the backlog sheds its oldest.
    pub(super) fn retain(&mut self, frame: Frame) {
        let refusing = self.sequences.refusing();
        self.ring.push(frame.clone());
        self.ring.evict(match refusing {
            true => u64::MAX,
            false => self.sequences.persisted().upto,
        });
        self.sequences.send(Persist::Frame(frame));
        if refusing {
            self.sequences.shed();
        }
    }

    /// A frame for one member only: numbered from the shared counter, never retained.
    pub(super) fn personal(&mut self, frame: SessionFrame) -> Bytes {
        let seq = self.next_seq();
        encode_frame(seq, &frame)
    }

    /// Queues a frame for member `i` without waiting. A full queue marks it lagging; once
    /// its queue has room again it gets `PTY_OUTPUT_LAGGED` and a fresh keyframe instead of
    /// the output it missed, at most once per `REKEY_PACE` while output goes on (a frame
    /// that is not output re-keys it at once, so the session's last word always reaches
    /// it after the screen). Whether `out` was queued.
    pub(super) fn deliver(&mut self, i: usize, out: Outbound) -> bool {
        self.members[i].membership_tail = None;
        if self.members[i].lagged {
            let output = matches!(out, Outbound::Output { .. });
            let m = &self.members[i];
            let paced = m.rekeyed.is_none_or(|at| at.elapsed() >= REKEY_PACE);
            // Room for the error, the keyframe and the frame itself.
            if m.out.capacity() < 3 || (output && !paced) {
                return false;
            }
            self.resync(i);
            if output {
                // The keyframe already shows it.
                return false;
            }
        }
        let m = &mut self.members[i];
        if let Err(mpsc::error::TrySendError::Full(_)) = m.out.try_send(out) {
            tracing::debug!(session_id = %self.id, client_id = %m.client_id, "viewer lagging");
            m.lagged = true;
            return false;
        }
        true
    }

    /// `PTY_OUTPUT_LAGGED` and a fresh keyframe for member `i`, in place of what it missed.
    /// Members re-keyed at the same point of the stream share the two frames.
    pub(super) fn resync(&mut self, i: usize) {
        let frames = match &self.rekey {
            Some(frames) => frames.clone(),
            None => {
                let frames = [self.lagged_notice(), self.personal_keyframe()];
                self.rekey = Some(frames.clone());
                frames
            }
        };
        let m = &mut self.members[i];
        m.lagged = false;
        m.rekeyed = Some(Instant::now());
        m.membership_tail = None;
        for f in frames {
            let _ = m.out.try_send(Outbound::Frame(f));
        }
    }

    /// An acknowledgement: the member's window moves on, and a member whose output was
    /// skipped gets a keyframe once it has caught up.
    pub(super) fn ack(&mut self, client_id: &str, ack: wire::Ack) -> Result<(), SessionRefusal> {
        let sequence = ack.sequence;
        let i = self.index(client_id).ok_or_else(|| {
            SessionRefusal::new(ErrorCode::InvalidRequest, "join the session first")
        })?;
        if sequence > self.sequences.current() {
            return Err(SessionRefusal::new(
                ErrorCode::InvalidRequest,
                format!("sequence {sequence} has not been sent yet"),
            ));
        }
        let flow = self.members[i].flow.get_or_insert_with(Window::default);
        if let Some(asked) = ack.window_bytes {
            flow.limit(asked as usize);
        }
        if flow.ack(sequence) {
            let keyframe = self.personal_keyframe();
            self.deliver(i, Outbound::Frame(keyframe));
        }
        Ok(())
    }

    pub(super) fn deliver_to(&mut self, client_id: &str, json: Bytes) {
        if let Some(i) = self.index(client_id) {
            self.deliver(i, Outbound::Frame(json));
        }
    }

    pub(super) fn index(&self, client_id: &str) -> Option<usize> {
        self.members.index(client_id)
    }

    pub(super) fn output(&mut self, data: Vec<u8>) {
        self.clocks.touch();
        self.compact_at = None;
        self.screen.feed(&data);
        if let Some(ShellSide { scanner, state }) = self.shell.as_mut() {
            let (pty, prompted) = (&self.pty, state.prompted);
            scanner.scan(&data, |piece| state.on_piece(piece, pty));
            if state.prompted && !prompted {
                self.publish_status();
            }
        }
        self.broadcast_output(data);
        if self.keyframes.output() {
            self.broadcast_keyframe();
        }
    }

    /// A keyframe of the current screen, anchored at the last frame numbered so far.
    pub(super) fn keyframe_frame(&mut self) -> SessionFrame {
        let (cols, rows) = self.screen.size();
        SessionFrame::Keyframe {
            snapshot: Base64Bytes(self.screen.snapshot()),
            snapshot_format: SNAPSHOT_FORMAT.into(),
            snapshot_cols: cols,
            snapshot_rows: rows,
            anchor_sequence: self.sequences.current(),
        }
    }

    /// `PTY_OUTPUT_LAGGED`, for a member that missed output: a keyframe follows it.
    pub(super) fn lagged_notice(&mut self) -> Bytes {
        self.personal(SessionFrame::Error {
            code: PtyErrorCode::PtyOutputLagged,
            message: "this viewer fell behind; continuing from a keyframe".into(),
        })
    }

    pub(super) fn personal_keyframe(&mut self) -> Bytes {
        let frame = self.keyframe_frame();
        self.personal(frame)
    }

    /// The periodic keyframe. A member past its window skips it as it skips output: it gets
    /// a keyframe of its own once it catches up, so a flood's keyframes (one per
    /// `--keyframe-interval-frames` outputs) cost it nothing meanwhile.
    pub(super) fn broadcast_keyframe(&mut self) {
        let frame = self.keyframe_frame();
        self.broadcast_to(frame, |m| !m.flow.as_ref().is_some_and(Window::skipping));
        self.keyframes.reset(Instant::now());
    }

    pub(super) fn publish_status(&self) {
        let (cols, rows) = self.screen.size();
        let (ttl_end_ms, idle_timeout) = self.clocks.limits();
        self.status.send_replace(LiveStatus {
            controllers: self.members.count(Role::Controller),
            observers: self.members.count(Role::Observer),
            cols,
            rows,
            prompted: self.shell.as_ref().is_some_and(|s| s.state.prompted),
            busy: self.busy(),
            paused: self.clocks.paused,
            ttl_end_ms,
            idle_timeout,
        });
    }

    pub(super) fn membership_changed(&mut self, skip: Option<&str>) -> Bytes {
        self.publish_status();
        let frame = self.members.frame();
        let json = self.number(frame);
        for i in 0..self.members.len() {
            if skip != Some(self.members[i].client_id.as_str()) {
                self.deliver_membership(i, json.clone());
            }
        }
        json
    }

    /// A membership frame for member `i`: in place of the one at the tail of its queue, if
    /// that is still waiting there, else queued.
    pub(super) fn deliver_membership(&mut self, i: usize, json: Bytes) {
        if let Some(slot) = &self.members[i].membership_tail {
            let mut waiting = slot.lock().unwrap();
            if waiting.is_some() {
                *waiting = Some(json);
                return;
            }
        }
        let slot = MembershipSlot::new(Mutex::new(Some(json)));
        if self.deliver(i, Outbound::Membership(slot.clone())) {
            self.members[i].membership_tail = Some(slot);
        }
    }
}
