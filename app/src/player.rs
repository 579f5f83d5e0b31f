//! The player (`/sessions/{sid}/play`): a session played back from its stored frames, live
//! or closed, with play and pause, speed, skipping idle time, a timeline to seek on (each
//! seek starts from the stored keyframe before the point, never from the first frame),
//! a marker for each A2A task and for the session's joins, role changes and resizes, and
//! the wall-clock time at the playhead.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::Auth;
use crate::timeline::{Marker, What};

/// What the page shows of the playback, written by the player task.
#[derive(Clone, Copy)]
pub struct PlayerUi {
    pub playing: RwSignal<bool>,
    pub speed: RwSignal<f64>,
    pub skip_idle: RwSignal<bool>,
    /// The playhead, unix ms.
    pub position: RwSignal<f64>,
    /// The recording spans these unix ms.
    pub span: RwSignal<(f64, f64)>,
    /// Frames before this time were dropped by retention.
    pub gap_until: RwSignal<Option<f64>>,
    /// The tasks' marks, and the session's own events.
    pub markers: RwSignal<Vec<Marker>>,
    pub events: RwSignal<Vec<Marker>>,
    pub running: RwSignal<bool>,
    pub status: RwSignal<String>,
    /// A seek asked of the player task (unix ms).
    pub seek: RwSignal<Option<f64>>,
}

pub const SPEEDS: [f64; 6] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0];

/// The wall-clock time at unix ms `at`, as the browser shows local time.
fn wall_clock(at: f64) -> String {
    #[cfg(feature = "hydrate")]
    if at > 0.0 {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at));
        return String::from(date.to_locale_string("en-GB", &wasm_bindgen::JsValue::UNDEFINED));
    }
    let _ = at;
    String::new()
}

#[component]
pub fn PlayerPage() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let params = use_params_map();
    let sid = move || params.read().get("sid").unwrap_or_default();
    // `?at=UNIX_MS`: where to start (a task's moment, from the terminal page).
    let query = use_query_map();
    let at = move || query.read().get("at").and_then(|a| a.parse::<f64>().ok());
    let ui = PlayerUi {
        playing: RwSignal::new(false),
        speed: RwSignal::new(1.0),
        skip_idle: RwSignal::new(true),
        position: RwSignal::new(0.0),
        span: RwSignal::new((0.0, 0.0)),
        gap_until: RwSignal::new(None),
        markers: RwSignal::new(Vec::new()),
        events: RwSignal::new(Vec::new()),
        running: RwSignal::new(false),
        status: RwSignal::new("loading".into()),
        seek: RwSignal::new(None),
    };
    let host = NodeRef::<leptos::html::Div>::new();

    #[cfg(feature = "hydrate")]
    crate::api::start_once(host, auth, move |el, token| {
        browser::start(el, sid(), token, ui, at())
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (auth, at);

    let percent = move |at: f64| {
        let (start, end) = ui.span.get();
        if end > start {
            ((at - start) / (end - start) * 100.0).clamp(0.0, 100.0)
        } else {
            0.0
        }
    };
    let clock = move || wall_clock(ui.position.get());
    // A click on a task's mark jumps there and plays; on an event's, it jumps there.
    let marks = move |marks: Vec<Marker>| {
        marks
            .into_iter()
            .map(|m| {
                let at = m.at_ms;
                let plays = matches!(m.what, What::Task(_));
                let task = match &m.what {
                    What::Task(id) => Some(id.clone()),
                    _ => None,
                };
                view! {
                    <li style=format!("left: {}%", percent(at))>
                        <button type="button" data-task=task data-event=m.what.event()
                            title=m.label.clone() aria-label=m.label on:click=move |_| {
                                ui.seek.set(Some(at));
                                if plays {
                                    ui.playing.set(true);
                                }
                            }>{m.what.glyph()}</button>
                    </li>
                }
            })
            .collect_view()
    };
    view! {
        <section class="player" aria-label="Playback">
            <header class="term-head">
                <a href="/" class="back">"← Sessions"</a>
                <h1>"Playback"</h1>
                <span class="status">{move || ui.status.get()}</span>
                <Show when=move || ui.running.get()>
                    <a class="live" href=move || format!("/sessions/{}", sid())>"Live"</a>
                </Show>
            </header>
            <div class="term-host" node_ref=host role="region" aria-label="Recorded terminal"></div>
            <div class="controls">
                <button type="button" class="play"
                    on:click=move |_| ui.playing.update(|p| *p = !*p)>
                    {move || if ui.playing.get() { "Pause" } else { "Play" }}
                </button>
                <label>"Speed "
                    <select name="speed" on:change=move |ev| {
                        if let Ok(s) = event_target_value(&ev).parse() {
                            ui.speed.set(s);
                        }
                    }>
                        {SPEEDS.iter().map(|s| view! {
                            <option value=s.to_string() selected=*s == 1.0>{format!("{s}x")}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label><input type="checkbox" name="skip-idle" prop:checked=move || ui.skip_idle.get()
                    on:change=move |ev| ui.skip_idle.set(event_target_checked(&ev))/>" Skip idle"</label>
                <span class="clock">{clock}</span>
            </div>
            <div class="timeline">
                {move || ui.gap_until.get().map(|until| view! {
                    <div class="gap" style=format!("width: {}%", percent(until))
                        title="older frames were dropped by retention">"not retained"</div>
                })}
                <input type="range" name="timeline" aria-label="Timeline"
                    prop:min=move || ui.span.get().0 prop:max=move || ui.span.get().1
                    step="1" prop:value=move || ui.position.get()
                    on:change=move |ev| {
                        if let Ok(at) = event_target_value(&ev).parse() {
                            ui.seek.set(Some(at));
                        }
                    }/>
                <ol class="markers">{move || marks(ui.markers.get())}</ol>
                <ol class="events">{move || marks(ui.events.get())}</ol>
            </div>
        </section>
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::collections::VecDeque;
    use std::rc::Rc;

    use leptos::prelude::*;
    use wire::SessionFrame;
    use wire::a2a::ListTasksResponse;
    use wire::control::FramePage;
    use wire::server::ServerOp;
    use xterm_js_rs::Terminal;

    use super::{Marker, PlayerUi, What};
    use crate::api::{Session, get, get_a2a};

    /// How often the playhead moves while the player waits for the next frame.
    const TICK_MS: f64 = 50.0;
    /// "Skip idle": no wait longer than this, in real time.
    const IDLE_CAP_MS: f64 = 1000.0;
    /// The timeline reads at most this many pages of session events.
    const MAX_EVENT_PAGES: usize = 10;

    /// A stored frame as the player applies it.
    struct Frame {
        at_ms: f64,
        frame: SessionFrame,
    }

    fn frames(page: &FramePage) -> VecDeque<Frame> {
        page.frames
            .iter()
            .filter_map(|f| match &f.op {
                ServerOp::Session(frame) => Some(Frame {
                    at_ms: js_sys::Date::parse(&f.ts),
                    frame: frame.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    struct Player {
        term: Rc<Terminal>,
        sid: String,
        token: String,
        ui: PlayerUi,
        queue: VecDeque<Frame>,
        next_after: Option<u64>,
    }

    pub fn start(
        host: web_sys::HtmlElement,
        sid: String,
        token: String,
        ui: PlayerUi,
        at: Option<f64>,
    ) {
        let (term, _fit) = crate::xterm::open_terminal(&host);
        let player = Player {
            term,
            sid,
            token,
            ui,
            queue: VecDeque::new(),
            next_after: None,
        };
        leptos::task::spawn_local(player.run(at));
    }

    impl Player {
        /// The page went away (its signals with it): the player stops.
        fn gone(&self) -> bool {
            self.ui.seek.is_disposed()
        }

        async fn run(mut self, at: Option<f64>) {
            let loaded = self.load().await;
            if self.gone() {
                return;
            }
            if let Err(e) = loaded {
                self.ui.status.set(e);
                return;
            }
            let (start, end) = self.ui.span.get_untracked();
            self.seek(at.map_or(start, |at| at.clamp(start, end))).await;
            if self.gone() {
                return;
            }
            self.ui.status.set("ready".into());
            loop {
                if self.gone() {
                    return;
                }
                if let Some(at) = self.ui.seek.get_untracked() {
                    self.ui.seek.set(None);
                    self.seek(at).await;
                    continue;
                }
                if !self.ui.playing.get_untracked() {
                    sleep(TICK_MS).await;
                    continue;
                }
                if !self.step().await && !self.gone() {
                    self.ui.playing.set(false);
                    self.ui.status.set("at the end".into());
                }
            }
        }

        /// The session's span, its retention gap and its tasks.
        async fn load(&mut self) -> Result<(), String> {
            let s: Session = get(&format!("/sessions/{}", self.sid), &self.token)
                .await
                .map_err(|f| f.message)?;
            let start = js_sys::Date::parse(&s.created_at);
            let end = s
                .closed_at
                .as_deref()
                .map(js_sys::Date::parse)
                .unwrap_or_else(js_sys::Date::now);
            if self.gone() {
                return Ok(());
            }
            self.ui.span.set((start, end.max(start)));
            self.ui.running.set(s.state == "running");
            if s.replay_floor > 0 {
                let after = format!(
                    "/sessions/{}/frames?after={}&limit=1",
                    self.sid, s.replay_floor
                );
                if let Ok(page) = get::<FramePage>(&after, &self.token).await
                    && let Some(first) = frames(&page).front()
                    && !self.gone()
                {
                    self.ui.gap_until.set(Some(first.at_ms));
                }
            }
            let path = format!("/tasks?contextId={}&pageSize=100", self.sid);
            if let Ok(page) = get_a2a::<ListTasksResponse>(&path, &self.token).await
                && !self.gone()
            {
                let now = js_sys::Date::now();
                let mut markers: Vec<Marker> = page
                    .tasks
                    .iter()
                    .filter_map(|t| {
                        let row = crate::tasks::Row::of(t, now);
                        let state = crate::tasks::state_label(row.state);
                        Some(Marker {
                            at_ms: crate::tasks::uuid_v7_ms(&t.id)?,
                            label: match row.exit_code {
                                Some(code) => format!("{} ({state}, exit {code})", row.command),
                                None => format!("{} ({state})", row.command),
                            },
                            what: What::Task(row.id),
                        })
                    })
                    .collect();
                markers.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
                self.ui.markers.set(markers);
            }
            let events = self.events().await;
            if !self.gone() {
                self.ui.events.set(events);
            }
            Ok(())
        }

        /// The session's joins, role changes, resizes, pauses, resumes and snapshots, from
        /// its stored frames of those kinds (a few pages at most).
        async fn events(&self) -> Vec<Marker> {
            let mut stored = Vec::new();
            let mut after = 0;
            for _ in 0..MAX_EVENT_PAGES {
                let path = format!(
                    "/sessions/{}/frames?after={after}&kind=Resize,MembershipChanged,Paused,Resumed,Snapshotted",
                    self.sid
                );
                let Ok(page) = get::<FramePage>(&path, &self.token).await else {
                    break;
                };
                stored.extend(frames(&page));
                match page.next_after {
                    Some(next) => after = next,
                    None => break,
                }
            }
            crate::timeline::session_events(stored.iter().map(|f| (f.at_ms, &f.frame)))
        }

        /// Paints the screen at `at`: the stored keyframe before it, then every frame up to it.
        async fn seek(&mut self, at: f64) {
            let path = format!(
                "/sessions/{}/frames?at={}&keyframe=true",
                self.sid, at as i64
            );
            let page = get::<FramePage>(&path, &self.token).await;
            if self.gone() {
                return;
            }
            let page = match page {
                Ok(p) => p,
                Err(f) => {
                    self.ui.status.set(f.message);
                    return;
                }
            };
            self.term.reset();
            self.queue = frames(&page);
            self.next_after = page.next_after;
            while self.queue.front().is_some_and(|f| f.at_ms <= at) {
                let f = self.queue.pop_front().expect("a frame");
                self.apply(&f.frame);
                if self.queue.is_empty() {
                    self.more().await;
                }
            }
            if !self.gone() {
                self.ui.position.set(at);
            }
        }

        /// Fetches the next page of frames; false at the end.
        async fn more(&mut self) -> bool {
            let Some(after) = self.next_after else {
                return false;
            };
            let path = format!("/sessions/{}/frames?after={after}", self.sid);
            match get::<FramePage>(&path, &self.token).await {
                Ok(page) => {
                    self.next_after = page.next_after;
                    self.queue.extend(frames(&page));
                    true
                }
                Err(_) => false,
            }
        }

        /// Waits for the next frame at the chosen speed and applies it; false at the end.
        async fn step(&mut self) -> bool {
            if self.queue.is_empty() && !self.more().await {
                return false;
            }
            if self.gone() {
                return true;
            }
            let Some(next) = self.queue.front().map(|f| f.at_ms) else {
                return false;
            };
            let mut position = self.ui.position.get_untracked();
            let mut wait = ((next - position) / self.ui.speed.get_untracked()).max(0.0);
            if self.ui.skip_idle.get_untracked() && wait > IDLE_CAP_MS {
                // The pause shrinks to the cap; the playhead jumps over the rest.
                position = next - IDLE_CAP_MS * self.ui.speed.get_untracked();
                wait = IDLE_CAP_MS;
            }
            let real_start = js_sys::Date::now();
            loop {
                let left = wait - (js_sys::Date::now() - real_start);
                if left <= 0.0 {
                    break;
                }
                if self.ui.seek.get_untracked().is_some() || !self.ui.playing.get_untracked() {
                    return true;
                }
                sleep(TICK_MS.min(left)).await;
                if self.gone() {
                    return true;
                }
                let played = (js_sys::Date::now() - real_start) * self.ui.speed.get_untracked();
                self.ui.position.set((position + played).min(next));
            }
            let f = self.queue.pop_front().expect("a frame");
            self.apply(&f.frame);
            self.ui.position.set(f.at_ms);
            true
        }

        fn apply(&self, frame: &SessionFrame) {
            match frame {
                SessionFrame::Output { data, .. } => crate::xterm::write_bytes(&self.term, &data.0),
                SessionFrame::Resize { cols, rows } => {
                    self.term.resize(u32::from(*cols), u32::from(*rows))
                }
                SessionFrame::Keyframe {
                    snapshot,
                    snapshot_cols,
                    snapshot_rows,
                    ..
                } => crate::xterm::paint_keyframe(
                    &self.term,
                    &snapshot.0,
                    *snapshot_cols,
                    *snapshot_rows,
                ),
                _ => {}
            }
        }
    }

    async fn sleep(ms: f64) {
        gloo_timers::future::TimeoutFuture::new(ms.max(0.0) as u32).await;
    }
}
