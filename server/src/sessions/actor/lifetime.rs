//! How long a session lives: its ttl and its idle timeout (each warned about first, then a
//! close with `timeout`), pausing when idle, and pause and resume themselves: the cgroup
//! freezer where the session has one, SIGSTOP to each of its processes otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use wire::{CloseReason, ErrorCode, PauseMethod, SessionFrame, WarningCode};

use super::Actor;
use crate::clock;
use crate::sessions::{Lifetime, SessionRefusal};

/// How long before a timeout its warning goes out (half the timeout when that is shorter).
const WARN_LEAD: Duration = Duration::from_secs(60);

/// What a session's lifetime starts from.
pub struct Timing {
    pub lifetime: Lifetime,
    /// When it started (unix ms): its ttl counts from there.
    pub since_ms: i64,
    /// Its clocks run (a pooled shell's start when it is taken).
    pub armed: bool,
}

/// Why a session is paused, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pause {
    pub method: PauseMethod,
    /// For being idle: the next input, controller or task resumes it.
    pub idle: bool,
    /// For a snapshot: it resumes when the snapshot is taken.
    pub snapshot: bool,
    pub since_ms: i64,
}

/// The deadlines of one session.
pub(super) struct Clocks {
    lifetime: Lifetime,
    ttl_end: Option<Instant>,
    last_active: Instant,
    /// `last_active` in unix ms, which the session's handle reads.
    active_ms: Arc<AtomicI64>,
    warned_ttl: bool,
    warned_idle: bool,
    armed: bool,
    pause_when_idle: Option<Duration>,
    pub(super) paused: Option<Pause>,
}

/// What is due now.
#[derive(Debug, PartialEq)]
pub(super) enum Due {
    Warn(WarningCode, Instant),
    Close,
    Pause,
}

fn lead(total: Duration) -> Duration {
    (total / 2).min(WARN_LEAD)
}

/// The instant of a unix-ms time.
fn instant_of(ms: i64) -> Instant {
    let now = clock::now_ms();
    match u64::try_from(ms - now) {
        Ok(ahead) => Instant::now() + Duration::from_millis(ahead),
        Err(_) => Instant::now()
            .checked_sub(Duration::from_millis(now.saturating_sub(ms) as u64))
            .unwrap_or_else(Instant::now),
    }
}

/// The unix-ms time of an instant.
pub(super) fn ms_of(at: Instant) -> i64 {
    let now = Instant::now();
    match at.checked_duration_since(now) {
        Some(ahead) => clock::now_ms() + ahead.as_millis() as i64,
        None => clock::now_ms() - now.duration_since(at).as_millis() as i64,
    }
}

impl Clocks {
    pub(super) fn new(timing: &Timing, pause_when_idle: Option<Duration>) -> Clocks {
        let mut clocks = Clocks {
            lifetime: timing.lifetime,
            ttl_end: None,
            last_active: Instant::now(),
            active_ms: Arc::new(AtomicI64::new(clock::now_ms())),
            warned_ttl: false,
            warned_idle: false,
            armed: false,
            pause_when_idle,
            paused: None,
        };
        if timing.armed {
            clocks.arm(timing.since_ms);
        }
        clocks
    }

    /// When the session was last active (unix ms), as it changes.
    pub(super) fn active_ms(&self) -> Arc<AtomicI64> {
        self.active_ms.clone()
    }

    /// The ttl's end (unix ms) and the idle timeout, once the clocks run.
    pub(super) fn limits(&self) -> (Option<i64>, Option<Duration>) {
        match self.armed {
            true => (self.ttl_end.map(ms_of), self.lifetime.idle_timeout()),
            false => (None, None),
        }
    }

    /// Starts the clocks, the ttl counting from `since_ms`.
    pub(super) fn arm(&mut self, since_ms: i64) {
        self.armed = true;
        self.touch();
        self.ttl_end =
            (self.lifetime.ttl()).map(|ttl| instant_of(since_ms + ttl.as_millis() as i64));
    }

    /// Input, output or a task: the idle clock starts again.
    pub(super) fn touch(&mut self) {
        self.last_active = Instant::now();
        self.active_ms.store(clock::now_ms(), Ordering::Relaxed);
        self.warned_idle = false;
    }

    /// When an idle session (`busy`: a task runs, so it is not) closes.
    fn idle_end(&self, busy: bool) -> Option<Instant> {
        let idle = self
            .lifetime
            .idle_timeout()
            .filter(|_| self.armed && !busy)?;
        Some(self.last_active + idle)
    }

    /// The next instant something may be due.
    pub(super) fn next(&self, busy: bool) -> Option<Instant> {
        let ttl = self.ttl_end.map(|end| match self.warned_ttl {
            false => end - self.lifetime.ttl().map_or(Duration::ZERO, lead),
            true => end,
        });
        let idle = self.idle_end(busy).map(|end| match self.warned_idle {
            false => end - self.lifetime.idle_timeout().map_or(Duration::ZERO, lead),
            true => end,
        });
        let pause = (self.pause_when_idle)
            .filter(|_| self.armed && !busy && self.paused.is_none())
            .map(|after| self.last_active + after);
        [ttl, idle, pause].into_iter().flatten().min()
    }

    /// What is due at `now`, in order; each warning once.
    pub(super) fn due(&mut self, now: Instant, busy: bool) -> Vec<Due> {
        let mut due = Vec::new();
        if let Some(end) = self.ttl_end {
            if now >= end {
                return vec![Due::Close];
            }
            let lead = self.lifetime.ttl().map_or(Duration::ZERO, lead);
            if !self.warned_ttl && now >= end - lead {
                self.warned_ttl = true;
                due.push(Due::Warn(WarningCode::SessionTtl, end));
            }
        }
        if let Some(end) = self.idle_end(busy) {
            if now >= end {
                return vec![Due::Close];
            }
            let lead = self.lifetime.idle_timeout().map_or(Duration::ZERO, lead);
            if !self.warned_idle && now >= end - lead {
                self.warned_idle = true;
                due.push(Due::Warn(WarningCode::SessionIdleTimeout, end));
            }
        }
        let pause_at = (self.pause_when_idle)
            .filter(|_| self.armed && !busy && self.paused.is_none())
            .map(|after| self.last_active + after);
        if pause_at.is_some_and(|at| now >= at) {
            due.push(Due::Pause);
        }
        due
    }
}

impl Actor {
    /// A task runs or waits in the shell: the session is not idle.
    pub(super) fn busy(&self) -> bool {
        self.shell.as_ref().is_some_and(|s| s.state.busy())
    }

    /// Does what the clocks say is due; a close reason when the session must end.
    pub(super) fn lifetime_due(&mut self) -> Option<CloseReason> {
        let busy = self.busy();
        for due in self.clocks.due(Instant::now(), busy) {
            match due {
                Due::Close => return Some(CloseReason::Timeout),
                Due::Warn(code, at) => {
                    let at = clock::rfc3339(ms_of(at));
                    let message = match code {
                        WarningCode::SessionTtl => format!("the session reaches its ttl at {at}"),
                        WarningCode::SessionIdleTimeout => format!(
                            "the session closes at {at} unless something happens in it first"
                        ),
                    };
                    let frame = SessionFrame::Warning { code, message, at };
                    self.broadcast(frame, None);
                }
                Due::Pause => {
                    if let Err(e) = self.pause(true, false) {
                        tracing::warn!(session_id = %self.id, error = %e.message, "pausing an idle session failed");
                        // Not again until it has been idle once more.
                        self.clocks.touch();
                    }
                }
            }
        }
        None
    }

    /// Something happened in the session: an idle-paused one resumes, and its idle clock
    /// starts again.
    pub(super) fn activity(&mut self) {
        if self.clocks.paused.is_some_and(|p| p.idle) {
            self.resume();
        }
        self.clocks.touch();
    }

    /// Refuses what a caller's pause holds back.
    pub(super) fn refuse_if_paused(&self, what: &str) -> Result<(), SessionRefusal> {
        match self.clocks.paused {
            Some(p) if !p.idle => Err(SessionRefusal::new(
                ErrorCode::UnsupportedOperation,
                format!("the session is paused: {what} waits until it resumes"),
            )),
            _ => Ok(()),
        }
    }

    /// Freezes every process of the session. A session already paused stays as it is (a
    /// caller's pause takes over an idle one's, or a snapshot's).
    pub(super) fn pause(&mut self, idle: bool, snapshot: bool) -> Result<Pause, SessionRefusal> {
        if self.close_reason.is_some() {
            return Err(SessionRefusal::new(
                ErrorCode::Internal,
                "the session is closing",
            ));
        }
        if let Some(p) = self.clocks.paused.as_mut() {
            // A caller's pause holds: neither new input nor a snapshot's end thaws it.
            if !idle && !snapshot {
                (p.idle, p.snapshot) = (false, false);
            }
            let p = *p;
            self.publish_status();
            return Ok(p);
        }
        let frozen = (self.sandboxed.as_ref())
            .and_then(|s| s.cgroup.as_ref())
            .map(|c| c.freeze(true));
        let method = match frozen {
            Some(Ok(true)) => PauseMethod::CgroupFreezer,
            Some(Err(e)) => {
                return Err(SessionRefusal::new(
                    ErrorCode::Internal,
                    format!("freezing the session's cgroup failed: {e:#}"),
                ));
            }
            _ => {
                self.pty.stop_tree(true);
                PauseMethod::Sigstop
            }
        };
        let pause = Pause {
            method,
            idle,
            snapshot,
            since_ms: clock::now_ms(),
        };
        self.clocks.paused = Some(pause);
        if !snapshot {
            self.broadcast(SessionFrame::Paused { method, idle }, None);
        }
        self.publish_status();
        tracing::info!(session_id = %self.id, ?method, idle, snapshot, "session paused");
        Ok(pause)
    }

    /// Thaws the session; false when it was not paused.
    pub(super) fn resume(&mut self) -> bool {
        let Some(pause) = self.clocks.paused.take() else {
            return false;
        };
        match pause.method {
            PauseMethod::CgroupFreezer => {
                let thawed = (self.sandboxed.as_ref())
                    .and_then(|s| s.cgroup.as_ref())
                    .map(|c| c.freeze(false));
                if let Some(Err(e)) = thawed {
                    tracing::error!(session_id = %self.id, error = %format!("{e:#}"), "thawing the session's cgroup failed");
                }
            }
            PauseMethod::Sigstop => self.pty.stop_tree(false),
        }
        self.clocks.touch();
        if !pause.snapshot {
            self.broadcast(SessionFrame::Resumed {}, None);
        }
        self.publish_status();
        tracing::info!(session_id = %self.id, "session resumed");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clocks(ttl_ms: Option<u64>, idle_ms: Option<u64>, pause: Option<u64>) -> Clocks {
        let timing = Timing {
            lifetime: Lifetime {
                ttl_ms,
                idle_timeout_ms: idle_ms,
            },
            since_ms: clock::now_ms(),
            armed: true,
        };
        Clocks::new(&timing, pause.map(Duration::from_millis))
    }

    #[test]
    fn an_idle_session_is_warned_at_half_a_short_timeout_then_closed() {
        let mut c = clocks(None, Some(4000), None);
        let start = c.last_active;
        assert_eq!(c.next(false), Some(start + Duration::from_secs(2)));
        assert!(c.due(start + Duration::from_millis(1999), false).is_empty());
        let due = c.due(start + Duration::from_secs(2), false);
        assert!(matches!(
            due[..],
            [Due::Warn(WarningCode::SessionIdleTimeout, _)]
        ));
        assert!(
            c.due(start + Duration::from_secs(3), false).is_empty(),
            "once"
        );
        assert_eq!(c.next(false), Some(start + Duration::from_secs(4)));
        assert_eq!(c.due(start + Duration::from_secs(4), false), [Due::Close]);
    }

    /// `a` is `b`, give or take the few milliseconds between two clocks' reads.
    fn near(a: Option<Instant>, b: Instant) -> bool {
        a.is_some_and(|a| a.max(b) - a.min(b) < Duration::from_millis(50))
    }

    #[test]
    fn a_running_task_keeps_a_session_from_idling_but_not_from_its_ttl() {
        let start = Instant::now();
        let mut c = clocks(Some(10_000), Some(1000), Some(500));
        assert!(near(c.next(true), start + Duration::from_secs(5)));
        assert_eq!(c.due(start + Duration::from_secs(11), true), [Due::Close]);
    }

    #[test]
    fn activity_restarts_the_idle_clock_and_its_warning() {
        let start = Instant::now();
        let mut c = clocks(None, Some(4000), Some(1000));
        assert_eq!(
            c.due(
                start + Duration::from_secs(1) + Duration::from_millis(50),
                false
            ),
            [Due::Pause]
        );
        c.touch();
        let now = Instant::now();
        assert!(near(c.next(false), now + Duration::from_secs(1)));
        assert!(near(c.idle_end(false), now + Duration::from_secs(4)));
    }

    #[test]
    fn an_unarmed_pooled_shell_never_times_out() {
        let timing = Timing {
            lifetime: Lifetime {
                ttl_ms: Some(1000),
                idle_timeout_ms: Some(1000),
            },
            since_ms: clock::now_ms(),
            armed: false,
        };
        let c = Clocks::new(&timing, Some(Duration::from_secs(1)));
        assert_eq!(c.next(false), None);
    }
}
