//! The command line of the `ptyhost` binary. Every `serve` flag is also an environment
//! variable `PTYHOST_<FLAG_IN_CAPS>`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::sessions::SessionSettings;

mod tools;
pub use tools::*;

/// What a new user needs first, under `ptyhost --help`.
const START_HERE: &str = "Start here:
  ptyhost serve                              run the agent and its web UI (prints a sign-in link)
  ptyhost token create --scope pty:control   make a token for a client
  ptyhost a2a attach URL SESSION             watch a session's terminal (--control to type)
  ptyhost files ls|get|put SESSION …         a session's files
  ptyhost session …                          pause, snapshot, fork or restore a session";

#[derive(Debug, Parser)]
#[command(
    name = "ptyhost",
    version,
    about = "A terminal agent on the A2A protocol",
    after_help = START_HERE
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<CliCommand>,
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Serve the agent, its sessions and the web UI over HTTP.
    Serve(Box<ServeArgs>),
    /// Create, list and revoke bearer tokens.
    Token(TokenArgs),
    /// Serve one agent over the STDIO binding (stdin/stdout) for the parent process that
    /// spawned this one; needs A2A_SESSION_ID.
    Stdio(StdioArgs),
    /// The A2A client: read a card, send, get, list, cancel and subscribe, over HTTP+JSON
    /// or JSON-RPC in A2A 0.3 or 1.0.
    A2a(A2aArgs),
    /// The A202 commercial extension, client side: check a counterparty's capability, and
    /// send it an object over A2A or plain HTTPS once the check passes.
    A202(A202Args),
    /// Put, get, list and remove files in a session's working directory over a running
    /// server's files routes.
    Files(FilesArgs),
    /// A session: export its recording from the store; over a running server, its
    /// network and ports, pause and resume, snapshot, fork and restore.
    Session(SessionCommandArgs),
    /// Serve MCP (the terminal tools) over stdin/stdout: hosting sessions of its own, or,
    /// with --url and --token, driving a running ptyhost's `B/mcp`.
    Mcp(McpArgs),
}

#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Where the SQLite database (ptyhost.db) lives.
    #[arg(
        long,
        env = "PTYHOST_DATA_DIR",
        default_value = "./data",
        global = true
    )]
    pub data_dir: PathBuf,
    /// A database URL that overrides --data-dir: `sqlite:PATH`, or
    /// `postgres://USER[:PW]@HOST:PORT/DB`, the store a cluster of nodes shares.
    #[arg(long, env = "PTYHOST_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "PTYHOST_LISTEN", default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub store: StoreArgs,
    /// This agent instance's id (the `{instance_id}` of `/agents/{instance_id}`).
    #[arg(long, env = "PTYHOST_INSTANCE_ID", default_value = "local")]
    pub instance_id: String,
    /// The URL clients reach this server at (AgentCard URLs and observer links).
    #[arg(long, env = "PTYHOST_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Serve each port preview on an origin of its own, `{port}-{session_id}.DOMAIN`
    /// (a wildcard DNS name for this server, on the public URL's port). A server on
    /// loopback uses `localhost` without it; elsewhere previews are then served under the
    /// API's paths only, sandboxed to an opaque origin.
    #[arg(long, env = "PTYHOST_PREVIEW_DOMAIN")]
    pub preview_domain: Option<String>,
    /// Ensures a pty:admin token with this value exists.
    #[arg(long, env = "PTYHOST_BOOTSTRAP_TOKEN", hide_env_values = true)]
    pub bootstrap_token: Option<String>,
    /// Serve HTTPS and WSS with this PEM certificate chain (needs --tls-key).
    #[arg(long, env = "PTYHOST_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "PTYHOST_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept plain ws:// upgrades although the listen address is not loopback.
    #[arg(long, env = "PTYHOST_ALLOW_INSECURE_WS")]
    pub allow_insecure_ws: bool,
    /// Another origin whose pages may open WebSockets here (repeatable); the listen and
    /// public origins are always allowed.
    #[arg(
        long = "allowed-origin",
        env = "PTYHOST_ALLOWED_ORIGIN",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// Let push notifications reach loopback and private addresses (for tests and private
    /// networks; link-local targets stay refused).
    #[arg(long, env = "PTYHOST_PUSH_ALLOW_LOOPBACK")]
    pub push_allow_loopback: bool,
    /// Seconds between WebSocket Pings.
    #[arg(long, env = "PTYHOST_HEARTBEAT_INTERVAL", default_value_t = 30.0)]
    pub heartbeat_interval: f64,
    /// Seconds without a Pong after which a connection is reaped.
    #[arg(long, env = "PTYHOST_HEARTBEAT_TIMEOUT", default_value_t = 90.0)]
    pub heartbeat_timeout: f64,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub node: NodeArgs,
    /// New pty-ws connections a token may open per second (twice that at once; the whole
    /// server takes ten times as many).
    #[arg(long, env = "PTYHOST_RATE_LIMIT_CONNECTIONS", default_value_t = 20)]
    pub rate_limit_connections: u32,
    /// pty-ws frames a token may send per second (twice that at once; the whole server
    /// takes ten times as many).
    #[arg(long, env = "PTYHOST_RATE_LIMIT_FRAMES", default_value_t = 2000)]
    pub rate_limit_frames: u32,
    /// Concurrent pty-ws connections one session takes.
    #[arg(
        long,
        env = "PTYHOST_MAX_CONNECTIONS_PER_SESSION",
        default_value_t = 128
    )]
    pub max_connections_per_session: usize,
    /// Seconds a connection may take to send a complete request head once it is ready for
    /// one: a new connection, or an idle keep-alive one (which is then closed).
    #[arg(long, env = "PTYHOST_HEADER_READ_TIMEOUT", default_value_t = 10.0)]
    pub header_read_timeout: f64,
    /// TCP connections the server holds at once (0: its open-files limit, less 256 for
    /// sessions and the database). One more is answered 503.
    #[arg(long, env = "PTYHOST_MAX_CONNECTIONS", default_value_t = 0)]
    pub max_connections: usize,
    /// Connections one address may hold that have not authenticated a request yet. One
    /// more is answered 429.
    #[arg(
        long,
        env = "PTYHOST_MAX_UNAUTHENTICATED_PER_ADDRESS",
        default_value_t = 64
    )]
    pub max_unauthenticated_per_address: usize,
    /// Serve the UI from this directory (e.g. `cargo leptos watch`'s target/site; also
    /// LEPTOS_SITE_ROOT) instead of the files embedded in the binary.
    #[arg(long, env = "PTYHOST_SITE_ROOT")]
    pub site_root: Option<PathBuf>,
}

impl ServeArgs {
    /// The session settings, after checking the heartbeat and session numbers.
    pub fn settings(&self) -> anyhow::Result<SessionSettings> {
        let (interval, timeout) = self.heartbeat()?;
        anyhow::ensure!(
            !interval.is_zero(),
            "--heartbeat-interval must be a positive number of seconds"
        );
        anyhow::ensure!(
            timeout > interval,
            "--heartbeat-timeout must be longer than --heartbeat-interval"
        );
        self.session.settings()
    }

    pub fn limits(&self) -> anyhow::Result<crate::limits::LimitSettings> {
        anyhow::ensure!(
            self.rate_limit_connections >= 1 && self.rate_limit_frames >= 1,
            "--rate-limit-connections and --rate-limit-frames must be at least 1"
        );
        anyhow::ensure!(
            self.max_connections_per_session >= 1,
            "--max-connections-per-session must be at least 1"
        );
        Ok(crate::limits::LimitSettings {
            connections_per_sec: self.rate_limit_connections,
            frames_per_sec: self.rate_limit_frames,
            connections_per_session: self.max_connections_per_session,
        })
    }

    /// (interval, timeout) of the WebSocket heartbeat.
    pub fn heartbeat(&self) -> anyhow::Result<(Duration, Duration)> {
        Ok((
            Duration::try_from_secs_f64(self.heartbeat_interval)?,
            Duration::try_from_secs_f64(self.heartbeat_timeout)?,
        ))
    }

    pub fn header_read_timeout(&self) -> anyhow::Result<Duration> {
        let timeout = Duration::try_from_secs_f64(self.header_read_timeout)?;
        anyhow::ensure!(!timeout.is_zero(), "--header-read-timeout must be above 0");
        Ok(timeout)
    }

    /// The connection caps; an automatic `--max-connections` raises the open-files limit
    /// as far as the system lets it first.
    pub fn admission(&self) -> crate::admission::AdmissionSettings {
        let max_open = match self.max_connections {
            0 => {
                let files = crate::sys::raise_open_files_limit();
                usize::try_from(files.saturating_sub(256))
                    .unwrap_or(usize::MAX)
                    .max(64)
            }
            n => n,
        };
        crate::admission::AdmissionSettings {
            max_open,
            max_unauthenticated: self.max_unauthenticated_per_address.max(1),
        }
    }

    pub fn site_root(&self) -> Option<PathBuf> {
        self.site_root
            .clone()
            .or_else(|| std::env::var_os("LEPTOS_SITE_ROOT").map(PathBuf::from))
    }
}

/// This server as a node of a cluster (several nodes on one PostgreSQL).
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// This node's id (default: one made on first start and kept in the data dir). A node
    /// restarted with the same id is the same node.
    #[arg(long, env = "PTYHOST_NODE_ID")]
    pub node_id: Option<String>,
    /// How the other nodes reach this one (default: its public URL).
    #[arg(long, env = "PTYHOST_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// Seconds without a heartbeat after which a node counts as dead and the others close
    /// its sessions.
    #[arg(long, env = "PTYHOST_NODE_TIMEOUT", default_value_t = 15.0)]
    pub node_timeout: f64,
}

impl NodeArgs {
    /// The node settings, for a server reached at `public_url`.
    pub fn settings(&self, public_url: &str) -> anyhow::Result<crate::cluster::NodeSettings> {
        let timeout = Duration::try_from_secs_f64(self.node_timeout)?;
        anyhow::ensure!(
            timeout >= Duration::from_millis(500),
            "--node-timeout must be at least 0.5 seconds"
        );
        if let Some(id) = &self.node_id {
            anyhow::ensure!(
                !id.is_empty()
                    && id.len() <= 128
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                "--node-id must be 1 to 128 letters, digits, '.', '_' or '-'"
            );
        }
        Ok(crate::cluster::NodeSettings {
            id: self.node_id.clone(),
            advertise_url: (self.advertise_url.as_deref().unwrap_or(public_url))
                .trim_end_matches('/')
                .to_owned(),
            timeout,
        })
    }
}

/// What every session and task runs with: `serve` and `stdio` share these.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Frames each session retains for replay at least.
    #[arg(long, env = "PTYHOST_REPLAY_FRAMES", default_value_t = 1000)]
    pub replay_frames: usize,
    /// Seconds of frames each session retains for replay at least.
    #[arg(long, env = "PTYHOST_REPLAY_RETENTION", default_value_t = 86400)]
    pub replay_retention: u64,
    /// Bytes of frames one session keeps in the store at most (e.g. `256MiB`); past it
    /// the oldest go first, whatever --replay-frames and --replay-retention say.
    #[arg(long, env = "PTYHOST_REPLAY_MAX_BYTES", default_value = "256MiB")]
    pub replay_max_bytes: bytesize::ByteSize,
    /// Bytes the whole store may hold in use (e.g. `4GiB`); past it the history of closed
    /// sessions goes first, oldest first, then every live session keeps an equal share.
    #[arg(long, env = "PTYHOST_MAX_STORE_BYTES", default_value = "4GiB")]
    pub max_store_bytes: bytesize::ByteSize,
    /// How long a closed session keeps its frames and tasks (e.g. `7d`, `12h`).
    #[arg(long, env = "PTYHOST_CLOSED_RETENTION", default_value = "7d", value_parser = humantime::parse_duration)]
    pub closed_retention: Duration,
    /// A keyframe at least this often (seconds) while output flows.
    #[arg(long, env = "PTYHOST_KEYFRAME_INTERVAL_SECS", default_value_t = 5.0)]
    pub keyframe_interval_secs: f64,
    /// A keyframe at least every this many output frames.
    #[arg(long, env = "PTYHOST_KEYFRAME_INTERVAL_FRAMES", default_value_t = 100)]
    pub keyframe_interval_frames: u64,
    /// Members of one session who may type into it at once.
    #[arg(long, env = "PTYHOST_MAX_CONTROLLERS", default_value_t = 1)]
    pub max_controllers: usize,
    /// Members of one session who may watch it at once.
    #[arg(long, env = "PTYHOST_MAX_OBSERVERS", default_value_t = 32)]
    pub max_observers: usize,
    /// What the agent does with a message: run it in a shell, or play the A2A TCK
    /// conformance scenarios.
    #[arg(long, env = "PTYHOST_EXECUTOR", value_enum, default_value = "shell")]
    pub executor: crate::executor::Kind,
    #[command(flatten)]
    pub a202: A202Flags,
    #[command(flatten)]
    pub agentic: AgenticArgs,
    #[command(flatten)]
    pub files: FileArgs,
    /// Default shells kept started, prompt printed, for messages without a contextId;
    /// 0 turns the pool off.
    #[arg(long, env = "PTYHOST_SHELL_POOL", default_value_t = 2)]
    pub shell_pool: usize,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Close a session after this long without input, output or a running task (`30m`;
    /// off by default). A session's own `idle_timeout` overrides it.
    #[arg(long, env = "PTYHOST_SESSION_IDLE_TIMEOUT", value_parser = humantime::parse_duration)]
    pub session_idle_timeout: Option<Duration>,
    /// No session lives longer than this (`8h`); a session's own `ttl` may be shorter, and
    /// is this when it names none. Off by default.
    #[arg(long, env = "PTYHOST_MAX_SESSION_TTL", value_parser = humantime::parse_duration)]
    pub max_session_ttl: Option<Duration>,
    /// Pause (freeze) a session idle this long; its next input, controller or task resumes
    /// it. Off by default.
    #[arg(long, env = "PTYHOST_PAUSE_WHEN_IDLE", value_parser = humantime::parse_duration)]
    pub pause_when_idle: Option<Duration>,
    /// Bytes all workspace snapshots may take together (they count against
    /// --max-store-bytes too).
    #[arg(long, env = "PTYHOST_MAX_SNAPSHOT_BYTES", default_value = "1GiB")]
    pub max_snapshot_bytes: bytesize::ByteSize,
}

/// How sessions are confined.
#[derive(Debug, Clone, Args)]
pub struct SandboxArgs {
    /// Confine every session (namespaces, a minimal root, its workspace only, no
    /// capabilities, Landlock, seccomp and caps); `off` runs sessions with the server's own
    /// authority, and must be asked for.
    #[arg(
        long = "sandbox",
        env = "PTYHOST_SANDBOX",
        value_enum,
        default_value = "on"
    )]
    pub mode: OnOff,
    /// Where a session without `cwd` gets its fresh workspace (`DIR/{session_id}`);
    /// default `DATA_DIR/workspaces`.
    #[arg(long, env = "PTYHOST_WORKSPACES")]
    pub workspaces: Option<PathBuf>,
    /// A session's network by default: `none` (loopback only) or `host`.
    #[arg(
        long = "sandbox-network",
        env = "PTYHOST_SANDBOX_NETWORK",
        value_enum,
        default_value = "none"
    )]
    pub network: crate::sandbox::Network,
    /// A session's memory cap, swap included (e.g. `2GiB`).
    #[arg(
        long = "sandbox-memory",
        env = "PTYHOST_SANDBOX_MEMORY",
        default_value = "2GiB"
    )]
    pub memory: bytesize::ByteSize,
    /// A session's cap on processes and threads.
    #[arg(
        long = "sandbox-pids",
        env = "PTYHOST_SANDBOX_PIDS",
        default_value_t = 512
    )]
    pub pids: u64,
    /// A session's CPU cap in cores (default: every core).
    #[arg(long = "sandbox-cpus", env = "PTYHOST_SANDBOX_CPUS")]
    pub cpus: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

impl SandboxArgs {
    /// The sandbox settings for a server whose data directory is `data_dir`: with `on`,
    /// after a probe that starts one confined program; a host that cannot confine is an
    /// error that names what is missing.
    pub fn settings(
        &self,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<crate::sandbox::SandboxSettings> {
        use crate::sandbox;
        if self.mode == OnOff::Off {
            return Ok(sandbox::SandboxSettings::off());
        }
        let defaults = sandbox::Limits {
            network: self.network,
            memory_bytes: self.memory.as_u64(),
            pids: self.pids,
            cpus: self.cpus.unwrap_or_else(sandbox::cores),
        };
        // The defaults must be limits a session could be given.
        let unchecked = sandbox::SandboxSettings {
            defaults,
            ..sandbox::SandboxSettings::off()
        };
        unchecked
            .resolve(Some(&sandbox::Request::default()), true)
            .map_err(|e| anyhow::anyhow!("--sandbox-*: {e}"))?;
        let data_dir = std::fs::canonicalize(data_dir)?;
        let workspaces = self
            .workspaces
            .clone()
            .unwrap_or_else(|| data_dir.join("workspaces"));
        std::fs::create_dir_all(&workspaces).map_err(|e| {
            anyhow::anyhow!("making the workspaces folder {}: {e}", workspaces.display())
        })?;
        let workspaces = std::fs::canonicalize(workspaces)?;
        let probe = sandbox::probe(&workspaces).map_err(|e| {
            anyhow::anyhow!(
                "--sandbox on: this host cannot confine sessions: {e:#}. ptyhost serves \
                 unconfined sessions only when asked: run it with --sandbox off"
            )
        })?;
        Ok(sandbox::SandboxSettings {
            enabled: true,
            workspaces,
            data_dir,
            defaults,
            cgroups: sandbox::Hierarchy::discover(),
            probe: Some(probe),
        })
    }
}

/// Files in and out of sessions (the files routes and a message's FileParts).
#[derive(Debug, Clone, Args)]
pub struct FileArgs {
    /// The largest file one transfer may write (e.g. `256MiB`).
    #[arg(long, env = "PTYHOST_MAX_FILE_BYTES", default_value = "256MiB")]
    pub max_file_bytes: bytesize::ByteSize,
    /// Observers (`pty:observe`, share links) may download files too.
    #[arg(long, env = "PTYHOST_OBSERVER_DOWNLOADS")]
    pub observer_downloads: bool,
    /// A message's FilePart may name a URL (http or https) for ptyhost to fetch.
    #[arg(long, env = "PTYHOST_FETCH_FILE_URLS")]
    pub fetch_file_urls: bool,
}

impl FileArgs {
    pub fn settings(&self) -> crate::files::FileSettings {
        crate::files::FileSettings {
            max_file_bytes: self.max_file_bytes.as_u64(),
            observer_downloads: self.observer_downloads,
            fetch_urls: self.fetch_file_urls,
        }
    }
}

/// The agentic-sandbox executor's extensions (`agentic`).
#[derive(Debug, Clone, Args)]
pub struct AgenticArgs {
    /// How the AgentCard presents this server: ptyhost's own card, or shaped like the
    /// agentic-sandbox executor's production card (runtime/v1 and idempotency/v1
    /// required, GET /health).
    #[arg(long, env = "PTYHOST_PROFILE", value_enum, default_value = "ptyhost")]
    pub profile: crate::agentic::Profile,
    /// How long idempotency/v1 replays a send's response to a retry (e.g. `24h`).
    #[arg(long, env = "PTYHOST_IDEMPOTENCY_TTL", default_value = "24h", value_parser = humantime::parse_duration)]
    pub idempotency_ttl: Duration,
}

/// The A202 commercial extension this agent declares and how it verifies what it receives.
#[derive(Debug, Clone, Args)]
pub struct A202Flags {
    /// Require the A202 extension: every A2A request must activate it.
    #[arg(long = "a202-required", env = "PTYHOST_A202_REQUIRED")]
    pub required: bool,
    #[command(flatten)]
    pub versions: A202Versions,
    /// Trusted A202 key records (a JSON array of key_record objects) that verify signatures;
    /// a signature by any other key is reported as not checkable.
    #[arg(long = "a202-keys", env = "PTYHOST_A202_KEYS")]
    pub keys: Option<PathBuf>,
}

/// A party's A202 version declaration.
#[derive(Debug, Clone, Args)]
pub struct A202Versions {
    /// The A202 specification versions read (MAJOR.MINOR, comma-separated).
    #[arg(
        long = "a202-read-versions",
        env = "PTYHOST_A202_READ_VERSIONS",
        value_delimiter = ',',
        default_value = "0.1"
    )]
    pub read_versions: Vec<String>,
    /// The A202 specification version written; one of the read versions.
    #[arg(
        long = "a202-write-version",
        env = "PTYHOST_A202_WRITE_VERSION",
        default_value = "0.1"
    )]
    pub write_version: String,
}

impl A202Flags {
    pub fn settings(&self) -> anyhow::Result<crate::a202::A202Settings> {
        Ok(crate::a202::A202Settings {
            required: self.required,
            versions: self.versions.local()?,
            keys: self.keys.clone(),
        })
    }
}

impl A202Versions {
    pub fn local(&self) -> anyhow::Result<crate::a202::capability::Versions> {
        crate::a202::capability::Versions::local(&self.read_versions, &self.write_version)
            .map_err(|e| anyhow::anyhow!("A202 versions: {e}"))
    }
}

impl SessionArgs {
    /// The session settings, after checking that the numbers make sense together.
    pub fn settings(&self) -> anyhow::Result<SessionSettings> {
        let secs = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(anyhow::anyhow!(
                    "--{name} must be a positive number of seconds"
                ))
            }
        };
        anyhow::ensure!(
            self.max_controllers >= 1,
            "--max-controllers must be at least 1"
        );
        anyhow::ensure!(
            self.replay_frames >= 1,
            "--replay-frames must be at least 1"
        );
        anyhow::ensure!(
            self.keyframe_interval_frames >= 1,
            "--keyframe-interval-frames must be at least 1"
        );
        anyhow::ensure!(
            self.replay_max_bytes.as_u64() >= 1024 * 1024,
            "--replay-max-bytes must be at least 1MiB (sixteen output frames)"
        );
        anyhow::ensure!(
            self.max_store_bytes.as_u64() >= 1024 * 1024,
            "--max-store-bytes must be at least 1MiB"
        );
        Ok(SessionSettings {
            replay_frames: self.replay_frames,
            replay_retention: Duration::from_secs(self.replay_retention),
            replay_max_bytes: self.replay_max_bytes.as_u64(),
            max_store_bytes: self.max_store_bytes.as_u64(),
            closed_retention: self.closed_retention,
            budget: Default::default(),
            keyframe_interval: secs("keyframe-interval-secs", self.keyframe_interval_secs)?,
            keyframe_frames: self.keyframe_interval_frames,
            max_controllers: self.max_controllers,
            max_observers: self.max_observers,
            default_cols: 120,
            default_rows: 30,
            shell_rc: None,
            tmux_socket: None,
            shell_pool: self.shell_pool,
            sandbox: crate::sandbox::SandboxSettings::off(),
            lifecycle: crate::sessions::Lifecycle {
                idle_timeout: self.session_idle_timeout,
                max_ttl: self.max_session_ttl,
                pause_when_idle: self.pause_when_idle,
                max_snapshot_bytes: self.max_snapshot_bytes.as_u64(),
            },
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct StdioArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub session: SessionArgs,
    /// Largest frame body accepted, in bytes.
    #[arg(long, env = "PTYHOST_STDIO_MAX_FRAME_BYTES", default_value_t = 1024 * 1024)]
    pub max_frame_bytes: usize,
    /// Let push notifications reach loopback and private addresses.
    #[arg(long, env = "PTYHOST_PUSH_ALLOW_LOOPBACK")]
    pub push_allow_loopback: bool,
}

#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub session: SessionArgs,
    /// A running ptyhost to drive instead (its base URL, `http://HOST:PORT`, or the MCP
    /// endpoint itself, `…/mcp`); its sessions show in its web UI.
    #[arg(long, env = "PTYHOST_URL", requires = "token")]
    pub url: Option<String>,
    /// The bearer token for --url.
    #[arg(long, env = "PTYHOST_TOKEN", hide_env_values = true, requires = "url")]
    pub token: Option<String>,
    /// Let push notifications reach loopback and private addresses.
    #[arg(long, env = "PTYHOST_PUSH_ALLOW_LOOPBACK")]
    pub push_allow_loopback: bool,
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod help {
    use clap::CommandFactory;

    /// Every command and flag under `cmd` that says nothing of itself, by its path.
    fn silent(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let builtin = matches!(arg.get_id().as_str(), "help" | "version");
            if !builtin && !arg.is_hide_set() && arg.get_help().is_none() {
                out.push(format!("{path} {}", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && !sub.is_hide_set() {
                out.push(path.clone());
            }
            silent(sub, &path, out);
        }
    }

    #[test]
    fn every_command_and_flag_has_a_line_of_help() {
        let mut out = Vec::new();
        silent(&super::Cli::command(), "ptyhost", &mut out);
        assert!(out.is_empty(), "without help:\n{}", out.join("\n"));
    }

    #[test]
    fn the_top_help_names_what_a_new_user_needs_first() {
        let help = super::Cli::command().render_help().to_string();
        let start = &help[help.find("Start here:").expect("a start section")..];
        for first in ["serve", "token", "a2a attach", "files", "session"] {
            assert!(
                start.contains(&format!("ptyhost {first}")),
                "{first} in:\n{start}"
            );
        }
    }
}
