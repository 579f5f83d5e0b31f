//! What the player's timeline marks: each A2A task, and the session's own events read from
//! its stored frames (who joined and left, who took or gave up control, each resize, each
//! pause and resume, each snapshot).

use wire::{ClientRef, SessionFrame};

/// One mark on the timeline, at unix ms `at_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub at_ms: f64,
    /// What a hover or a screen reader says of it.
    pub label: String,
    pub what: What,
}

#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// An A2A task, by id.
    Task(String),
    Joined,
    Left,
    /// A member's role changed.
    Role,
    Resized,
    Paused,
    Resumed,
    Snapshot,
}

impl What {
    /// The `data-event` name of a session event (None for a task).
    pub fn event(&self) -> Option<&'static str> {
        match self {
            What::Task(_) => None,
            What::Joined => Some("join"),
            What::Left => Some("leave"),
            What::Role => Some("role"),
            What::Resized => Some("resize"),
            What::Paused => Some("pause"),
            What::Resumed => Some("resume"),
            What::Snapshot => Some("snapshot"),
        }
    }

    /// The glyph on the timeline.
    pub fn glyph(&self) -> &'static str {
        match self {
            What::Task(_) => "▾",
            What::Joined => "+",
            What::Left => "−",
            What::Role => "◆",
            What::Resized => "↔",
            What::Paused => "⏸",
            What::Resumed => "▶",
            What::Snapshot => "◉",
        }
    }
}

/// A member as the timeline names it: its label and the end of its id (ids made close
/// together share their start).
fn name(c: &ClientRef) -> String {
    let chars: Vec<char> = c.client_id.chars().collect();
    let id: String = chars[chars.len().saturating_sub(5)..].iter().collect();
    match &c.label {
        Some(label) if !label.is_empty() => format!("{label} ·{id}"),
        _ => format!("client ·{id}"),
    }
}

/// The session's events from its stored `Resize`, `MembershipChanged`, `Paused`, `Resumed`
/// and `Snapshotted` frames, in order: each membership change is compared with the one
/// before it.
pub fn session_events<'a>(
    frames: impl IntoIterator<Item = (f64, &'a SessionFrame)>,
) -> Vec<Marker> {
    let mut before: Vec<(&'a ClientRef, &'static str)> = Vec::new();
    let mut marks = Vec::new();
    for (at_ms, frame) in frames {
        match frame {
            SessionFrame::Resize { cols, rows } => marks.push(Marker {
                at_ms,
                label: format!("resized to {cols}×{rows}"),
                what: What::Resized,
            }),
            SessionFrame::Paused { idle, .. } => marks.push(Marker {
                at_ms,
                label: match idle {
                    true => "paused for being idle".to_owned(),
                    false => "paused".to_owned(),
                },
                what: What::Paused,
            }),
            SessionFrame::Resumed {} => marks.push(Marker {
                at_ms,
                label: "resumed".to_owned(),
                what: What::Resumed,
            }),
            SessionFrame::Snapshotted { snapshot_id } => marks.push(Marker {
                at_ms,
                label: format!("snapshot {snapshot_id}"),
                what: What::Snapshot,
            }),
            SessionFrame::MembershipChanged {
                controllers,
                observers,
            } => {
                let now: Vec<(&ClientRef, &'static str)> = (controllers.iter())
                    .map(|c| (c, "controller"))
                    .chain(observers.iter().map(|c| (c, "observer")))
                    .collect();
                let role_in = |list: &[(&ClientRef, &'static str)], c: &ClientRef| {
                    list.iter()
                        .find(|(m, _)| m.client_id == c.client_id)
                        .map(|(_, role)| *role)
                };
                for (c, role) in &now {
                    let (label, what) = match role_in(&before, c) {
                        None => (format!("{} joined as {role}", name(c)), What::Joined),
                        Some(was) if was != *role => {
                            (format!("{} became {role}", name(c)), What::Role)
                        }
                        Some(_) => continue,
                    };
                    marks.push(Marker { at_ms, label, what });
                }
                for (c, _) in &before {
                    if role_in(&now, c).is_none() {
                        marks.push(Marker {
                            at_ms,
                            label: format!("{} left", name(c)),
                            what: What::Left,
                        });
                    }
                }
                before = now;
            }
            _ => {}
        }
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, label: Option<&str>) -> ClientRef {
        ClientRef {
            client_id: id.into(),
            label: label.map(Into::into),
        }
    }

    fn members(controllers: &[&ClientRef], observers: &[&ClientRef]) -> SessionFrame {
        SessionFrame::MembershipChanged {
            controllers: controllers.iter().map(|c| (*c).clone()).collect(),
            observers: observers.iter().map(|c| (*c).clone()).collect(),
        }
    }

    #[test]
    fn joins_role_changes_leaves_and_resizes_are_marked_in_order_with_who_and_what() {
        let ops = member("0190-aaaa-11111", Some("ops"));
        let link = member("0190-aaaa-22222", None);
        let frames = [
            members(&[], &[&ops]),
            members(&[&ops], &[]),
            members(&[&ops], &[&link]),
            SessionFrame::Resize {
                cols: 120,
                rows: 40,
            },
            members(&[], &[&link]),
        ];
        let marks = session_events(frames.iter().enumerate().map(|(i, f)| (i as f64, f)));
        let got: Vec<(f64, &str, Option<&str>)> = marks
            .iter()
            .map(|m| (m.at_ms, m.label.as_str(), m.what.event()))
            .collect();
        assert_eq!(
            got,
            [
                (0.0, "ops ·11111 joined as observer", Some("join")),
                (1.0, "ops ·11111 became controller", Some("role")),
                (2.0, "client ·22222 joined as observer", Some("join")),
                (3.0, "resized to 120×40", Some("resize")),
                (4.0, "ops ·11111 left", Some("leave")),
            ]
        );
    }

    #[test]
    fn a_membership_change_that_changes_nobody_s_role_marks_nothing() {
        let ops = member("c1", Some("ops"));
        let frames = [members(&[&ops], &[]), members(&[&ops], &[])];
        assert_eq!(session_events(frames.iter().map(|f| (0.0, f))).len(), 1);
    }

    #[test]
    fn pauses_resumes_and_snapshots_are_marked() {
        let frames = [
            SessionFrame::Paused {
                method: wire::PauseMethod::CgroupFreezer,
                idle: true,
            },
            SessionFrame::Resumed {},
            SessionFrame::Snapshotted {
                snapshot_id: "s1".into(),
            },
        ];
        let marks = session_events(frames.iter().enumerate().map(|(i, f)| (i as f64, f)));
        let got: Vec<(&str, Option<&str>)> = marks
            .iter()
            .map(|m| (m.label.as_str(), m.what.event()))
            .collect();
        assert_eq!(
            got,
            [
                ("paused for being idle", Some("pause")),
                ("resumed", Some("resume")),
                ("snapshot s1", Some("snapshot")),
            ]
        );
    }
}
