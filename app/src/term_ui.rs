//! What the terminal page and its connection share: the page's signals, the commands it
//! sends the connection, and how a session ended. Both import it; neither imports the other.

use leptos::prelude::*;

use crate::api::Auth;
use wire::Role;

/// What the page asks of its connection (the browser build sends all of them).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub enum TermCommand {
    Input(String),
    Fit,
    RequestRole(Role),
    /// Repaint from a fresh keyframe (the Resync button).
    Resync,
    /// Output was skipped under a flood; a keyframe catches the screen up once drained.
    CatchUp,
    /// Output up to this sequence is rendered (flow control).
    Ack(u64),
    /// Find this text in the scrollback, onwards (`true`) or back.
    Find(String, bool),
    /// Turn xterm.js's screen-reader mode on or off.
    ScreenReader(bool),
}

/// How a screen larger than its pane is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoom {
    /// Scaled down to the pane's width, however small its font gets (a wall's tile).
    Fit,
    /// At full size, the pane panning over it.
    Actual,
    /// Scaled to the width while its font stays readable, else at full size.
    Readable,
}

/// A member as shown: client id and label.
pub type Member = (String, Option<String>);

/// How the session ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    pub exit_code: Option<i32>,
    pub reason: String,
    pub detail: Option<String>,
}

/// The page's view of its connection, written by the connection task.
#[derive(Clone, Copy)]
pub struct TermUi {
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub auth: Auth,
    pub status: RwSignal<String>,
    pub role: RwSignal<Option<Role>>,
    pub client_id: RwSignal<Option<String>>,
    /// (controllers, observers) as (client id, label).
    pub members: RwSignal<(Vec<Member>, Vec<Member>)>,
    pub closed: RwSignal<Option<Closed>>,
    pub notice: RwSignal<Option<String>>,
    /// The key bar's Ctrl is held down: the next key typed is sent as its control code.
    pub ctrl: RwSignal<bool>,
    /// Whether the last search found its text.
    pub found: RwSignal<Option<bool>>,
    /// How an observer wants a screen larger than the pane shown, and how it is shown.
    pub zoom: RwSignal<Zoom>,
    pub zoomed: RwSignal<Zoom>,
    #[cfg(feature = "hydrate")]
    pub commands:
        StoredValue<Option<futures::channel::mpsc::UnboundedSender<TermCommand>>, LocalStorage>,
}

impl TermUi {
    pub fn new(auth: Auth) -> TermUi {
        TermUi {
            auth,
            status: RwSignal::new("starting".into()),
            role: RwSignal::new(None),
            client_id: RwSignal::new(None),
            members: RwSignal::new((Vec::new(), Vec::new())),
            closed: RwSignal::new(None),
            notice: RwSignal::new(None),
            ctrl: RwSignal::new(false),
            found: RwSignal::new(None),
            zoom: RwSignal::new(Zoom::Readable),
            zoomed: RwSignal::new(Zoom::Actual),
            #[cfg(feature = "hydrate")]
            commands: StoredValue::new_local(None),
        }
    }

    pub fn send(&self, cmd: TermCommand) {
        #[cfg(feature = "hydrate")]
        self.commands.with_value(|tx| {
            if let Some(tx) = tx {
                let _ = tx.unbounded_send(cmd);
            }
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = cmd;
    }
}

/// What a key typed sends: with the key bar's Ctrl held, a letter (or one of `@[\]^_`)
/// becomes its control code, once.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub fn with_ctrl(ctrl: bool, data: String) -> String {
    match data.as_bytes() {
        [b] if ctrl && (b.is_ascii_alphabetic() || b"@[\\]^_".contains(b)) => {
            char::from(b.to_ascii_uppercase() & 0x1f).to_string()
        }
        _ => data,
    }
}

#[cfg(test)]
mod tests {
    use super::with_ctrl;

    #[test]
    fn the_key_bars_ctrl_turns_the_next_letter_into_its_control_code() {
        assert_eq!(with_ctrl(true, "c".into()), "\u{3}");
        assert_eq!(with_ctrl(true, "D".into()), "\u{4}");
        assert_eq!(with_ctrl(true, "[".into()), "\u{1b}");
        assert_eq!(with_ctrl(false, "c".into()), "c");
        assert_eq!(
            with_ctrl(true, "ls".into()),
            "ls",
            "pasted text is left alone"
        );
        assert_eq!(with_ctrl(true, "1".into()), "1");
    }
}
