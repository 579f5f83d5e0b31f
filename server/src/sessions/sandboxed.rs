//! A sandboxed session's side of the sandbox: its workspace, its cgroup, and the helper
//! its PTY (or tmux) runs instead of the program. `sandbox` does the confining.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use wire::control;

use super::{Confined, SessionSpec, Sessions};
use crate::audit::Audit;
use crate::egress::{Egress, Rules};
use crate::sandbox::net::NetAgent;
use crate::sandbox::{self, Cgroup, Launch, Limits, Network, Rlimits};

/// How long a new session's net agent may take to answer.
const AGENT_START: std::time::Duration = std::time::Duration::from_secs(10);

/// A running sandboxed session's confinement.
pub struct Sandboxed {
    pub workspace: PathBuf,
    pub limits: Limits,
    /// `None` where no cgroup can be made here (the caps are then rlimits).
    pub cgroup: Option<Cgroup>,
    /// A network namespace of its own: its agent and its way out.
    pub net: Option<SessionNet>,
}

/// An own network namespace, seen from ptyhost: the agent that makes sockets in it, the
/// allowlist, and the egress proxy once it serves.
pub struct SessionNet {
    pub agent: NetAgent,
    /// The port previews' connections into the namespace.
    pub previews: crate::previews::Client,
    rules: Mutex<Rules>,
    egress: Mutex<Option<Egress>>,
}

impl SessionNet {
    fn new(agent: NetAgent, rules: Rules) -> SessionNet {
        SessionNet {
            previews: crate::previews::Client::new(agent.clone()),
            agent,
            rules: Mutex::new(rules),
            egress: Mutex::new(None),
        }
    }

    pub fn rules(&self) -> Rules {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Changes the allowlist: new connections follow it at once; open ones it no longer
    /// allows are cut.
    pub fn set_rules(&self, rules: Rules) {
        let egress = self.egress.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = egress.as_ref() {
            e.set(rules.clone());
        }
        *self.rules.lock().unwrap_or_else(|e| e.into_inner()) = rules;
    }
}

/// What the store keeps of a session's sandbox (`sessions.sandbox`): its limits and, with
/// a namespace of its own, its allowlist.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    limits: Limits,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    egress: Option<Rules>,
}

/// The store's form of a sandbox.
pub fn stored(limits: &Limits, egress: Option<&Rules>) -> String {
    serde_json::to_string(&Stored {
        limits: *limits,
        egress: egress.cloned(),
    })
    .unwrap_or_default()
}

impl Sandboxed {
    /// Makes the workspace (a fresh `DIR/{id}` unless the caller named one) and the cgroup.
    pub fn make(
        id: &str,
        confined: &Confined,
        settings: &sandbox::SandboxSettings,
    ) -> Result<Sandboxed> {
        let workspace = match &confined.workspace {
            Some(w) => w.clone(),
            None => {
                let w = settings.workspaces.join(id);
                std::fs::create_dir(&w)
                    .with_context(|| format!("making the workspace {}", w.display()))?;
                w
            }
        };
        let cgroup = match &settings.cgroups {
            Some(h) => Some(h.create(id, &confined.limits)?),
            None => None,
        };
        let net = match confined.limits.network {
            Network::None => Some(SessionNet::new(
                NetAgent::at(net_socket(id, settings)?),
                confined.egress.clone().unwrap_or_default(),
            )),
            Network::Host => None,
        };
        Ok(Sandboxed {
            workspace,
            limits: confined.limits,
            cgroup,
            net,
        })
    }

    /// The session of a previous process, re-adopted: its workspace and cgroup as they are.
    pub fn adopted(
        id: &str,
        workspace: &Path,
        (limits, egress): (Limits, Option<Rules>),
        settings: &sandbox::SandboxSettings,
    ) -> Sandboxed {
        let net = (limits.network == Network::None)
            .then(|| net_socket(id, settings).ok())
            .flatten()
            .map(|s| SessionNet::new(NetAgent::at(s), egress.unwrap_or_default()));
        Sandboxed {
            workspace: workspace.to_path_buf(),
            limits,
            cgroup: settings.cgroups.as_ref().and_then(|h| h.open(id)),
            net,
        }
    }

    /// Serves the session's egress proxy once its net agent answers, and takes the socket
    /// that lists its ports.
    pub fn start_egress(self: &Arc<Self>, id: &str, audit: Audit) {
        let Some(net) = &self.net else {
            return;
        };
        let (me, agent, id) = (Arc::downgrade(self), net.agent.clone(), id.to_owned());
        tokio::spawn(async move {
            let listener = match agent.proxy_listener(AGENT_START).await.and_then(|fd| {
                let l = std::net::TcpListener::from(fd);
                l.set_nonblocking(true)?;
                tokio::net::TcpListener::from_std(l)
            }) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(session_id = %id, error = %e, "the session's egress proxy cannot start");
                    return;
                }
            };
            if let Err(e) = agent.prepare_ports().await {
                tracing::warn!(session_id = %id, error = %e, "the session's ports cannot be listed");
            }
            let Some(me) = me.upgrade() else {
                return;
            };
            if let Some(net) = &me.net {
                let mut egress = net.egress.lock().unwrap_or_else(|e| e.into_inner());
                *egress = Some(Egress::start(listener, &id, net.rules(), audit));
            }
        });
    }

    /// What the PTY runs for `spec`: the helper, which confines `spec`'s program.
    pub fn wrap(&self, spec: &SessionSpec) -> Result<SessionSpec> {
        let program = spec.argv.first().map(String::as_str).unwrap_or_default();
        anyhow::ensure!(
            sandbox::finds_program(program, &self.workspace),
            "no program {program:?} in the sandbox (it sees the host's system folders and its workspace)"
        );
        let mut launch = Launch::new(spec.argv.clone(), &self.workspace, &spec.env, &self.limits);
        launch.shell_rc = spec.shell_integration.then(|| super::SHELL_RC.to_owned());
        launch.net_socket = self.net.as_ref().map(|n| n.agent.path().to_path_buf());
        match &self.cgroup {
            Some(c) => launch.cgroup_procs = c.procs_files(),
            None => {
                launch.rlimits = Rlimits {
                    address_space: Some(self.limits.memory_bytes),
                    processes: Some(self.limits.pids),
                }
            }
        }
        let (argv, (name, value)) = launch.helper_command()?;
        Ok(SessionSpec {
            argv,
            cwd: None,
            env: [(name, value)].into(),
            ..spec.clone()
        })
    }

    /// Whether the kernel killed a process of the session for its memory cap.
    pub fn out_of_memory(&self) -> bool {
        self.cgroup.as_ref().is_some_and(|c| c.oom_kills() > 0)
    }

    pub fn usage(&self) -> Option<control::Usage> {
        Some(self.cgroup.as_ref()?.usage())
    }

    /// Removes the cgroup and the agent's socket once the session's processes are gone.
    pub fn remove(self: &Arc<Self>) {
        if let Some(net) = &self.net {
            let _ = std::fs::remove_file(net.agent.path());
        }
        if self.cgroup.is_some() {
            let me = self.clone();
            tokio::task::spawn_blocking(move || {
                if let Some(c) = &me.cgroup {
                    c.remove();
                }
            });
        }
    }
}

/// The limits and allowlist a stored session ran with (`None`: it was not sandboxed).
pub fn stored_limits(row: &crate::store::SessionRow) -> Option<(Limits, Option<Rules>)> {
    let s: Stored = serde_json::from_str(row.sandbox.as_deref()?).ok()?;
    Some((s.limits, s.egress))
}

/// Where the net agent of session `id` answers: beside the data, outside every workspace.
fn net_socket(id: &str, settings: &sandbox::SandboxSettings) -> Result<PathBuf> {
    let dir = settings.data_dir.join("net");
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    let path = dir.join(id);
    // sockaddr_un holds 108 bytes with the terminating NUL.
    anyhow::ensure!(
        path.as_os_str().len() < 108,
        "the data directory's path is too long for the session's net socket ({})",
        path.display()
    );
    Ok(path)
}

/// The session JSON's `network`: the namespace's mode, or the allowlist it has.
fn network_view(limits: &Limits, egress: Option<&Rules>) -> control::Network {
    match (limits.network, egress) {
        (Network::None, Some(rules)) if !rules.0.is_empty() => control::Network::Allow {
            allow: rules.texts(),
        },
        (n, _) => control::Network::Mode(n.as_str().to_owned()),
    }
}

/// The session JSON's `sandbox`: what a session runs in and what enforces each cap.
pub fn info(
    stored: Option<&(Limits, Option<Rules>)>,
    settings: &sandbox::SandboxSettings,
) -> control::Sandbox {
    match stored {
        Some((l, egress)) => control::Sandbox {
            enabled: true,
            network: network_view(l, egress.as_ref()),
            memory_bytes: Some(l.memory_bytes),
            pids: Some(l.pids),
            cpus: Some(l.cpus),
            enforced_by: settings.enforced_by(l.network),
        },
        None => control::Sandbox {
            enabled: false,
            network: control::Network::Mode(Network::Host.as_str().to_owned()),
            memory_bytes: None,
            pids: None,
            cpus: None,
            enforced_by: Default::default(),
        },
    }
}

impl Sessions {
    /// Ends the session when it reaches its memory cap (cgroup v1 kills one process; the
    /// session ends as a whole, as v2's `memory.oom.group` makes it).
    pub(super) fn watch_memory(
        &self,
        id: &str,
        sandboxed: &Sandboxed,
        commands: tokio::sync::mpsc::Sender<super::SessionCommand>,
    ) {
        let events = match sandboxed.cgroup.as_ref().map(Cgroup::oom_events) {
            Some(Ok(Some(fd))) => fd,
            Some(Err(e)) => {
                tracing::warn!(session_id = id, error = %format!("{e:#}"), "cannot watch the session's memory cap");
                return;
            }
            _ => return,
        };
        let Ok(events) = crate::sys::async_fd(events) else {
            return;
        };
        let id = id.to_owned();
        tokio::spawn(async move {
            tokio::select! {
                _ = events.readable() => {
                    tracing::warn!(session_id = %id, "the session reached its memory cap; it is ended");
                    let _ = commands.send(super::SessionCommand::Terminate(wire::CloseReason::MemoryLimit)).await;
                }
                _ = commands.closed() => {}
            }
        });
    }
}
