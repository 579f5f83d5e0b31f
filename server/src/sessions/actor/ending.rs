//! How a session ends: its program is ended (or, for a managed one while ptyhost stops,
//! left running), the final keyframe and `Closed` go out, every member is said goodbye to,
//! and the history is durable before the session retires.

use bytes::Bytes;
use tokio::sync::oneshot;
use wire::{CloseReason, SessionFrame};

use super::backlog::Persist;
use super::{Actor, FAREWELL_WAIT};
use crate::sessions::Outbound;
use crate::sessions::host::Host;
use crate::sessions::pty::Exit;

impl Actor {
    /// Whether ptyhost is stopping while this session's program lives on (managed).
    fn detaching(&self) -> bool {
        matches!(self.host, Host::Tmux(_))
            && self.close_reason == Some(CloseReason::InstanceTerminated)
    }

    /// Ends the program: SIGHUP to its process group; a managed program's tmux session is
    /// killed instead, unless ptyhost is only stopping (then its client just detaches).
    pub(super) fn end_program(&self) {
        match &self.host {
            Host::Tmux(tmux) if !self.detaching() => tmux.kill(&self.id),
            _ => self.pty.signal_group(crate::sys::Signal::HUP),
        }
    }

    /// Emits the final keyframe and the one `Closed`, says goodbye to every member, waits
    /// until the history is durable, and retires the session.
    pub(super) async fn close(mut self, exit: Exit) {
        if let Some(shell) = self.shell.as_mut() {
            // A shell that ended by itself was ended by its command; one that was ended
            // (terminated, or ptyhost stopping) leaves its command without a status.
            shell
                .state
                .end(exit.code.filter(|_| self.close_reason.is_none()));
        }
        if self.detaching() {
            return self.detach().await;
        }
        let out_of_memory = self.sandboxed.as_ref().is_some_and(|s| s.out_of_memory());
        let reason = match self.close_reason {
            Some(r) => r,
            None if out_of_memory => CloseReason::MemoryLimit,
            None if exit.code.is_some() => CloseReason::Normal,
            None => CloseReason::Killed,
        };
        let behind = self.behind_notice();
        let keyframe = self.keyframe_frame();
        let keyframe = self.broadcast(keyframe, None);
        let closed = self.broadcast(
            SessionFrame::Closed {
                exit_code: exit.code,
                reason,
                detail: None,
            },
            None,
        );
        let goodbye = if reason == CloseReason::InstanceTerminated {
            "server_shutdown"
        } else {
            "session_closed"
        };
        self.farewell(behind, &[keyframe, closed], goodbye);
        self.publish_status();
        let (done, flushed) = oneshot::channel();
        self.sequences.send(Persist::Close {
            exit_code: exit.code,
            reason,
            done,
        });
        let _ = flushed.await;
        if let Some(s) = &self.sandboxed {
            s.remove();
        }
        tracing::info!(session_id = %self.id, exit_code = ?exit.code, reason = ?reason, "session closed");
        self.registry.retire(&self.id);
    }
}

impl Actor {
    /// `PTY_OUTPUT_LAGGED` for the members that fell behind, or whose queue is too full
    /// to take the last frames: numbered before them, so that it reaches those members
    /// first. None while every member keeps up.
    fn behind_notice(&mut self) -> Option<Bytes> {
        let behind = (self.members.iter()).any(|m| m.lagged || m.out.capacity() == 0);
        behind.then(|| self.lagged_notice())
    }

    /// Says goodbye to every member. One that fell behind (its queue was full for the
    /// last frames) first gets `behind` (`PTY_OUTPUT_LAGGED`) and `last` — the final
    /// keyframe and `Closed` — waiting for room in its queue, so no viewer misses how the
    /// session ended, nor that it missed output before it.
    fn farewell(&mut self, behind: Option<Bytes>, last: &[Bytes], goodbye: &'static str) {
        for m in self.members.drain() {
            let mut tail: Vec<Outbound> = if m.lagged {
                (behind.iter().chain(last).cloned())
                    .map(Outbound::Frame)
                    .collect()
            } else {
                Vec::new()
            };
            tail.push(Outbound::Goodbye(goodbye));
            let out = m.out;
            tokio::spawn(async move {
                let send_all = async {
                    for o in tail {
                        if out.send(o).await.is_err() {
                            return;
                        }
                    }
                };
                let _ = tokio::time::timeout(FAREWELL_WAIT, send_all).await;
            });
        }
    }

    /// ptyhost stops, the managed program goes on: a keyframe for the next process to
    /// rebuild from, goodbyes, every frame persisted, and no `Closed`.
    async fn detach(mut self) {
        let behind = self.behind_notice();
        let keyframe = self.keyframe_frame();
        let keyframe = self.broadcast(keyframe, None);
        self.farewell(behind, &[keyframe], "server_shutdown");
        let (done, flushed) = oneshot::channel();
        self.sequences.send(Persist::Flush(done));
        let _ = flushed.await;
        tracing::info!(session_id = %self.id, "detached from a managed session; it goes on");
        self.registry.retire(&self.id);
    }
}
