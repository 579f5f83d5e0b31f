//! The browser side of a terminal: xterm.js fed by a pty-ws/v1 connection that joins,
//! replays after a drop without resetting the screen, hands the controller role back and
//! forth, and keeps xterm.js from drowning in a flood.

use std::cell::Cell;
use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::{FutureExt, SinkExt, StreamExt};
use gloo_net::websocket::futures::WebSocket;
use gloo_net::websocket::{Message, WebSocketError};
use js_sys::Uint8Array;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use xterm_js_rs::Terminal;
use xterm_js_rs::addons::fit::FitAddon;

use crate::term_ui::{Closed, TermCommand, TermUi};
use crate::xterm::{SearchAddon, ext, open_terminal, scale_into, unscale};
use wire::server::{ServerFrame, ServerOp};
use wire::{
    Ack, ClientOp, ClientRef, Dim, ErrorCode, JoinSession, PtyErrorCode, Role, SessionFrame,
    SessionResize,
};

/// Above this many bytes handed to xterm.js and not yet parsed, output is skipped...
const HIGH_WATER: usize = 512 * 1024;
/// ...until xterm.js is back below this, when a keyframe catches the screen up.
const LOW_WATER: usize = 64 * 1024;
/// Rendered output is acknowledged (flow control) after this many bytes, and whenever
/// xterm.js has parsed everything it was given.
const ACK_EVERY: usize = 32 * 1024;
const MAX_BACKOFF_MS: u32 = 10_000;

/// Opens xterm.js in `host` and runs the connection until the page goes away.
pub fn start(host: web_sys::HtmlElement, session_id: String, token: String, ui: TermUi) {
    let (tx, rx) = unbounded::<TermCommand>();
    ui.commands.set_value(Some(tx.clone()));

    let (term, fit) = open_terminal(&host);
    let search = SearchAddon::new();
    let _ = ext(&term).try_load_addon(&search);
    // What is selected is copied, as terminals do on select.
    let selecting = term.clone();
    let on_selection = Closure::<dyn FnMut()>::new(move || {
        if selecting.has_selection() {
            copy_to_clipboard(&selecting.get_selection());
        }
    });
    term.on_selection_change(on_selection.as_ref().unchecked_ref());
    on_selection.forget();

    // Tab leaves the terminal for the page's controls while it takes no input (an
    // observer's), and Shift+Tab always does: every control stays reachable by keyboard.
    let on_key = Closure::<dyn FnMut(web_sys::KeyboardEvent) -> bool>::new(
        move |ev: web_sys::KeyboardEvent| {
            let controls = ui.role.get_untracked() == Some(Role::Controller);
            !(ev.key() == "Tab" && (ev.shift_key() || !controls))
        },
    );
    term.attach_custom_key_event_handler(on_key.as_ref().unchecked_ref());
    on_key.forget();

    let keys = tx.clone();
    let on_data = Closure::<dyn FnMut(String)>::new(move |data: String| {
        let _ = keys.unbounded_send(TermCommand::Input(data));
    });
    term.on_data(on_data.as_ref().unchecked_ref());
    on_data.forget();
    let fits = tx.clone();
    let on_resize = Closure::<dyn FnMut()>::new(move || {
        let _ = fits.unbounded_send(TermCommand::Fit);
    });
    if let Some(w) = web_sys::window() {
        let _ = w.add_event_listener_with_callback("resize", on_resize.as_ref().unchecked_ref());
    }
    on_resize.forget();

    let screen = XtermView {
        term,
        fit,
        search,
        host,
        tx,
        pending: Rc::new(Cell::new(0)),
        behind: Rc::new(Cell::new(false)),
        unacked: Rc::new(Cell::new(0)),
        ui,
    };
    leptos::task::spawn_local(run(screen, session_id, token, ui, rx));
}

/// xterm.js and what is in flight to it.
struct XtermView {
    term: Rc<Terminal>,
    fit: FitAddon,
    search: SearchAddon,
    host: web_sys::HtmlElement,
    tx: UnboundedSender<TermCommand>,
    /// Bytes written to xterm.js whose write callback has not run yet.
    pending: Rc<Cell<usize>>,
    /// Output is being skipped until a keyframe catches up.
    behind: Rc<Cell<bool>>,
    /// Output bytes rendered since the last acknowledgement.
    unacked: Rc<Cell<usize>>,
    ui: TermUi,
}

impl XtermView {
    /// Writes an output frame and acknowledges it once xterm.js has parsed it, so the
    /// server never sends far beyond what this tab has rendered.
    fn write_output(&self, bytes: &[u8], seq: u64) {
        let len = bytes.len();
        let (pending, unacked, tx) = (self.pending.clone(), self.unacked.clone(), self.tx.clone());
        self.write_then(bytes, move || {
            let total = unacked.get() + len;
            if total >= ACK_EVERY || pending.get() == 0 {
                unacked.set(0);
                let _ = tx.unbounded_send(TermCommand::Ack(seq));
            } else {
                unacked.set(total);
            }
        });
    }

    fn write(&self, bytes: &[u8]) {
        self.write_then(bytes, || {});
    }

    /// Writes to xterm.js; `parsed` runs once xterm.js has parsed these bytes.
    fn write_then(&self, bytes: &[u8], parsed: impl FnOnce() + 'static) {
        let len = bytes.len();
        self.pending.set(self.pending.get() + len);
        let (pending, behind, tx) = (self.pending.clone(), self.behind.clone(), self.tx.clone());
        let done = Closure::once_into_js(move || {
            let left = pending.get().saturating_sub(len);
            pending.set(left);
            if behind.get() && left < LOW_WATER {
                let _ = tx.unbounded_send(TermCommand::CatchUp);
            }
            parsed();
        });
        ext(&self.term).write_bytes(&Uint8Array::from(bytes), done.unchecked_ref());
        if self.pending.get() > HIGH_WATER {
            self.behind.set(true);
        }
    }

    /// Repaints from a keyframe: reset, the observer's size, then the snapshot.
    fn repaint(&self, snapshot: &[u8], cols: u16, rows: u16, resize: bool) {
        self.term.reset();
        if resize {
            self.resize_to(cols, rows);
        }
        self.write(snapshot);
        self.behind.set(false);
    }

    /// An observer follows the controller's size, shown as it chose (`TermUi::zoom`).
    fn resize_to(&self, cols: u16, rows: u16) {
        self.term.resize(u32::from(cols), u32::from(rows));
        let zoomed = scale_into(&self.host, self.ui.zoom.get_untracked());
        self.ui.zoomed.try_set(zoomed);
    }

    /// The size that fills the pane, for a controller.
    fn fitted(&self) -> Option<(u16, u16)> {
        let d = self.fit.propose_dimensions();
        let get = |k: &str| js_sys::Reflect::get(&d, &k.into()).ok()?.as_f64();
        let (cols, rows) = (get("cols")?, get("rows")?);
        (cols >= 1.0 && rows >= 1.0).then(|| (cols.min(1024.0) as u16, rows.min(1024.0) as u16))
    }
}

/// Where the stream stands, across reconnects.
struct Cursor {
    /// The last sequence whose effect is on screen.
    last: u64,
    /// The next keyframe must be applied (a fresh page, a lag, an out-of-range replay).
    need_keyframe: bool,
    role: Role,
    wanted: Role,
    client_id: Option<String>,
    size: (u16, u16),
    /// The session has ended: no reconnecting.
    over: bool,
    catch_up_in_flight: bool,
}

/// A client frame (a join also names the PTY extension).
pub fn frame(op: ClientOp, replay_from: Option<u64>) -> String {
    let id = format!("ui-{}", js_sys::Math::random().to_bits());
    let ts = String::from(js_sys::Date::new_0().to_iso_string());
    op.encode(&id, &ts, replay_from)
}

/// A pty-ws/v1 (JSON) socket to session `session_id` on this page's server, the token as
/// a `bearer.<base64url>` subprotocol entry.
pub fn attach(session_id: &str, token: &str) -> Option<WebSocket> {
    let location = web_sys::window()?.location();
    let scheme = match location.protocol().ok().as_deref() {
        Some("https:") => "wss",
        _ => "ws",
    };
    let host = location.host().ok()?;
    let url = format!("{scheme}://{host}/sessions/{session_id}/attach");
    let bearer = format!(
        "{}{}",
        wire::BEARER_SUBPROTOCOL_PREFIX,
        URL_SAFE_NO_PAD.encode(token)
    );
    WebSocket::open_with_protocols(&url, &[wire::SUBPROTOCOL_JSON, bearer.as_str()]).ok()
}

async fn run(
    screen: XtermView,
    session_id: String,
    token: String,
    ui: TermUi,
    mut commands: UnboundedReceiver<TermCommand>,
) {
    let mut cursor = Cursor {
        last: 0,
        need_keyframe: true,
        role: Role::Observer,
        wanted: Role::Observer,
        client_id: None,
        size: (0, 0),
        over: false,
        catch_up_in_flight: false,
    };
    let mut backoff = 500u32;
    loop {
        ui.status.try_set("connecting".into());
        let Some(ws) = attach(&session_id, &token) else {
            ui.status.try_set("cannot open a WebSocket here".into());
            return;
        };
        let (mut sink, mut stream) = ws.split();
        let mut live = false;
        loop {
            futures::select! {
                msg = stream.next().fuse() => match msg {
                    Some(Ok(Message::Text(text))) => {
                        for out in on_frame(&text, &screen, &mut cursor, &ui) {
                            let _ = sink.send(Message::Text(out)).await;
                        }
                        if !live && cursor.client_id.is_some() {
                            live = true;
                            backoff = 500;
                            ui.status.try_set("live".into());
                        }
                    }
                    Some(Ok(Message::Bytes(_))) => {}
                    Some(Err(WebSocketError::ConnectionClose(_))) | Some(Err(_)) | None => break,
                },
                cmd = commands.next() => match cmd {
                    None => {
                        let _ = sink.close().await;
                        screen.term.dispose();
                        return;
                    }
                    Some(cmd) => {
                        if let Some(out) = on_command(cmd, &screen, &mut cursor, &ui) {
                            let _ = sink.send(Message::Text(out)).await;
                        }
                    }
                },
            }
        }
        cursor.client_id = None;
        ui.members.try_set((Vec::new(), Vec::new()));
        if cursor.over {
            ui.status.try_set("session ended".into());
            return;
        }
        // A refused token ends here with a reason; anything else is retried with backoff.
        if let Err(f) = crate::api::get::<crate::api::Me>("/me", &token).await
            && f.status == 401
        {
            ui.status.try_set("signed out".into());
            ui.auth
                .sign_out(Some("This link was revoked or has expired.".into()));
            return;
        }
        ui.status.try_set(format!(
            "reconnecting in {:.1} s",
            f64::from(backoff) / 1000.0
        ));
        let wait = gloo_timers::future::TimeoutFuture::new(backoff).fuse();
        futures::pin_mut!(wait);
        loop {
            futures::select! {
                _ = wait => break,
                cmd = commands.next() => match cmd {
                    None => return,
                    Some(TermCommand::RequestRole(role)) => cursor.wanted = role,
                    Some(_) => {}
                },
            }
        }
        backoff = (backoff * 2).min(MAX_BACKOFF_MS);
    }
}

/// Applies one server frame; returns the frames to send in answer.
fn on_frame(text: &str, screen: &XtermView, c: &mut Cursor, ui: &TermUi) -> Vec<String> {
    let Ok(server) = ServerFrame::decode(text) else {
        return Vec::new();
    };
    match server.op {
        ServerOp::Hello(_) => {
            let replay_from = (c.last > 0).then_some(c.last);
            let join = JoinSession {
                role: Some(c.wanted),
                ..JoinSession::default()
            };
            vec![frame(ClientOp::Join(join), replay_from)]
        }
        ServerOp::Goodbye(goodbye) => {
            if goodbye.reason == "session_closed" {
                c.over = true;
            }
            Vec::new()
        }
        ServerOp::Error(error) => {
            match error.code {
                ErrorCode::ReplayOutOfRange => c.need_keyframe = true,
                ErrorCode::RateLimited if c.catch_up_in_flight => {
                    // Keyframes are limited to one a second: ask again shortly.
                    c.catch_up_in_flight = false;
                    let tx = screen.tx.clone();
                    leptos::task::spawn_local(async move {
                        gloo_timers::future::TimeoutFuture::new(1000).await;
                        let _ = tx.unbounded_send(TermCommand::CatchUp);
                    });
                }
                _ => {
                    ui.notice.try_set(Some(error.message));
                }
            }
            Vec::new()
        }
        ServerOp::Session(frame) => {
            on_session_frame(frame, server.sequence.unwrap_or(0), screen, c, ui)
        }
        _ => Vec::new(),
    }
}

fn on_session_frame(
    frame: SessionFrame,
    seq: u64,
    screen: &XtermView,
    c: &mut Cursor,
    ui: &TermUi,
) -> Vec<String> {
    match frame {
        SessionFrame::Output { data, .. } => {
            if seq > c.last {
                c.last = seq;
                if screen.behind.get() {
                    c.need_keyframe = true;
                } else {
                    screen.write_output(&data.0, seq);
                }
            }
        }
        SessionFrame::Keyframe {
            snapshot,
            snapshot_cols,
            snapshot_rows,
            anchor_sequence,
            ..
        } => {
            let catching_up = c.need_keyframe && screen.pending.get() < HIGH_WATER;
            if catching_up || anchor_sequence > c.last {
                screen.repaint(
                    &snapshot.0,
                    snapshot_cols,
                    snapshot_rows,
                    c.role == Role::Observer,
                );
                c.size = (snapshot_cols, snapshot_rows);
                c.need_keyframe = false;
                c.catch_up_in_flight = false;
            }
            c.last = c.last.max(anchor_sequence);
        }
        SessionFrame::Resize { cols, rows } => {
            c.last = c.last.max(seq);
            c.size = (cols, rows);
            if c.role == Role::Observer {
                screen.resize_to(cols, rows);
            }
        }
        SessionFrame::RoleAssigned {
            role,
            client_id,
            reason,
            ..
        } => {
            c.role = role;
            c.client_id = Some(client_id.clone());
            ui.client_id.try_set(Some(client_id));
            ui.role.try_set(Some(role));
            ui.notice.try_set(reason);
            ext(&screen.term)
                .options()
                .set_disable_stdin(role == Role::Observer);
            if role == Role::Controller {
                screen.term.focus();
                return fit(screen, c);
            }
            if c.size.0 > 0 {
                screen.resize_to(c.size.0, c.size.1);
            }
        }
        SessionFrame::MembershipChanged {
            controllers,
            observers,
        } => {
            let refs = |v: Vec<ClientRef>| v.into_iter().map(|r| (r.client_id, r.label)).collect();
            ui.members.try_set((refs(controllers), refs(observers)));
        }
        SessionFrame::Closed {
            exit_code,
            reason,
            detail,
        } => {
            ui.closed.try_set(Some(Closed {
                exit_code,
                reason: serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                detail,
            }));
        }
        SessionFrame::Error { code, message } => {
            if code == PtyErrorCode::PtyOutputLagged {
                c.need_keyframe = true;
            } else {
                ui.notice.try_set(Some(message));
            }
        }
        SessionFrame::Warning { message, .. } => {
            ui.notice.try_set(Some(message));
        }
        SessionFrame::Paused { idle, .. } => {
            let why = match idle {
                true => "Paused for being idle: typing resumes it.",
                false => "Paused: its processes are frozen until it resumes.",
            };
            ui.notice.try_set(Some(why.to_owned()));
        }
        SessionFrame::Resumed {} => {
            ui.notice.try_set(None);
        }
        SessionFrame::Snapshotted { snapshot_id } => {
            ui.notice
                .try_set(Some(format!("Snapshot {snapshot_id} taken.")));
        }
    }
    Vec::new()
}

/// A controller sizes the PTY to its pane, at full scale (an observer's scaling goes).
fn fit(screen: &XtermView, c: &mut Cursor) -> Vec<String> {
    unscale(&screen.host);
    let _ = screen.host.remove_attribute("data-zoom");
    match screen.fitted() {
        Some(size) if size != c.size => {
            c.size = size;
            screen.term.resize(u32::from(size.0), u32::from(size.1));
            let resize = SessionResize {
                cols: Dim(size.0),
                rows: Dim(size.1),
            };
            vec![frame(ClientOp::Resize(resize), None)]
        }
        _ => Vec::new(),
    }
}

fn on_command(cmd: TermCommand, screen: &XtermView, c: &mut Cursor, ui: &TermUi) -> Option<String> {
    let joined = c.client_id.is_some();
    match cmd {
        TermCommand::Input(data) if joined && c.role == Role::Controller => {
            let ctrl = ui.ctrl.get_untracked();
            let data = crate::term_ui::with_ctrl(ctrl, data);
            if ctrl {
                ui.ctrl.set(false);
            }
            Some(frame(ClientOp::Input(data.into_bytes()), None))
        }
        TermCommand::Input(_) => None,
        TermCommand::ScreenReader(on) => {
            ext(&screen.term).options().set_screen_reader_mode(on);
            None
        }
        TermCommand::Find(text, forward) => {
            let found = match forward {
                true => screen.search.find_next(&text),
                false => screen.search.find_previous(&text),
            };
            ui.found.try_set(Some(found));
            None
        }
        TermCommand::Fit if joined && c.role == Role::Controller => {
            fit(screen, c).into_iter().next()
        }
        TermCommand::Fit => {
            if c.size.0 > 0 {
                screen.resize_to(c.size.0, c.size.1);
            }
            None
        }
        TermCommand::RequestRole(role) => {
            c.wanted = role;
            ui.notice.try_set(None);
            joined.then(|| match role {
                Role::Controller => frame(ClientOp::RequestRole(Role::Controller), None),
                Role::Observer => frame(ClientOp::ReleaseRole, None),
            })
        }
        TermCommand::Resync => {
            c.need_keyframe = true;
            c.catch_up_in_flight = true;
            joined.then(|| frame(ClientOp::RequestKeyframe, None))
        }
        TermCommand::CatchUp if joined && c.need_keyframe && !c.catch_up_in_flight => {
            c.catch_up_in_flight = true;
            Some(frame(ClientOp::RequestKeyframe, None))
        }
        TermCommand::CatchUp => None,
        TermCommand::Ack(sequence) => joined.then(|| {
            let ack = Ack {
                sequence,
                window_bytes: None,
            };
            frame(ClientOp::Ack(ack), None)
        }),
    }
}

/// Copies text to the clipboard (best effort: the link is also shown on the page).
pub fn copy_to_clipboard(text: &str) {
    if let Some(w) = web_sys::window() {
        let _ = w.navigator().clipboard().write_text(text);
    }
}
