//! The server's sandbox settings and one session's limits: what a caller may ask for, and
//! what needs `pty:admin`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

use super::{Hierarchy, Probe};
use crate::egress::Rules;

/// A session's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Loopback only, in a namespace of its own: nothing outside the session is reachable.
    None,
    /// The host's network.
    Host,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Host => "host",
        }
    }
}

/// One session's caps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub network: Network,
    pub memory_bytes: u64,
    pub pids: u64,
    pub cpus: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            network: Network::None,
            memory_bytes: 2 << 30,
            pids: 512,
            cpus: cores(),
        }
    }
}

/// Every core of this machine.
pub fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

const MIN_MEMORY: u64 = 16 << 20;
const MIN_PIDS: u64 = 8;

/// What a caller asks of a session's network: `"none"`, `"host"`, or `{"allow": [RULE…]}`,
/// a namespace of its own whose only way out is the egress proxy, to what the rules allow.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum NetworkRequest {
    Mode(Network),
    Allow { allow: Rules },
}

impl NetworkRequest {
    /// The namespace it runs in, and the egress allowlist (an own namespace always has
    /// one: `"none"` allows nothing).
    pub fn split(&self) -> (Network, Option<Rules>) {
        match self {
            NetworkRequest::Mode(Network::None) => (Network::None, Some(Rules::default())),
            NetworkRequest::Mode(Network::Host) => (Network::Host, None),
            NetworkRequest::Allow { allow } => (Network::None, Some(allow.clone())),
        }
    }
}

/// What a caller asks for (`sandbox` in `POST B/sessions` or a new session's data part).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub network: Option<NetworkRequest>,
    #[serde(default, deserialize_with = "size")]
    pub memory: Option<u64>,
    pub pids: Option<u64>,
    pub cpus: Option<f64>,
}

/// Bytes, as a number or a string like `"256MiB"`.
fn size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Option::<Size>::deserialize(d)? {
        None => Ok(None),
        Some(Size::Bytes(b)) => Ok(Some(b)),
        Some(Size::Text(t)) => parse_size(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

impl Request {
    /// What another session's sandbox is, asked for again (a fork's copies).
    pub fn same_as(limits: &Limits, egress: Option<&Rules>) -> Request {
        let network = match (limits.network, egress) {
            (Network::None, Some(rules)) if !rules.0.is_empty() => NetworkRequest::Allow {
                allow: rules.clone(),
            },
            (network, _) => NetworkRequest::Mode(network),
        };
        Request {
            network: Some(network),
            memory: Some(limits.memory_bytes),
            pids: Some(limits.pids),
            cpus: Some(limits.cpus),
        }
    }
}

/// `"256MiB"`, `"2GiB"`, `"1048576"`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|_| format!("{text:?} is no size (give bytes, or a number with KiB, MiB or GiB)"))
}

/// A request this server refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxRefusal {
    #[error("{0}")]
    Invalid(String),
    /// Raising a cap above the server's default needs `pty:admin`.
    #[error("{0}")]
    Forbidden(String),
}

/// The server's sandbox: on or off, its defaults, and what the host enforces them with.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    pub enabled: bool,
    /// Where fresh workspaces are made (`DIR/{session_id}`).
    pub workspaces: PathBuf,
    /// The data directory, which no workspace may contain.
    pub data_dir: PathBuf,
    pub defaults: Limits,
    pub cgroups: Option<Hierarchy>,
    pub probe: Option<Probe>,
}

impl SandboxSettings {
    /// SandboxSettings with the sandbox off.
    pub fn off() -> SandboxSettings {
        SandboxSettings {
            enabled: false,
            workspaces: PathBuf::new(),
            data_dir: PathBuf::new(),
            defaults: Limits::default(),
            cgroups: None,
            probe: None,
        }
    }

    /// A session's limits and egress allowlist: the defaults, lowered (by anyone) or raised
    /// (by an admin) as `request` asks.
    pub fn resolve(
        &self,
        request: Option<&Request>,
        admin: bool,
    ) -> Result<(Limits, Option<Rules>), SandboxRefusal> {
        let d = self.defaults;
        let default_egress = (d.network == Network::None).then(Rules::default);
        let Some(r) = request else {
            return Ok((d, default_egress));
        };
        let raising = |what: &str, default: String| {
            SandboxRefusal::Forbidden(format!(
                "raising the sandbox's {what} above the server's {default} needs pty:admin"
            ))
        };
        let (network, egress) = match &r.network {
            Some(n) => n.split(),
            None => (d.network, default_egress),
        };
        if network == Network::Host && d.network == Network::None && !admin {
            return Err(SandboxRefusal::Forbidden(
                "network \"host\" needs pty:admin on this server (its default is \"none\")".into(),
            ));
        }
        if egress.as_ref().is_some_and(|e| !e.0.is_empty()) && d.network == Network::None && !admin
        {
            return Err(SandboxRefusal::Forbidden(
                "an egress allowlist needs pty:admin on this server (its default network is \"none\")".into(),
            ));
        }
        let memory_bytes = r.memory.unwrap_or(d.memory_bytes);
        if memory_bytes < MIN_MEMORY {
            return Err(SandboxRefusal::Invalid(format!(
                "sandbox memory must be at least 16MiB, not {memory_bytes} bytes"
            )));
        }
        if memory_bytes > d.memory_bytes && !admin {
            return Err(raising(
                "memory",
                bytesize::ByteSize(d.memory_bytes).to_string(),
            ));
        }
        let pids = r.pids.unwrap_or(d.pids);
        if pids < MIN_PIDS {
            return Err(SandboxRefusal::Invalid(format!(
                "sandbox pids must be at least {MIN_PIDS}, not {pids}"
            )));
        }
        if pids > d.pids && !admin {
            return Err(raising("pids", d.pids.to_string()));
        }
        let cpus = r.cpus.unwrap_or(d.cpus);
        if !(0.01..=1024.0).contains(&cpus) {
            return Err(SandboxRefusal::Invalid(format!(
                "sandbox cpus must be between 0.01 and 1024, not {cpus}"
            )));
        }
        if cpus > d.cpus && !admin {
            return Err(raising("cpus", d.cpus.to_string()));
        }
        let limits = Limits {
            network,
            memory_bytes,
            pids,
            cpus,
        };
        Ok((limits, egress))
    }

    /// Checks a workspace a caller names: an existing directory that holds neither the
    /// data directory nor the workspaces folder (a folder inside them is its own view: the
    /// session sees that folder alone).
    pub fn check_workspace(&self, dir: &Path) -> Result<PathBuf, SandboxRefusal> {
        let dir = std::fs::canonicalize(dir)
            .ok()
            .filter(|d| d.is_dir())
            .ok_or_else(|| {
                SandboxRefusal::Invalid(format!("cwd {:?} is not a directory", dir.display()))
            })?;
        if self.data_dir.starts_with(&dir) || self.workspaces.starts_with(&dir) {
            return Err(SandboxRefusal::Invalid(format!(
                "cwd {:?} holds ptyhost's data directory; a sandboxed session's workspace \
                 must not",
                dir.display()
            )));
        }
        Ok(dir)
    }

    /// What each cap is enforced by (the session JSON's `enforced_by`).
    pub fn enforced_by(&self, network: Network) -> BTreeMap<String, String> {
        let (caps, cpu) = match &self.cgroups {
            Some(h) => (h.name(), if h.caps_cpu() { h.name() } else { "none" }),
            None => ("rlimit", "none"),
        };
        let landlock = self.probe.as_ref().map_or("none", |p| p.landlock.as_str());
        let seccomp = self.probe.as_ref().is_some_and(|p| p.seccomp);
        BTreeMap::from(
            [
                (
                    "namespaces",
                    format!(
                        "user,mount,pid,ipc,uts,cgroup{}",
                        match network {
                            Network::None => ",net",
                            Network::Host => "",
                        }
                    ),
                ),
                ("filesystem", format!("mount-namespace,landlock-{landlock}")),
                (
                    "syscalls",
                    (if seccomp { "seccomp" } else { "none" }).to_owned(),
                ),
                ("capabilities", "none".to_owned()),
                ("memory", caps.to_owned()),
                ("pids", caps.to_owned()),
                ("cpus", cpu.to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SandboxSettings {
        SandboxSettings {
            defaults: Limits {
                network: Network::None,
                memory_bytes: 1 << 30,
                pids: 256,
                cpus: 2.0,
            },
            ..SandboxSettings::off()
        }
    }

    fn request(json: &str) -> Request {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn anyone_may_lower_a_default_and_only_an_admin_may_raise_one() {
        let s = settings();
        let lower = request(r#"{"memory": "256MiB", "pids": 32, "cpus": 0.5}"#);
        let (l, _) = s.resolve(Some(&lower), false).unwrap();
        assert_eq!((l.memory_bytes, l.pids, l.cpus), (256 << 20, 32, 0.5));
        for raise in [
            r#"{"memory": "4GiB"}"#,
            r#"{"pids": 1000}"#,
            r#"{"cpus": 3}"#,
            r#"{"network": "host"}"#,
        ] {
            let r = request(raise);
            assert!(
                matches!(
                    s.resolve(Some(&r), false),
                    Err(SandboxRefusal::Forbidden(_))
                ),
                "{raise}"
            );
            assert!(s.resolve(Some(&r), true).is_ok(), "{raise}");
        }
    }

    #[test]
    fn nonsense_limits_are_invalid_for_everyone() {
        let s = settings();
        for bad in [r#"{"memory": 1000}"#, r#"{"pids": 1}"#, r#"{"cpus": 0}"#] {
            let r = request(bad);
            assert!(
                matches!(s.resolve(Some(&r), true), Err(SandboxRefusal::Invalid(_))),
                "{bad}"
            );
        }
        assert!(serde_json::from_str::<Request>(r#"{"memory": "lots"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"disk": 1}"#).is_err());
    }

    #[test]
    fn a_workspace_may_not_hold_the_data_directory() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        let workspaces = data.join("workspaces");
        std::fs::create_dir_all(workspaces.join("one")).unwrap();
        std::fs::create_dir_all(root.path().join("project")).unwrap();
        let s = SandboxSettings {
            data_dir: std::fs::canonicalize(&data).unwrap(),
            workspaces: std::fs::canonicalize(&workspaces).unwrap(),
            ..settings()
        };
        assert!(s.check_workspace(&root.path().join("project")).is_ok());
        assert!(s.check_workspace(&workspaces.join("one")).is_ok());
        std::fs::create_dir_all(data.join("project")).unwrap();
        assert!(s.check_workspace(&data.join("project")).is_ok());
        for refused in [
            root.path().to_path_buf(),
            data.clone(),
            workspaces.clone(),
            PathBuf::from("/"),
        ] {
            assert!(
                s.check_workspace(&refused).is_err(),
                "{}",
                refused.display()
            );
        }
        assert!(s.check_workspace(&root.path().join("missing")).is_err());
    }
}
