//! Who is in a session: its members in the order they joined, and the rules of its roles.
//! A controller needs `pty:control`; past `max_controllers` a controller joins (or asks)
//! as an observer, and past `max_observers` an observer is turned away.

use std::ops::{Index, IndexMut};

use tokio::sync::mpsc;
use tokio::time::Instant;
use wire::{ClientRef, ErrorCode, Role, SessionFrame};

use super::window::Window;
use crate::auth::Scope;
use crate::sessions::{MembershipSlot, Outbound, OutputEncoding, SessionRefusal};

pub(super) struct Member {
    pub client_id: String,
    pub role: Role,
    pub scope: Scope,
    pub label: Option<String>,
    pub out: mpsc::Sender<Outbound>,
    /// How it takes output.
    pub output: OutputEncoding,
    /// Set once the member acknowledges output (`ptyhost.ack`).
    pub flow: Option<Window>,
    pub lagged: bool,
    /// When it last got `PTY_OUTPUT_LAGGED` and a keyframe (re-keying is paced).
    pub rekeyed: Option<Instant>,
    pub last_keyframe_request: Option<Instant>,
    /// The membership frame at the tail of the queue, while nothing was queued after it.
    pub membership_tail: Option<MembershipSlot>,
}

/// The role a member gets: what it asked for, or observer and why.
#[derive(Debug, PartialEq)]
pub(super) struct Granted {
    pub role: Role,
    pub downgrade: Option<String>,
}

pub(super) struct Roster {
    members: Vec<Member>,
    /// Whether anyone ever held the controller role (the first one sizes the terminal).
    had_controller: bool,
    max_controllers: usize,
    max_observers: usize,
}

impl Roster {
    pub(super) fn new(max_controllers: usize, max_observers: usize) -> Roster {
        Roster {
            members: Vec::new(),
            had_controller: false,
            max_controllers,
            max_observers,
        }
    }

    /// The role a new member asking for `wanted` with `scope` joins with, and whether it is
    /// the session's first controller; or why it may not join.
    pub(super) fn admit(
        &mut self,
        wanted: Role,
        scope: Scope,
    ) -> Result<(Granted, bool), SessionRefusal> {
        let granted = self.grant(wanted, Role::Observer, scope)?;
        if granted.role == Role::Observer && self.count(Role::Observer) >= self.max_observers {
            return Err(SessionRefusal::new(
                ErrorCode::RateLimited,
                format!("observer capacity ({}) reached", self.max_observers),
            ));
        }
        let first = granted.role == Role::Controller && !self.had_controller;
        self.had_controller |= first;
        Ok((granted, first))
    }

    /// The role a member holding `current` gets when it asks for `wanted`.
    pub(super) fn grant(
        &self,
        wanted: Role,
        current: Role,
        scope: Scope,
    ) -> Result<Granted, SessionRefusal> {
        if wanted == Role::Controller && scope < Scope::Control {
            return Err(SessionRefusal::new(
                ErrorCode::PermissionDenied,
                "a pty:observe token cannot take the controller role",
            ));
        }
        let full = self.count(Role::Controller) >= self.max_controllers;
        Ok(match (wanted, current) {
            (Role::Controller, Role::Observer) if full => Granted {
                role: Role::Observer,
                downgrade: Some(format!(
                    "controller capacity ({}) reached",
                    self.max_controllers
                )),
            },
            _ => Granted {
                role: wanted,
                downgrade: None,
            },
        })
    }

    pub(super) fn add(&mut self, member: Member) {
        self.members.push(member);
    }

    pub(super) fn remove(&mut self, client_id: &str) -> Option<Member> {
        let i = self.index(client_id)?;
        Some(self.members.remove(i))
    }

    pub(super) fn index(&self, client_id: &str) -> Option<usize> {
        self.members.iter().position(|m| m.client_id == client_id)
    }

    /// A member that joined, or why not.
    pub(super) fn joined(&self, client_id: &str) -> Result<usize, SessionRefusal> {
        self.index(client_id)
            .ok_or_else(|| SessionRefusal::new(ErrorCode::InvalidRequest, "join the session first"))
    }

    /// The member, if it holds the controller role with a scope that allows control.
    pub(super) fn controller(&self, client_id: &str, what: &str) -> Result<usize, SessionRefusal> {
        let i = self.joined(client_id)?;
        let m = &self.members[i];
        if m.role != Role::Controller || m.scope < Scope::Control {
            return Err(SessionRefusal::new(
                ErrorCode::PermissionDenied,
                format!("only the controller may send {what}"),
            ));
        }
        Ok(i)
    }

    pub(super) fn count(&self, role: Role) -> usize {
        self.members.iter().filter(|m| m.role == role).count()
    }

    pub(super) fn len(&self) -> usize {
        self.members.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Member> {
        self.members.iter()
    }

    /// Every member, taken out (the session ends).
    pub(super) fn drain(&mut self) -> impl Iterator<Item = Member> + '_ {
        self.members.drain(..)
    }

    /// `MembershipChanged`: the controllers and observers, in the order they joined.
    pub(super) fn frame(&self) -> SessionFrame {
        let refs = |role: Role| {
            self.members
                .iter()
                .filter(|m| m.role == role)
                .map(|m| ClientRef {
                    client_id: m.client_id.clone(),
                    label: m.label.clone(),
                })
                .collect()
        };
        SessionFrame::MembershipChanged {
            controllers: refs(Role::Controller),
            observers: refs(Role::Observer),
        }
    }
}

impl Index<usize> for Roster {
    type Output = Member;
    fn index(&self, i: usize) -> &Member {
        &self.members[i]
    }
}

impl IndexMut<usize> for Roster {
    fn index_mut(&mut self, i: usize) -> &mut Member {
        &mut self.members[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(client_id: &str, role: Role, scope: Scope) -> Member {
        Member {
            client_id: client_id.into(),
            role,
            scope,
            label: None,
            out: mpsc::channel(1).0,
            output: OutputEncoding::Json,
            flow: None,
            lagged: false,
            rekeyed: None,
            last_keyframe_request: None,
            membership_tail: None,
        }
    }

    fn join(
        r: &mut Roster,
        id: &str,
        wanted: Role,
        scope: Scope,
    ) -> Result<(Granted, bool), SessionRefusal> {
        let admitted = r.admit(wanted, scope)?;
        r.add(member(id, admitted.0.role, scope));
        Ok(admitted)
    }

    #[test]
    fn the_first_controller_is_marked_and_one_past_capacity_joins_as_observer() {
        let mut r = Roster::new(1, 8);
        let (a, first) = join(&mut r, "a", Role::Controller, Scope::Control).unwrap();
        assert_eq!((a.role, first), (Role::Controller, true));
        let (b, first) = join(&mut r, "b", Role::Controller, Scope::Control).unwrap();
        assert_eq!(b.role, Role::Observer);
        assert!(!first);
        assert_eq!(
            b.downgrade.as_deref(),
            Some("controller capacity (1) reached")
        );
        r.remove("a");
        let (c, first) = join(&mut r, "c", Role::Controller, Scope::Control).unwrap();
        assert_eq!(
            (c.role, first),
            (Role::Controller, false),
            "only the first sizes"
        );
    }

    #[test]
    fn an_observe_token_never_controls_and_observers_stop_at_capacity() {
        let mut r = Roster::new(1, 1);
        let refused = r.admit(Role::Controller, Scope::Observe).unwrap_err();
        assert_eq!(refused.code, ErrorCode::PermissionDenied);
        join(&mut r, "a", Role::Observer, Scope::Observe).unwrap();
        let full = r.admit(Role::Observer, Scope::Control).unwrap_err();
        assert_eq!(full.code, ErrorCode::RateLimited);
    }

    #[test]
    fn only_a_joined_controller_with_control_scope_may_write() {
        let mut r = Roster::new(2, 2);
        join(&mut r, "c", Role::Controller, Scope::Control).unwrap();
        join(&mut r, "o", Role::Observer, Scope::Control).unwrap();
        assert_eq!(r.controller("c", "input").unwrap(), 0);
        assert_eq!(
            r.controller("o", "input").unwrap_err().code,
            ErrorCode::PermissionDenied
        );
        assert_eq!(
            r.controller("x", "input").unwrap_err().code,
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn the_membership_frame_lists_each_role_in_join_order() {
        let mut r = Roster::new(2, 2);
        for (id, role) in [
            ("o1", Role::Observer),
            ("c1", Role::Controller),
            ("o2", Role::Observer),
        ] {
            join(&mut r, id, role, Scope::Control).unwrap();
        }
        let SessionFrame::MembershipChanged {
            controllers,
            observers,
        } = r.frame()
        else {
            panic!("not a membership frame");
        };
        let ids = |refs: Vec<ClientRef>| refs.into_iter().map(|c| c.client_id).collect::<Vec<_>>();
        assert_eq!(ids(controllers), ["c1"]);
        assert_eq!(ids(observers), ["o1", "o2"]);
    }
}
