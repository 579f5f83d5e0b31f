//! What a session runs: the request (argv or command, cwd, env, size, host) checked into a
//! spec, the login shell, and the shell-integration rc file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;

use super::host::Host;
use super::{SessionSettings, host};
use crate::sandbox;

/// Runs the user's login files, then marks prompts and commands with OSC 133 so that the
/// task executor knows where a command's output starts and ends and how it exited.
pub const SHELL_RC: &str = r#"# Written by ptyhost: shell integration for sessions that run A2A tasks.
[ -f /etc/profile ] && . /etc/profile
for __f in ~/.bash_profile ~/.bash_login ~/.profile; do [ -f "$__f" ] && { . "$__f"; break; }; done
unset __f
__ptyhost_done() { printf '\033]133;D;%s\007' "$?"; }
PROMPT_COMMAND="__ptyhost_done${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
PS1="\[\033]133;A\007\]${PS1:-\u@\h:\w\$ }\[\033]133;B\007\]"
PS0=$'\033]133;C\007'
"#;

pub(super) const BASH: &str = "/bin/bash";

/// Writes the shell-integration rc file into `dir` when bash is installed.
pub fn install_shell_rc(dir: &std::path::Path) -> std::io::Result<Option<PathBuf>> {
    if !std::path::Path::new(BASH).is_file() {
        return Ok(None);
    }
    std::fs::create_dir_all(dir)?;
    // Absolute: sessions start in their own directory (by default $HOME).
    let path = std::fs::canonicalize(dir)?.join(wire::control::SHELL_RC_NAME);
    std::fs::write(&path, SHELL_RC)?;
    Ok(Some(path))
}

/// A session-host selection that this server cannot honour; the code names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("session_backend.not_implemented: {0}")]
    BackendNotImplemented(String),
    #[error("session_class.not_implemented: {0}")]
    ClassNotImplemented(String),
    #[error("{0}")]
    Invalid(String),
    /// Asks for more than the caller's scope allows (a sandbox cap above the default).
    #[error("{0}")]
    Forbidden(String),
}

impl SpecError {
    pub fn code(&self) -> &'static str {
        match self {
            SpecError::BackendNotImplemented(_) => "session_backend.not_implemented",
            SpecError::ClassNotImplemented(_) => "session_class.not_implemented",
            SpecError::Invalid(_) => "invalid_argument",
            SpecError::Forbidden(_) => "permission_denied",
        }
    }
}

/// The host a backend and class select; fails closed on anything not offered here, and
/// on pairs that do not go together (native is direct only, tmux managed only).
pub fn check_host(
    backend: Option<&str>,
    class: Option<&str>,
    settings: &SessionSettings,
) -> Result<Host, SpecError> {
    let backend = backend.unwrap_or(match class {
        Some(host::MANAGED) => host::TMUX,
        _ => host::NATIVE,
    });
    let offered = host::backends();
    if !offered.contains(&backend) {
        return Err(SpecError::BackendNotImplemented(format!(
            "backend {backend:?} is not available here (supported: {})",
            offered.join(", ")
        )));
    }
    let (host, pair) = match (backend, &settings.tmux_socket) {
        (host::TMUX, Some(socket)) => (
            Host::Tmux(host::Tmux {
                socket: socket.clone(),
            }),
            host::MANAGED,
        ),
        (host::TMUX, None) => {
            return Err(SpecError::BackendNotImplemented(
                "backend \"tmux\" has no socket here".into(),
            ));
        }
        _ => (Host::Native, host::DIRECT),
    };
    let class = class.unwrap_or(pair);
    if class != pair {
        return Err(SpecError::ClassNotImplemented(format!(
            "class {class:?} is not available with backend {backend:?} ({backend} is {pair} only)"
        )));
    }
    Ok(host)
}

/// What a new session runs.
#[derive(Debug, Clone, Default)]
pub struct SpecRequest {
    pub argv: Option<Vec<String>>,
    pub command: Option<String>,
    pub cwd: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    pub session_backend: Option<String>,
    pub session_class: Option<String>,
    pub cols: Option<u16>,
    pub rows: Option<u16>,
    pub label: Option<String>,
    /// The session's own sandbox limits.
    pub sandbox: Option<sandbox::Request>,
    /// The caller holds `pty:admin`: it may raise sandbox limits.
    pub admin: bool,
    /// Its absolute lifetime; at most the server's `--max-session-ttl`.
    pub ttl: Option<std::time::Duration>,
    /// How long it may idle before it closes (the server's `--session-idle-timeout` else).
    pub idle_timeout: Option<std::time::Duration>,
    /// A snapshot whose workspace it starts with (a sandboxed session only).
    pub from_snapshot: Option<String>,
}

/// A duration from JSON: `"5m"` as the flags take it, or a number of seconds.
pub fn span(what: &str, span: &wire::control::Span) -> Result<std::time::Duration, SpecError> {
    let bad = |why: String| SpecError::Invalid(format!("{what}: {why}"));
    match span {
        wire::control::Span::Seconds(s) => std::time::Duration::try_from_secs_f64(*s)
            .map_err(|_| bad(format!("{s} is no number of seconds"))),
        wire::control::Span::Text(t) => {
            humantime::parse_duration(t).map_err(|e| bad(format!("{t:?}: {e}")))
        }
    }
}

/// A session's own lifetime, stored with it (JSON) so that a re-adopted session keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Lifetime {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
}

impl Lifetime {
    pub fn ttl(&self) -> Option<std::time::Duration> {
        self.ttl_ms.map(std::time::Duration::from_millis)
    }

    pub fn idle_timeout(&self) -> Option<std::time::Duration> {
        self.idle_timeout_ms.map(std::time::Duration::from_millis)
    }

    /// Its stored form; `None` for a session that lives until it is ended.
    pub fn stored(&self) -> Option<String> {
        (*self != Lifetime::default()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    pub fn from_stored(text: Option<&str>) -> Lifetime {
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default()
    }
}

/// A sandboxed session's confinement: its caps and its workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct Confined {
    pub limits: sandbox::Limits,
    /// An own network namespace's egress allowlist (`None` on the host's network).
    pub egress: Option<crate::egress::Rules>,
    /// The directory the caller named (`cwd`); `None`: a fresh one is made for the session.
    pub workspace: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct SessionSpec {
    pub argv: Vec<String>,
    /// The program prints OSC 133 marks (our bash rc): it can run tasks.
    pub shell_integration: bool,
    pub cwd: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    pub cols: u16,
    pub rows: u16,
    pub label: Option<String>,
    pub host: Host,
    /// `None` when the server runs with `--sandbox off`.
    pub confined: Option<Confined>,
    pub lifetime: Lifetime,
    /// The snapshot to unpack into its fresh workspace before it starts.
    pub from_snapshot: Option<String>,
}

impl SessionSpec {
    /// `argv` on a PTY of `cols`×`rows`, and nothing else: no shell integration, no
    /// sandbox, the server's environment.
    pub fn plain(argv: Vec<String>, cols: u16, rows: u16) -> SessionSpec {
        SessionSpec {
            argv,
            shell_integration: false,
            cwd: None,
            env: Default::default(),
            cols,
            rows,
            label: None,
            host: Host::Native,
            confined: None,
            lifetime: Lifetime::default(),
            from_snapshot: None,
        }
    }
}

impl SpecRequest {
    /// Validates the request into a spec: `argv`, or `command` through `/bin/sh -lc`, or
    /// the login shell.
    pub fn into_spec(self, settings: &SessionSettings) -> Result<SessionSpec, SpecError> {
        let host = check_host(
            self.session_backend.as_deref(),
            self.session_class.as_deref(),
            settings,
        )?;
        let invalid = |m: &str| Err(SpecError::Invalid(m.to_owned()));
        let confined = self.confinement(settings)?;
        let lifetime = self.lifetime(settings)?;
        if self.from_snapshot.is_some() && (confined.is_none() || self.cwd.is_some()) {
            return invalid(
                "from_snapshot needs a sandboxed session with a fresh workspace (no cwd)",
            );
        }
        let mut shell_integration = false;
        let argv = match (self.argv, self.command) {
            (Some(_), Some(_)) => return invalid("give argv or command, not both"),
            (Some(argv), None) => {
                if argv.is_empty() || argv[0].is_empty() {
                    return invalid("argv must name a program");
                }
                argv
            }
            (None, Some(command)) => vec!["/bin/sh".into(), "-lc".into(), command],
            (None, None) => match &settings.shell_rc {
                Some(rc) => {
                    shell_integration = true;
                    let rc = match confined {
                        Some(_) => sandbox::SHELL_RC_PATH.to_owned(),
                        None => rc.display().to_string(),
                    };
                    vec![
                        BASH.into(),
                        "--noprofile".into(),
                        "--rcfile".into(),
                        rc,
                        "-i".into(),
                    ]
                }
                None => vec![login_shell(), "-l".into()],
            },
        };
        if argv.iter().any(|a| a.contains('\0')) {
            return invalid("argv must not contain NUL bytes");
        }
        // A sandboxed program starts in its workspace (`confined`).
        let cwd = match &confined {
            Some(_) => None,
            None => match self.cwd.filter(|c| !c.is_empty()) {
                Some(c) if !std::path::Path::new(&c).is_dir() => {
                    return Err(SpecError::Invalid(format!("cwd {c:?} is not a directory")));
                }
                c => c.map(PathBuf::from),
            },
        };
        let env = self.env.unwrap_or_default();
        if env.keys().any(|k| k.is_empty() || k.contains(['=', '\0']))
            || env.values().any(|v| v.contains('\0'))
        {
            return invalid("env names must be non-empty without '=' or NUL");
        }
        let dim = |v: Option<u16>, default: u16| match v {
            None => Ok(default),
            Some(v) if (1..=1024).contains(&v) => Ok(v),
            Some(v) => Err(SpecError::Invalid(format!("size {v} is outside 1..=1024"))),
        };
        if self.label.as_ref().is_some_and(|l| l.chars().count() > 128) {
            return invalid("label is longer than 128 characters");
        }
        Ok(SessionSpec {
            argv,
            cwd,
            env,
            cols: dim(self.cols, settings.default_cols)?,
            rows: dim(self.rows, settings.default_rows)?,
            label: self.label,
            // tmux keeps OSC 133 marks to itself: managed sessions run no tasks.
            shell_integration: shell_integration && host == Host::Native,
            host,
            confined,
            lifetime,
            from_snapshot: self.from_snapshot,
        })
    }

    /// The ttl (the server's maximum when none is asked) and the idle timeout.
    fn lifetime(&self, settings: &SessionSettings) -> Result<Lifetime, SpecError> {
        let l = &settings.lifecycle;
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let positive = |what: &str, d: Option<std::time::Duration>| match d {
            Some(d) if d.is_zero() => Err(SpecError::Invalid(format!("{what} must be positive"))),
            d => Ok(d),
        };
        let ttl = match (positive("ttl", self.ttl)?, l.max_ttl) {
            (Some(t), Some(max)) if t > max => {
                return Err(SpecError::Invalid(format!(
                    "ttl {} is longer than this server's --max-session-ttl {}",
                    humantime::format_duration(t),
                    humantime::format_duration(max)
                )));
            }
            (t, max) => t.or(max),
        };
        let idle = positive("idle_timeout", self.idle_timeout)?.or(l.idle_timeout);
        Ok(Lifetime {
            ttl_ms: ttl.map(ms),
            idle_timeout_ms: idle.map(ms),
        })
    }

    /// The session's confinement when the server sandboxes sessions: its limits as the
    /// caller may have them, and the workspace its `cwd` names.
    fn confinement(&self, settings: &SessionSettings) -> Result<Option<Confined>, SpecError> {
        let s = &settings.sandbox;
        if !s.enabled {
            return match self.sandbox {
                Some(_) => Err(SpecError::Invalid(
                    "this server runs with --sandbox off: a session's sandbox cannot be set".into(),
                )),
                None => Ok(None),
            };
        }
        let refused = |r: sandbox::SandboxRefusal| match r {
            sandbox::SandboxRefusal::Invalid(m) => SpecError::Invalid(m),
            sandbox::SandboxRefusal::Forbidden(m) => SpecError::Forbidden(m),
        };
        let (limits, egress) = s
            .resolve(self.sandbox.as_ref(), self.admin)
            .map_err(refused)?;
        let workspace = match self.cwd.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => Some(
                s.check_workspace(std::path::Path::new(c))
                    .map_err(refused)?,
            ),
            None => None,
        };
        Ok(Some(Confined {
            limits,
            egress,
            workspace,
        }))
    }
}

pub(super) fn login_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| std::path::Path::new(s).is_file())
        .unwrap_or_else(|| "/bin/sh".into())
}
