//! How a session's process is confined (`serve --sandbox on`, the default). Sessions ask
//! this module for a launch; nothing else knows how confinement works.
//!
//! - `policy`: the server's defaults and a session's own limits, checked against who asks.
//! - `exec`: the helper and init processes that `ptyhost sandbox-exec` runs.
//! - `root`: the session's filesystem view (mount namespace).
//! - `confine`: `no_new_privs`, Landlock, capabilities and seccomp.
//! - `cgroup`: memory, process and CPU caps, and their use.
//! - `net`, `ports`: the session's network namespace, reached through its net agent.

mod cgroup;
mod confine;
pub mod exec;
pub mod net;
mod policy;
mod ports;
mod root;

pub use cgroup::{Cgroup, Hierarchy};
pub use policy::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Where a sandboxed shell finds its shell-integration rc file (written by the init).
pub const SHELL_RC_PATH: &str = "/run/ptyhost/shell-integration.bash";
/// The `PATH` a sandboxed program starts with.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Everything the helper needs to start one confined program (JSON in `exec::LAUNCH_ENV`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    pub argv: Vec<String>,
    /// The program's whole environment.
    pub env: BTreeMap<String, String>,
    /// Where the program starts: its one writable folder, and its HOME.
    pub workspace: PathBuf,
    /// A network namespace of its own (loopback only), or the host's.
    pub own_network: bool,
    /// Where the net agent of an own network namespace answers (`net`).
    #[serde(default)]
    pub net_socket: Option<PathBuf>,
    /// The session cgroup's `cgroup.procs` files, which the helper joins.
    pub cgroup_procs: Vec<PathBuf>,
    pub rlimits: Rlimits,
    /// The shell-integration rc file, which the init writes at `SHELL_RC_PATH`.
    #[serde(default)]
    pub shell_rc: Option<String>,
    /// The init prints what it enforced (`exec::REPORT_PREFIX`), for the start-up probe.
    #[serde(default)]
    pub report: bool,
}

/// Caps applied as rlimits where no cgroup can be made.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Rlimits {
    pub address_space: Option<u64>,
    pub processes: Option<u64>,
}

impl Rlimits {
    fn apply(&self) -> Result<()> {
        use rustix::process::{Resource, Rlimit, setrlimit};
        for (resource, value) in [
            (Resource::As, self.address_space),
            (Resource::Nproc, self.processes),
        ] {
            if let Some(v) = value {
                let limit = Rlimit {
                    current: Some(v),
                    maximum: Some(v),
                };
                setrlimit(resource, limit).with_context(|| format!("setting {resource:?}"))?;
            }
        }
        Ok(())
    }
}

impl Launch {
    /// The launch of `argv` in `workspace` with `env` on top of the sandbox's own
    /// environment.
    pub fn new(
        argv: Vec<String>,
        workspace: &Path,
        env: &BTreeMap<String, String>,
        limits: &Limits,
    ) -> Launch {
        let mut full = BTreeMap::from([
            ("PATH".to_owned(), PATH.to_owned()),
            ("HOME".to_owned(), workspace.display().to_string()),
            ("TERM".to_owned(), "xterm-256color".to_owned()),
            ("SHELL".to_owned(), "/bin/bash".to_owned()),
        ]);
        for name in ["LANG", "LC_ALL", "TZ", "USER", "LOGNAME"] {
            if let Ok(v) = std::env::var(name) {
                full.insert(name.to_owned(), v);
            }
        }
        let own_network = limits.network == Network::None;
        if own_network {
            // The only way out of the namespace: the egress proxy, which refuses what the
            // session's allowlist does not name (everything, for "none").
            let proxy = format!("http://127.0.0.1:{}", net::PROXY_PORT);
            for name in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "all_proxy",
            ] {
                full.insert(name.to_owned(), proxy.clone());
            }
            for name in ["NO_PROXY", "no_proxy"] {
                full.insert(name.to_owned(), "localhost,127.0.0.1,::1".to_owned());
            }
        }
        full.extend(env.clone());
        Launch {
            argv,
            env: full,
            workspace: workspace.to_path_buf(),
            own_network,
            net_socket: None,
            cgroup_procs: Vec::new(),
            rlimits: Rlimits::default(),
            shell_rc: None,
            report: false,
        }
    }

    /// What the PTY (or tmux) runs: ptyhost's own binary as the helper, and the one
    /// environment variable that carries this launch.
    pub fn helper_command(&self) -> Result<(Vec<String>, (String, String))> {
        let exe = std::env::current_exe().context("finding ptyhost's own binary")?;
        Ok((
            vec![exe.display().to_string(), exec::SUBCOMMAND.to_owned()],
            (exec::LAUNCH_ENV.to_owned(), serde_json::to_string(self)?),
        ))
    }
}

/// Whether the session's view has `program`: a path (the system folders and the workspace
/// are at their host paths), or a name on the sandbox's `PATH`. Checked before the start,
/// so that a missing program fails the start, as it does unsandboxed.
pub fn finds_program(program: &str, workspace: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = workspace.join(program);
        return executable(&path);
    }
    !program.is_empty()
        && PATH
            .split(':')
            .any(|dir| executable(&Path::new(dir).join(program)))
}

/// Runs `f` on the one thread that starts every sandboxed program. The helper dies with
/// the thread that forked it (`PR_SET_PDEATHSIG` follows threads, not processes), and
/// this thread lives as long as ptyhost, so the helper dies exactly when ptyhost does.
pub fn on_spawner_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    type Job = Box<dyn FnOnce() + Send>;
    static SPAWNER: std::sync::OnceLock<std::sync::Mutex<mpsc::Sender<Job>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sandbox-spawner".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })
            .expect("the sandbox spawner thread starts");
        std::sync::Mutex::new(tx)
    });
    let (reply, answer) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = reply.send(f());
    });
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send(job)
        .map_err(|_| anyhow::anyhow!("the sandbox spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| anyhow::anyhow!("the sandbox spawner dropped a spawn"))
}

/// The host pid of the program a helper (`helper`) runs: the child of its init, which is
/// the helper's child in the session's PID namespace (its net agent is in the host's).
pub fn program_pid(helper: u32) -> Option<u32> {
    let pid_ns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    let host = pid_ns(helper)?;
    let init = crate::sys::children(helper)
        .into_iter()
        .find(|&c| pid_ns(c).is_some_and(|ns| ns != host))?;
    crate::sys::children(init).first().copied()
}

/// What the start-up probe found the kernel enforces.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub landlock: String,
    pub seccomp: bool,
}

/// Starts one confined `/bin/sh -c 'exit 0'` the way every session starts, and reads what
/// it enforced; an error names what is missing.
pub fn probe(workspaces: &Path) -> Result<Probe> {
    let limits = Limits::default();
    let mut launch = Launch::new(
        ["/bin/sh", "-c", "exit 0"].map(String::from).to_vec(),
        workspaces,
        &BTreeMap::new(),
        &limits,
    );
    launch.report = true;
    let (argv, (name, value)) = launch.helper_command()?;
    let out = on_spawner_thread(move || {
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env(name, value)
            .stdin(std::process::Stdio::null())
            .output()
    })??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = stdout
        .lines()
        .find_map(|l| l.strip_prefix(exec::REPORT_PREFIX))
        .and_then(|r| serde_json::from_str::<confine::Report>(r).ok());
    match report {
        Some(r) if out.status.success() => Ok(Probe {
            landlock: r.landlock,
            seccomp: r.seccomp,
        }),
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("the confined test program did not run");
            anyhow::bail!("{why} ({})", out.status)
        }
    }
}
