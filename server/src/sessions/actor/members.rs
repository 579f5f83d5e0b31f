//! Membership: joins (fresh or resumed), leaves, the controller role, input and resizes by
//! the controller, and keyframes on request.

use bytes::Bytes;
use tokio::time::Instant;
use wire::{ErrorCode, PtyErrorCode, Role, SessionFrame};

use super::backlog::Persist;
use super::roster::Granted;
use super::{Actor, KEYFRAME_REQUEST_INTERVAL, Member};
use crate::audit;
use crate::sessions::pty::InputError;
use crate::sessions::{
    JoinRequest, Joined, Outbound, Replay, ScreenCursor, ScreenText, SessionRefusal,
};

impl Actor {
    pub(super) fn join(&mut self, req: JoinRequest) -> Result<Joined, SessionRefusal> {
        if self.close_reason.is_some() {
            return Err(SessionRefusal::new(
                ErrorCode::Internal,
                "the session is closing",
            ));
        }
        let (Granted { role, downgrade }, first_controller) =
            self.members.admit(req.role, req.scope)?;
        if role == Role::Controller {
            self.activity();
        }
        if first_controller && let Some((cols, rows)) = req.size {
            self.apply_resize(cols, rows)
                .map_err(|m| SessionRefusal::new(ErrorCode::Internal, m))?;
        }
        let client_id = uuid::Uuid::now_v7().to_string();
        let first = self.personal(SessionFrame::RoleAssigned {
            role,
            client_id: client_id.clone(),
            downgraded: downgrade.as_ref().map(|_| true),
            reason: downgrade,
        });
        let replay = match req.replay_from {
            None => Replay::None,
            Some(after) => self.replay_plan(after),
        };
        tracing::info!(
            session_id = %self.id, %client_id, role = ?role, scope = %req.scope,
            label = req.label.as_deref().unwrap_or(""), "member joined"
        );
        self.members.add(Member {
            client_id: client_id.clone(),
            role,
            scope: req.scope,
            label: req.label,
            out: req.out,
            output: req.output,
            flow: None,
            lagged: false,
            rekeyed: None,
            last_keyframe_request: None,
            membership_tail: None,
        });
        let rest = match replay {
            Replay::None => {
                let membership = self.membership_changed(Some(&client_id));
                vec![membership, self.personal_keyframe()]
            }
            _ => {
                let keyframe = self.personal_keyframe();
                vec![keyframe, self.membership_changed(Some(&client_id))]
            }
        };
        Ok(Joined {
            client_id,
            role,
            first,
            replay,
            rest,
        })
    }

    /// Which retained frames follow `after`; the store holds what the ring no longer does.
    /// Output the store refused is not replayable: what the backlog shed, and what the ring
    /// evicted while it waits for the store.
    pub(super) fn replay_plan(&self, after: u64) -> Replay {
        let current = self.sequences.current();
        let ring_oldest = self.ring.oldest();
        let persisted = self.sequences.persisted();
        let waiting = ring_oldest
            .filter(|&o| o > persisted.upto + 1)
            .map(|o| o - 1);
        let floor = [
            persisted.floor,
            self.sequences.lost_upto(),
            waiting.unwrap_or(0),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        if !crate::sessions::replay::replayable(after, floor, current) {
            return Replay::OutOfRange { floor, current };
        }
        let store = match ring_oldest {
            Some(r) if r > after + 1 => Some((after, r)),
            Some(_) => None,
            None => Some((after, current + 1)),
        };
        Replay::Range {
            store,
            ring: self.ring.after(after).cloned().collect(),
        }
    }

    pub(super) fn leave(&mut self, client_id: &str) -> Option<Bytes> {
        let m = self.members.remove(client_id)?;
        tracing::info!(session_id = %self.id, client_id, role = ?m.role, "member left");
        Some(self.membership_changed(None))
    }

    /// The member, if it holds the controller role with a scope that allows control.
    pub(super) fn controller(&self, client_id: &str, what: &str) -> Result<usize, SessionRefusal> {
        self.members.controller(client_id, what).inspect_err(|e| {
            if e.code == ErrorCode::PermissionDenied {
                tracing::info!(session_id = %self.id, client_id, what, "denied write from a non-controller");
            }
        })
    }

    pub(super) fn input(&mut self, client_id: &str, data: Vec<u8>) -> Result<(), SessionRefusal> {
        self.controller(client_id, "input")?;
        if let Err(refused) = self.refuse_if_paused("input") {
            let frame = self.personal(SessionFrame::Error {
                code: PtyErrorCode::SessionPaused,
                message: refused.message,
            });
            self.deliver_to(client_id, frame);
            return Ok(());
        }
        self.activity();
        if let Err(e) = self.pty.write(data) {
            let code = PtyErrorCode::PtyWriteFailed;
            let message = match e {
                InputError::Full => "input dropped: the program is not reading its terminal",
                InputError::Closed => "input dropped: the terminal is closed",
            };
            let frame = self.personal(SessionFrame::Error {
                code,
                message: message.into(),
            });
            self.deliver_to(client_id, frame);
        }
        Ok(())
    }

    /// An agent's keys (MCP `send_keys`), typed without a membership.
    pub(super) fn type_in(&mut self, data: Vec<u8>) -> Result<(), SessionRefusal> {
        self.refuse_if_paused("input")?;
        self.activity();
        self.pty.write(data).map_err(|e| {
            let message = match e {
                InputError::Full => "input dropped: the program is not reading its terminal",
                InputError::Closed => "input dropped: the terminal is closed",
            };
            SessionRefusal::new(ErrorCode::Internal, message)
        })
    }

    /// The visible screen as text, and what runs in the terminal now.
    pub(super) fn screen_text(&mut self) -> ScreenText {
        let cursor = self.screen.cursor();
        let (cols, rows) = self.screen.size();
        let running = match self.shell.as_ref().and_then(|s| s.state.running_line()) {
            Some(line) => Some(line.to_owned()),
            None => self.pty.foreground_command(),
        };
        ScreenText {
            lines: self.screen.text(),
            cursor: ScreenCursor {
                row: cursor.row,
                col: cursor.col,
            },
            cols,
            rows,
            running,
        }
    }

    pub(super) fn apply_resize(&mut self, cols: u16, rows: u16) -> Result<(), String> {
        self.pty
            .resize(cols, rows)
            .map_err(|e| format!("resize failed: {e}"))?;
        self.screen.resize(cols, rows);
        self.broadcast(SessionFrame::Resize { cols, rows }, None);
        self.sequences.send(Persist::Size(cols, rows));
        self.publish_status();
        Ok(())
    }

    pub(super) fn resize_by(
        &mut self,
        client_id: &str,
        cols: u16,
        rows: u16,
    ) -> Result<(), SessionRefusal> {
        self.controller(client_id, "resize")?;
        if let Err(message) = self.apply_resize(cols, rows) {
            let frame = self.personal(SessionFrame::Error {
                code: PtyErrorCode::PtyResizeFailed,
                message,
            });
            self.deliver_to(client_id, frame);
        }
        Ok(())
    }

    pub(super) fn request_role(
        &mut self,
        client_id: &str,
        role: Role,
    ) -> Result<(), SessionRefusal> {
        let i = self.members.joined(client_id)?;
        let (current, scope) = (self.members[i].role, self.members[i].scope);
        let Granted {
            role: granted,
            downgrade,
        } = self.members.grant(role, current, scope)?;
        let assigned = self.personal(SessionFrame::RoleAssigned {
            role: granted,
            client_id: client_id.to_owned(),
            downgraded: downgrade.as_ref().map(|_| true),
            reason: downgrade,
        });
        self.deliver(i, Outbound::Frame(assigned));
        if granted != current {
            if granted == Role::Controller {
                self.activity();
            }
            self.members[i].role = granted;
            self.audit.record(
                audit::Record::new(audit::Event::RoleChanged, &self.id)
                    .client(client_id)
                    .detail(audit::Detail::Role {
                        from: current,
                        to: granted,
                    }),
            );
            self.membership_changed(None);
        }
        Ok(())
    }

    pub(super) fn request_keyframe(&mut self, client_id: &str) -> Result<(), SessionRefusal> {
        let i = self.members.joined(client_id)?;
        let now = Instant::now();
        if self.members[i]
            .last_keyframe_request
            .is_some_and(|t| now.duration_since(t) < KEYFRAME_REQUEST_INTERVAL)
        {
            return Err(SessionRefusal::new(
                ErrorCode::RateLimited,
                "keyframes can be requested once per second",
            ));
        }
        self.members[i].last_keyframe_request = Some(now);
        let frame = self.personal_keyframe();
        self.deliver(i, Outbound::Frame(frame));
        Ok(())
    }
}
