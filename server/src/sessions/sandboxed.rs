//! A sandboxed session's side of the sandbox: its workspace, its cgroup, and the helper
//! its PTY (or tmux) runs instead of the program. `sandbox` does the confining.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use wire::control;

use super::{Confined, SessionSpec, Sessions};
use crate::sandbox::{self, Cgroup, Launch, Limits, Rlimits};

/// A running sandboxed session's confinement.
#[derive(Debug)]
pub struct Sandboxed {
    pub workspace: PathBuf,
    pub limits: Limits,
    /// `None` where no cgroup can be made here (the caps are then rlimits).
    pub cgroup: Option<Cgroup>,
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
        Ok(Sandboxed {
            workspace,
            limits: confined.limits,
            cgroup,
        })
    }

    /// The session of a previous process, re-adopted: its workspace and cgroup as they are.
    pub fn adopted(
        id: &str,
        workspace: &Path,
        limits: Limits,
        settings: &sandbox::SandboxSettings,
    ) -> Sandboxed {
        Sandboxed {
            workspace: workspace.to_path_buf(),
            limits,
            cgroup: settings.cgroups.as_ref().and_then(|h| h.open(id)),
        }
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

    /// Removes the cgroup once the session's processes are gone.
    pub fn remove(self: &Arc<Self>) {
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

/// The limits a stored session ran with (`None`: it was not sandboxed).
pub fn stored_limits(row: &crate::store::SessionRow) -> Option<Limits> {
    serde_json::from_str(row.sandbox.as_deref()?).ok()
}

/// The session JSON's `sandbox`: what a session runs in and what enforces each cap.
pub fn info(limits: Option<&Limits>, settings: &sandbox::SandboxSettings) -> control::Sandbox {
    match limits {
        Some(l) => control::Sandbox {
            enabled: true,
            network: l.network.as_str().to_owned(),
            memory_bytes: Some(l.memory_bytes),
            pids: Some(l.pids),
            cpus: Some(l.cpus),
            enforced_by: settings.enforced_by(l.network),
        },
        None => control::Sandbox {
            enabled: false,
            network: sandbox::Network::Host.as_str().to_owned(),
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
