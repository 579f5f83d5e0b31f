//! The control plane's JSON (`B/sessions`, `B/me`, share links), as the server writes it and
//! the UI and the tests read it.

use serde::{Deserialize, Serialize};

/// A session (`GET B/sessions/{sid}`, one entry of `GET B/sessions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub session_id: String,
    pub instance_id: String,
    /// The node it runs (ran) on.
    #[serde(default)]
    pub node_id: String,
    pub label: Option<String>,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub session_backend: String,
    pub session_class: String,
    pub cols: u16,
    pub rows: u16,
    /// `running`, `paused`, `exited` or `closed`.
    pub state: String,
    pub exit_code: Option<i32>,
    pub close_reason: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    pub closed_at: Option<String>,
    pub current_sequence: u64,
    /// Every retained frame after this sequence can be replayed.
    pub replay_floor: u64,
    pub controllers: usize,
    pub observers: usize,
    /// Its pty-ws URL.
    pub attach_url: String,
    /// What the session runs in.
    #[serde(default)]
    pub sandbox: Option<Sandbox>,
    /// What a running sandboxed session uses now.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// A sandboxed session's workspace: the one directory of the host it may write.
    #[serde(default)]
    pub workspace: Option<String>,
    /// The ports something listens on inside a running session's own network namespace,
    /// each reachable at `B/sessions/{sid}/ports/{port}/` and,
    /// for a browser, at its own origin `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ListeningPort>>,
    /// Its absolute lifetime, as asked or the server's `--max-session-ttl` (`"1h"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// How long it may be idle (no input, output or task) before it closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<String>,
    /// When a running session will close if nothing happens first (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    /// A paused session: since when, how, and whether for being idle (`state` is `paused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Paused>,
}

/// How a session is paused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paused {
    /// RFC 3339.
    pub since: String,
    pub method: crate::PauseMethod,
    /// Paused for being idle: the next input, controller or task resumes it.
    pub idle: bool,
}

/// A port listening inside a session: its number, its protocol (`tcp`) and, when previews
/// have origins of their own, the preview's (`http://8000-{sid}.localhost:3000/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListeningPort {
    pub port: u16,
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A sandboxed session's network: `"none"` (loopback only), `"host"`, or a namespace of its
/// own whose egress proxy allows what `allow` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Network {
    Mode(String),
    Allow { allow: Vec<String> },
}

/// A session's sandbox (`serve --sandbox`, and the session's own limits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sandbox {
    pub enabled: bool,
    pub network: Network,
    /// The memory cap, swap included.
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    pub cpus: Option<f64>,
    /// What enforces each boundary and cap: `cgroup-v1`, `cgroup-v2`, `rlimit`, `seccomp`, …
    #[serde(default)]
    pub enforced_by: std::collections::BTreeMap<String, String>,
}

/// What a sandboxed session uses now, from its cgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub memory_bytes: u64,
    pub pids: u64,
    pub cpu_seconds: f64,
}

/// The file name of the rc file that a shell started without a command reads.
pub const SHELL_RC_NAME: &str = "shell-integration.bash";

impl Session {
    /// The command as the user gave it: `/bin/sh -lc X` shows as `X`, and the shell the
    /// server starts when none is given as "login shell" (its rc file is the server's).
    pub fn command(&self) -> String {
        match self.argv.as_slice() {
            [sh, flag, cmd] if sh == "/bin/sh" && flag == "-lc" => cmd.clone(),
            _ if self.is_login_shell() => "login shell".to_owned(),
            argv => argv.join(" "),
        }
    }

    /// Whether it runs what the server starts when no command is given: bash reading the
    /// shell-integration rc file, or the user's shell as a login shell.
    pub fn is_login_shell(&self) -> bool {
        match self.argv.as_slice() {
            [_, noprofile, rcfile, rc, interactive] => {
                noprofile == "--noprofile"
                    && rcfile == "--rcfile"
                    && rc.ends_with(&format!("/{SHELL_RC_NAME}"))
                    && interactive == "-i"
            }
            [_, login] => login == "-l",
            _ => false,
        }
    }
}

/// `GET B/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionList {
    pub sessions: Vec<Session>,
}

/// A node of the cluster (`GET /nodes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub node_id: String,
    pub advertise_url: String,
    /// RFC 3339.
    pub started_at: String,
    pub last_seen: String,
    /// Its heartbeat is within `--node-timeout`.
    pub alive: bool,
    /// Its running sessions.
    pub sessions: u64,
}

/// `GET /nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nodes {
    pub nodes: Vec<Node>,
}

/// The caller (`GET B/me`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Me {
    pub token_id: String,
    pub scope: String,
    pub session_id: Option<String>,
    pub label: Option<String>,
    /// The token may read a session's files (`pty:control`, or any with
    /// `--observer-downloads`).
    #[serde(default)]
    pub file_downloads: bool,
}

impl Me {
    /// Whether the scope allows control (`pty:control` or `pty:admin`).
    pub fn can_control(&self) -> bool {
        self.scope != "pty:observe"
    }
}

/// A live observer link, never with its token (`GET B/sessions/{sid}/share`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareLink {
    pub id: String,
    pub label: Option<String>,
    pub created_at: String,
    pub expires_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareLinks {
    pub links: Vec<ShareLink>,
}

/// A new observer link (`POST B/sessions/{sid}/share`): its token, shown once, and the URL
/// that carries it in the fragment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewLink {
    pub id: String,
    pub token: String,
    pub url: String,
    pub expires_at: Option<String>,
}

/// A page of a session's stored frames (`GET B/sessions/{sid}/frames`), each as pty-ws sent
/// it; `next_after` is where the next page starts (`None` at the end). Frames at or below
/// `replay_floor` are gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FramePage {
    pub session_id: String,
    pub replay_floor: u64,
    pub last_sequence: u64,
    pub frames: Vec<crate::server::ServerFrame>,
    pub next_after: Option<u64>,
}

/// What a directory entry is (`GET B/sessions/{sid}/files/{dir}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of a directory listing; `mode` is the permission bits, `mtime` RFC 3339.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    pub name: String,
    pub size: u64,
    pub mode: u32,
    pub mtime: String,
    pub kind: FileKind,
}

/// A directory listing, sorted by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileList {
    pub entries: Vec<FileEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_audit_detail_reads_back_as_itself() {
        let details = [
            AuditDetail::Attach {
                scope: "pty:observe".into(),
                subprotocol: "pty-ws.v1".into(),
            },
            AuditDetail::Role {
                from: crate::Role::Observer,
                to: crate::Role::Controller,
            },
            AuditDetail::EgressChanged {
                from: vec![],
                to: vec!["example.com:443".into()],
            },
            AuditDetail::Opened {
                to: "sign_in".into(),
            },
            AuditDetail::LinkIssued {
                link_id: "l".into(),
                ttl_secs: 60,
                label: None,
            },
            AuditDetail::Link {
                link_id: "l".into(),
            },
            AuditDetail::Refused {
                what: "input".into(),
                reason: "observer".into(),
            },
            AuditDetail::Cut {
                connection: "pty-ws".into(),
                reason: "revoked".into(),
            },
            AuditDetail::Egress {
                target: "example.com:443".into(),
                address: "93.184.215.14:443".into(),
                sent: 1,
                received: 2,
                cut: false,
            },
            AuditDetail::EgressDenied {
                target: "10.0.0.1:22".into(),
                rules: vec!["example.com:443".into()],
            },
            AuditDetail::Preview {
                port: 8000,
                method: "GET".into(),
                path: "/".into(),
                status: 200,
            },
            AuditDetail::file("a.txt", 3, "http"),
            AuditDetail::File {
                path: "gone.txt".into(),
                bytes: None,
                via: None,
            },
            AuditDetail::Nothing {},
        ];
        for detail in details {
            let text = serde_json::to_string(&detail).unwrap();
            assert_eq!(
                serde_json::from_str::<AuditDetail>(&text).unwrap(),
                detail,
                "{text}"
            );
        }
    }

    #[test]
    fn a_shell_command_shows_as_typed_and_a_program_as_its_argv() {
        let mut s: Session = serde_json::from_value(serde_json::json!({
            "session_id": "s", "instance_id": "local", "label": null,
            "argv": ["/bin/sh", "-lc", "ls -la"], "cwd": null, "session_backend": "native",
            "session_class": "direct", "cols": 80, "rows": 24, "state": "running",
            "exit_code": null, "close_reason": null, "created_at": "2026-12-01T00:00:00Z",
            "closed_at": null, "current_sequence": 3, "replay_floor": 0, "controllers": 0,
            "observers": 1, "attach_url": "ws://127.0.0.1/agents/local/sessions/s/attach",
        }))
        .unwrap();
        assert_eq!(s.command(), "ls -la");
        s.argv = vec!["top".into(), "-b".into()];
        assert_eq!(s.command(), "top -b");
        let rc = format!("/var/lib/ptyhost/{SHELL_RC_NAME}");
        s.argv = ["/bin/bash", "--noprofile", "--rcfile", &rc, "-i"]
            .map(String::from)
            .into();
        assert_eq!(
            s.command(),
            "login shell",
            "the server's rc path is not shown"
        );
        s.argv = vec!["/usr/bin/zsh".into(), "-l".into()];
        assert_eq!(s.command(), "login shell");
    }
}

/// `201` of `PUT B/sessions/{sid}/files/{path}`: the file made and its size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileCreated {
    pub path: String,
    pub size: u64,
}

/// `GET B/audit`: the newest records first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecords {
    pub records: Vec<AuditRecord>,
}

/// One audit record: when (RFC 3339), what, in which session, by which token (its id) and
/// client, and the event's detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub at: String,
    pub event: String,
    pub session_id: Option<String>,
    pub token_id: Option<String>,
    pub client_id: Option<String>,
    pub detail: AuditDetail,
}

/// What an audit record tells beyond its event. Untagged: a reader tries the variants in
/// this order, so one whose members another's include comes first (`Role` before `Opened`,
/// `LinkIssued` before `Link`), and `Nothing` last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AuditDetail {
    /// A connection opened: the scope it carried and the subprotocol it chose.
    Attach { scope: String, subprotocol: String },
    /// A member's role moved.
    Role { from: crate::Role, to: crate::Role },
    /// A session's egress allowlist changed.
    EgressChanged { from: Vec<String>, to: Vec<String> },
    /// A share link opened a page (`sign_in`) or a terminal (`attach`).
    Opened { to: String },
    /// A share link was issued.
    LinkIssued {
        link_id: String,
        ttl_secs: u64,
        label: Option<String>,
    },
    /// A share link was revoked.
    Link { link_id: String },
    /// A write was refused: what, and why.
    Refused { what: String, reason: String },
    /// A connection was cut: which, and why.
    Cut { connection: String, reason: String },
    /// A connection through the session's egress proxy ended: where to, the address
    /// it reached, the bytes each way, and whether a narrowed allowlist cut it.
    Egress {
        target: String,
        address: String,
        sent: u64,
        received: u64,
        cut: bool,
    },
    /// The egress proxy refused a target: the allowlist it checked.
    EgressDenied { target: String, rules: Vec<String> },
    /// A request through a port preview, and the status it got.
    Preview {
        port: u16,
        method: String,
        path: String,
        status: u16,
    },
    /// A file moved in or out of a session (`via` http, mcp or a2a), or went.
    File {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
    },
    /// Nothing more.
    Nothing {},
}

impl AuditDetail {
    /// A file transfer of `bytes` through `via`.
    pub fn file(path: impl Into<String>, bytes: u64, via: &str) -> AuditDetail {
        AuditDetail::File {
            path: path.into(),
            bytes: Some(bytes),
            via: Some(via.to_owned()),
        }
    }
}

/// The control plane's error body: `{"error": {code, message}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: &str, message: &str) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: code.to_owned(),
                message: message.to_owned(),
            },
        }
    }
}

/// `POST B/sessions`: what to run and how. `command` runs through `/bin/sh -lc`; neither it
/// nor `argv` starts the login shell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, alias = "backend", skip_serializing_if = "Option::is_none")]
    pub session_backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The session's own sandbox limits (`network`, `memory`, `pids`, `cpus`), which the
    /// server reads and checks against the caller's scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
    /// Its absolute lifetime, at most the server's `--max-session-ttl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Span>,
    /// How long it may be idle before it closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Span>,
    /// A snapshot whose workspace it starts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_snapshot: Option<String>,
}

/// A duration as the flags take it (`"90s"`, `"5m"`, `"1h"`), or a number of seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Span {
    Seconds(f64),
    Text(String),
}

/// `PATCH B/sessions/{sid}`: what changes in a running session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateSession {
    pub sandbox: SandboxUpdate,
}

/// A running sandboxed session's network: `"none"` or `{"allow": [RULE…]}` (a session on
/// the host's network stays there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxUpdate {
    pub network: Network,
}

/// `POST B/sessions/{sid}/share`: how long the link lives and what it is called.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A workspace snapshot (`GET B/snapshots/{id}`; `POST B/sessions/{sid}:snapshot` answers
/// the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub snapshot_id: String,
    /// The session it was taken of.
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The archive's bytes (tar, zstd-compressed).
    pub bytes: u64,
    /// Its entries: directories, files and symbolic links.
    pub files: u64,
    /// RFC 3339.
    pub created_at: String,
}

/// `GET B/snapshots`, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshots {
    pub snapshots: Vec<Snapshot>,
}

/// `POST B/sessions/{sid}:snapshot`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TakeSnapshot {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `POST B/sessions/{sid}:fork`: how many sessions start from the snapshot (1 if absent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fork {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

/// What a fork made: the snapshot, and a session per copy, each with its own workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forked {
    pub snapshot_id: String,
    pub sessions: Vec<Session>,
}

/// The warm pool of default shells (`GET|PUT B/pool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Shells kept started, prompt printed.
    pub size: usize,
    /// The sandbox its shells start with (`network`, `memory`, `pids`, `cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
    /// Ready now.
    pub ready: usize,
    /// Messages that found a ready shell, and those that found none.
    pub hits: u64,
    pub misses: u64,
}

/// `PUT B/pool`: what changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}
