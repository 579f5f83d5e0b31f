//! Driving and reading a terminal: `send_keys`, `read_screen`, `read_output` (the output
//! after a cursor, from the session's stored frames) and `wait_for` (a pattern or a quiet
//! period in the output after the call), and the watcher behind screen subscriptions.

use std::time::Duration;

use regex::Regex;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::text;
use super::{Terminal, ToolError};
use crate::auth::{Principal, Scope};
use crate::sessions::{ScreenText, SessionCommand, SessionHandle};

/// Stored output one read takes at most before it says there is `more`.
const READ_BYTES: usize = 64 * 1024;
/// A screen subscriber hears of changes at most this often.
const SCREEN_UPDATES: Duration = Duration::from_millis(200);
/// What `wait_for` keeps of the output it has seen, and matches its pattern against.
const SEEN_BYTES: usize = 2 * text::MAX_TEXT;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct KeysParams {
    pub session_id: String,
    /// What to type, in order: each entry is a named key (`Enter`, `Tab`, `Esc`, `Space`,
    /// `Backspace`, `Delete`, `Up`, `Down`, `Left`, `Right`, `Home`, `End`, `PageUp`,
    /// `PageDown`, `C-a` … `C-z`, e.g. `C-c`, `C-d`) or else text, typed as it is. A
    /// single string is one entry.
    pub keys: OneOrMany,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Typed {
    /// Bytes written to the terminal.
    pub bytes: usize,
    /// Where the session's output stood before the keys: `wait_for` and `read_output`
    /// after it see what they caused.
    pub cursor: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct OutputParams {
    pub session_id: String,
    /// A `cursor` from an earlier result: only output after it. Without it, from the oldest
    /// output the session keeps.
    pub after: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Plain text, no terminal escapes.
    pub output: String,
    /// Pass it as `after` to read on.
    pub cursor: u64,
    /// More output is kept after `cursor`: read again.
    pub more: bool,
    /// Output after `after` was already dropped by retention; this starts at the oldest kept.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub gap: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitParams {
    pub session_id: String,
    /// A regular expression (Rust `regex` syntax) to find in the output that arrives after
    /// the call (plain text, no escapes; its last 64 KiB).
    pub pattern: Option<String>,
    /// Or: answer once the output has been quiet this many milliseconds.
    pub idle_ms: Option<u64>,
    /// Give up after this many milliseconds (at most 600000).
    pub timeout_ms: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Waited {
    /// The pattern was found.
    pub matched: bool,
    /// Neither the pattern nor the quiet period came in time.
    pub timed_out: bool,
    /// `pattern`, `idle`, `timeout`, or `ended` (the session closed first).
    pub reason: &'static str,
    /// The output that arrived during the wait (its tail, when long), plain text.
    pub output: String,
    /// Where the output stands after what `output` shows.
    pub cursor: u64,
}

#[tool_router(router = screen_tools, vis = "pub(super)")]
impl Terminal {
    /// Types text and named keys into a session, as a person at the keyboard would: for
    /// REPLs, prompts, pagers and editors.
    #[tool(annotations(read_only_hint = false, destructive_hint = true))]
    async fn send_keys(
        &self,
        Parameters(p): Parameters<KeysParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Typed>, ToolError> {
        let who = self.allowed(&ctx, Scope::Control, "typing into a session")?;
        let handle = self.terminals.live(&who, &p.session_id)?;
        let keys = match p.keys {
            OneOrMany::One(k) => vec![k],
            OneOrMany::Many(k) => k,
        };
        let bytes = text::keys(&keys);
        if bytes.is_empty() {
            return Err(ToolError::invalid("keys is empty"));
        }
        let cursor = handle.current_sequence();
        let n = bytes.len();
        match handle.ask(|reply| SessionCommand::Type(bytes, reply)).await {
            Some(Ok(())) => Ok(Json(Typed { bytes: n, cursor })),
            Some(Err(refusal)) => Err(ToolError::new("UNAVAILABLE", refusal.message)),
            None => Err(ToolError::new(
                "NOT_FOUND",
                format!("session {} ended", p.session_id),
            )),
        }
    }

    /// The session's visible screen as text rows, with the cursor, the size and what is
    /// running.
    #[tool(annotations(read_only_hint = true))]
    async fn read_screen(
        &self,
        Parameters(p): Parameters<super::tools::SessionParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ScreenText>, ToolError> {
        let who = self.who(&ctx)?;
        self.screen(&who, &p.session_id).await.map(Json)
    }

    /// The session's output after a cursor, as plain text, with the cursor to read on from.
    #[tool(annotations(read_only_hint = true))]
    async fn read_output(
        &self,
        Parameters(p): Parameters<OutputParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Output>, ToolError> {
        let who = self.who(&ctx)?;
        self.known(&who, &p.session_id).await?;
        let read = (self.terminals.sessions)
            .output_after(&p.session_id, p.after.unwrap_or(0), READ_BYTES)
            .await
            .map_err(ToolError::internal)?;
        Ok(Json(Output {
            output: text::plain(&read.data),
            cursor: read.cursor,
            more: read.more,
            gap: read.gap,
        }))
    }

    /// Waits for a pattern in the output that arrives after the call, or for the output to
    /// go quiet, whichever is asked for first, and answers as soon as it happens.
    #[tool(annotations(read_only_hint = true))]
    async fn wait_for(
        &self,
        Parameters(p): Parameters<WaitParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Waited>, ToolError> {
        let who = self.who(&ctx)?;
        let pattern = (p.pattern.as_deref().map(Regex::new).transpose())
            .map_err(|e| ToolError::invalid(format!("pattern: {e}")))?;
        let idle = p.idle_ms.map(Duration::from_millis);
        if pattern.is_none() && idle.is_none() {
            return Err(ToolError::invalid("give a pattern, idle_ms, or both"));
        }
        let handle = self.terminals.live(&who, &p.session_id)?;
        let wait = Wait {
            pattern,
            idle,
            deadline: Instant::now() + super::wait(Some(p.timeout_ms), Duration::ZERO),
        };
        tokio::select! {
            w = self.wait(&handle, wait) => w.map(Json),
            _ = ctx.ct.cancelled() => Err(ToolError::new("CANCELLED", "the wait was cancelled")),
        }
    }
}

struct Wait {
    pattern: Option<Regex>,
    idle: Option<Duration>,
    deadline: Instant,
}

impl Terminal {
    /// The screen of a session `who` may see.
    pub(super) async fn screen(&self, who: &Principal, sid: &str) -> Result<ScreenText, ToolError> {
        let handle = self.terminals.live(who, sid)?;
        (handle.ask(SessionCommand::Screen).await)
            .ok_or_else(|| ToolError::new("NOT_FOUND", format!("session {sid} ended")))
    }

    async fn wait(&self, handle: &SessionHandle, w: Wait) -> Result<Waited, ToolError> {
        let mut cursor = handle.current_sequence();
        let mut seen = String::new();
        let mut quiet_since = Instant::now();
        loop {
            let read = (self.terminals.sessions)
                .output_after(&handle.id, cursor, READ_BYTES)
                .await
                .map_err(ToolError::internal)?;
            cursor = read.cursor;
            if !read.data.is_empty() {
                seen.push_str(&text::plain(&read.data));
                text::keep_tail(&mut seen, SEEN_BYTES);
                quiet_since = Instant::now();
            }
            if w.pattern.as_ref().is_some_and(|re| re.is_match(&seen)) {
                return Ok(waited("pattern", true, false, &seen, cursor));
            }
            if read.more {
                continue;
            }
            let idle_at = w.idle.map(|d| quiet_since + d);
            if idle_at.is_some_and(|t| t <= Instant::now()) {
                return Ok(waited("idle", false, false, &seen, cursor));
            }
            if w.deadline <= Instant::now() {
                return Ok(waited("timeout", false, true, &seen, cursor));
            }
            let wake = idle_at.map_or(w.deadline, |t| t.min(w.deadline));
            tokio::select! {
                alive = handle.stored_past(cursor) => if !alive {
                    let last = (self.terminals.sessions)
                        .output_after(&handle.id, cursor, READ_BYTES)
                        .await
                        .map_err(ToolError::internal)?;
                    seen.push_str(&text::plain(&last.data));
                    cursor = last.cursor;
                    let matched = w.pattern.as_ref().is_some_and(|re| re.is_match(&seen));
                    let reason = if matched { "pattern" } else { "ended" };
                    return Ok(waited(reason, matched, false, &seen, cursor));
                },
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

fn waited(reason: &'static str, matched: bool, timed_out: bool, seen: &str, cursor: u64) -> Waited {
    Waited {
        matched,
        timed_out,
        reason,
        output: text::tail(seen, text::MAX_TEXT).to_owned(),
        cursor,
    }
}

/// Tells `notify` whenever the session's screen may have changed (new frames stored), at
/// most every `SCREEN_UPDATES`, until `stop`, the session's end, or a failed notify.
pub(super) async fn watch<F, Fut>(handle: SessionHandle, stop: CancellationToken, notify: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut seen = handle.current_sequence();
    loop {
        tokio::select! {
            alive = handle.stored_past(seen) => if !alive { return },
            _ = stop.cancelled() => return,
        }
        seen = handle.current_sequence();
        if !notify().await {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(SCREEN_UPDATES) => {}
            _ = stop.cancelled() => return,
        }
    }
}
