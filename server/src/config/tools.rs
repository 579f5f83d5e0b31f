//! The commands that act on a running server or on the store: `token`, `a2a`, `a202`,
//! `files` and `session`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{A202Versions, StoreArgs};
use crate::auth::Scope;

#[derive(Debug, Clone, Args)]
pub struct SessionCommandArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(subcommand)]
    pub command: SessionCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum SessionCommand {
    /// Write session SID as an asciicast v2 recording to --out, else stdout.
    Export {
        /// The session's id.
        session: String,
        /// The recording's file (stdout if absent).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Set running session SID's egress allowlist on a running server: each --allow
    /// RULE (host:port, *.domain:port, IP:port or CIDR:port; the port may be *), or
    /// none to allow nothing. Widening it needs pty:admin.
    Net {
        /// The session's id.
        session: String,
        /// A rule the session may connect to (repeatable).
        #[arg(long = "allow", value_name = "RULE")]
        allow: Vec<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the ports something listens on inside running session SID, with their
    /// preview URLs.
    Ports {
        /// The session's id.
        session: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Freeze every process of running session SID (input and tasks wait).
    Pause {
        /// The session's id.
        session: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Thaw paused session SID.
    Resume {
        /// The session's id.
        session: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Archive running session SID's workspace; prints the snapshot's id.
    Snapshot {
        /// The session's id.
        session: String,
        /// A name for the snapshot.
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Snapshot session SID and start --count sessions from it; prints their ids.
    Fork {
        /// The session's id.
        session: String,
        /// How many sessions start from the snapshot.
        #[arg(long, default_value_t = 1)]
        count: u32,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Start a session whose workspace is snapshot SNAPSHOT's; prints its id.
    Restore {
        /// The snapshot's id (from `GET B/snapshots` or `session snapshot`).
        snapshot: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// A running server and the token to call it with.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The server (its base: the root, or `/agents/{instance_id}`).
    #[arg(
        long,
        env = "PTYHOST_URL",
        default_value = "http://127.0.0.1:3000",
        global = true
    )]
    pub url: String,
    /// Bearer token.
    #[arg(long, env = "PTYHOST_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct FilesArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(subcommand)]
    pub op: FilesOp,
}

#[derive(Debug, Clone, Subcommand)]
pub enum FilesOp {
    /// Write PATH (relative to the session's working directory) from --from, else stdin.
    Put {
        /// The session's id.
        session: String,
        /// Where to write, relative to the session's working directory.
        path: String,
        /// The local file to send (stdin if absent).
        #[arg(long)]
        from: Option<PathBuf>,
    },
    /// Read PATH to --out, else stdout.
    Get {
        /// The session's id.
        session: String,
        /// The file, relative to the session's working directory.
        path: String,
        /// Where to write it (stdout if absent).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List a directory (the working directory itself by default).
    Ls {
        /// The session's id.
        session: String,
        /// The directory, relative to the session's working directory.
        #[arg(default_value = "")]
        path: String,
        /// Print the listing as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a file.
    Rm {
        /// The session's id.
        session: String,
        /// The file, relative to the session's working directory.
        path: String,
    },
}

#[derive(Debug, Clone, Args)]
pub struct A2aArgs {
    /// Which protocol versions to use: 0.3, 1.0 (never 0.3), or auto (1.0 first).
    #[arg(
        long = "a2a-protocol",
        env = "AIWG_A2A_PROTOCOL_POLICY",
        default_value = "0.3",
        global = true
    )]
    pub protocol: crate::client::Policy,
    /// Under auto, fall back to 0.3 when the server answers VersionNotSupported.
    #[arg(
        long = "a2a-protocol-fallback",
        env = "AIWG_A2A_PROTOCOL_FALLBACK",
        overrides_with = "no_fallback",
        global = true
    )]
    pub fallback: bool,
    /// Under auto, never fall back to 0.3.
    #[arg(
        long = "no-a2a-protocol-fallback",
        overrides_with = "fallback",
        global = true
    )]
    pub no_fallback: bool,
    /// Use only this binding (HTTP+JSON or JSONRPC).
    #[arg(long, global = true)]
    pub binding: Option<String>,
    /// Bearer token.
    #[arg(long, env = "PTYHOST_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Read the AgentCard from this file or URL instead of the agent's well-known path.
    #[arg(long, global = true)]
    pub card: Option<String>,
    /// Print machine-readable JSON (one object per line).
    #[arg(long, global = true)]
    pub json: bool,
    /// Spawn this command line as an agent and speak the STDIO binding to it (the URL
    /// arguments are then ignored), e.g. --stdio 'ptyhost stdio'.
    #[arg(long, global = true)]
    pub stdio: Option<String>,
    #[command(subcommand)]
    pub op: A2aOp,
}

#[derive(Debug, Clone, Subcommand)]
pub enum A2aOp {
    /// Show the card's interfaces and the order the policy tries them in.
    Card {
        /// The agent: its base URL, or its card's.
        url: String,
    },
    /// Report the policy and the version, binding and URL it selects.
    Status {
        /// The agent: its base URL, or its card's.
        url: String,
    },
    /// Send a message (its words are the command line the agent runs).
    Send {
        /// The agent: its base URL, or its card's.
        url: String,
        /// The command line, as words.
        #[arg(required = true)]
        text: Vec<String>,
        /// Run it in this session (the contextId), not a new one.
        #[arg(long)]
        context: Option<String>,
        /// Answer a task that waits for input.
        #[arg(long)]
        task: Option<String>,
        /// Stream the task's events as they come.
        #[arg(long)]
        stream: bool,
        /// Answer at once with the task, not when it ends.
        #[arg(long)]
        return_immediately: bool,
    },
    /// Read a task (with --history, its last N messages).
    Get {
        /// The agent: its base URL, or its card's.
        url: String,
        /// The task's id.
        id: String,
        /// Include the task's last N messages.
        #[arg(long)]
        history: Option<u32>,
    },
    /// List tasks, newest first (with --context, those of one session).
    List {
        /// The agent: its base URL, or its card's.
        url: String,
        /// Only the tasks of this session (contextId).
        #[arg(long)]
        context: Option<String>,
    },
    /// Cancel a task.
    Cancel {
        /// The agent: its base URL, or its card's.
        url: String,
        /// The task's id.
        id: String,
    },
    /// Follow a task's events over its stream until it ends.
    Subscribe {
        /// The agent: its base URL, or its card's.
        url: String,
        /// The task's id.
        id: String,
    },
    /// Follow a task through a push webhook and its SSE stream at once, until it ends.
    Watch {
        /// The agent: its base URL, or its card's.
        url: String,
        /// The task's id.
        id: String,
        /// Where the local webhook receiver listens.
        #[arg(long, default_value = "127.0.0.1:0")]
        webhook: String,
        /// The URL the agent should post to, when it differs from the listen address.
        #[arg(long)]
        webhook_url: Option<String>,
    },
    /// Watch a session's terminal over pty-ws (or type into it with --control); Ctrl-]
    /// detaches.
    Attach {
        /// The agent: its base URL, or its card's.
        url: String,
        /// The session's id.
        session: String,
        /// Take control and type into it (else watch only).
        #[arg(long)]
        control: bool,
    },
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it once on stdout.
    Create {
        /// pty:observe, pty:control or pty:admin.
        #[arg(long, value_parser = parse_scope)]
        scope: Scope,
        /// Bind the token to one session.
        #[arg(long)]
        session: Option<String>,
        /// Lifetime, e.g. 1h, 30m, 7d.
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Option<Duration>,
        /// A name to tell the token by (shown to others in a session).
        #[arg(long)]
        label: Option<String>,
    },
    /// List tokens (never their values).
    List,
    /// Revoke a token by id.
    Revoke {
        /// The token's id (from `token list`).
        id: String,
    },
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    s.parse()
}

#[derive(Debug, Clone, Args)]
pub struct A202Args {
    /// How the counterparty is reached: a2a (its AgentCard declares the extension) or https
    /// (its preflight document /.well-known/a202-capability.json does).
    #[arg(long, value_enum, default_value = "a2a", global = true)]
    pub carrier: crate::client::a202::Carrier,
    #[command(flatten)]
    pub versions: A202Versions,
    /// Bearer token.
    #[arg(long, env = "PTYHOST_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub op: A202Op,
}

#[derive(Debug, Clone, Subcommand)]
pub enum A202Op {
    /// Run the capability check against URL (an agent, its card, or a preflight document)
    /// and print the outcome; exit 1 when it fails (A202-EXTENSION-UNSUPPORTED).
    Check {
        /// The counterparty: an agent, its card, or a preflight document.
        url: String,
    },
    /// Check URL, then send the A202 object in FILE (sent as its RFC 8785 bytes).
    Send {
        /// The counterparty: an agent, its card, or a preflight document.
        url: String,
        /// The A202 object to send (JSON).
        file: String,
    },
    /// Make a signing key: writes DIR/KEY_ID.pk8 (the private key, PKCS#8) and
    /// DIR/KEY_ID.key-record.json (the key_record a counterparty passes to --a202-keys).
    Keygen {
        /// The key's id, in the key record and in signatures.
        #[arg(long)]
        key_id: String,
        /// The signature algorithm.
        #[arg(long, value_enum, default_value = "es256")]
        algorithm: A202Algorithm,
        /// The key record's creator: organization, agent and mandate ids.
        #[arg(long)]
        organization: String,
        /// The key record's agent id.
        #[arg(long)]
        agent: String,
        /// The key record's mandate id.
        #[arg(long)]
        mandate: String,
        /// Where the two files go.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Set FILE's content_hash, sign it, and print its RFC 8785 bytes.
    Seal {
        /// The A202 object to seal (JSON).
        file: String,
        /// The PKCS#8 private key written by keygen.
        #[arg(long)]
        key: PathBuf,
        /// The id of the key, as in its key record.
        #[arg(long)]
        key_id: String,
        /// The key's signature algorithm.
        #[arg(long, value_enum, default_value = "es256")]
        algorithm: A202Algorithm,
        /// What the signature is for (offer_submission, object_issuance, …).
        #[arg(long)]
        purpose: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum A202Algorithm {
    Es256,
    Eddsa,
}

impl A202Algorithm {
    pub fn algorithm(self) -> crate::a202::keys::Algorithm {
        match self {
            A202Algorithm::Es256 => crate::a202::keys::Algorithm::Es256,
            A202Algorithm::Eddsa => crate::a202::keys::Algorithm::EdDsa,
        }
    }
}
