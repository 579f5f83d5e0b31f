//! A cgroup per sandboxed session, which caps its memory (swap included), its processes and
//! its CPU time, and reports their use: v2 where the host delegates the controllers to
//! ptyhost's own cgroup, v1 otherwise (this project's CI machines mount v1). The session's
//! cgroup is made under ptyhost's own, so caps nest inside whatever limits ptyhost has.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use wire::control::Usage;

use super::Limits;

/// The folder, under ptyhost's own cgroup, that holds its sessions' cgroups.
const PARENT: &str = "ptyhost-sessions";
const PERIOD_US: u64 = 100_000;

/// Where session cgroups are made, found once at start.
#[derive(Debug, Clone, PartialEq)]
pub enum Hierarchy {
    /// One folder per controller, each under ptyhost's own cgroup of that controller.
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: Option<PathBuf>,
        cpuacct: Option<PathBuf>,
        /// Where sessions are paused, if the freezer controller is mounted.
        freezer: Option<PathBuf>,
    },
    /// One folder with the memory, pids and cpu controllers enabled for its children.
    V2 { parent: PathBuf },
}

impl Hierarchy {
    /// The hierarchy this process may make session cgroups in, if any.
    pub fn discover() -> Option<Hierarchy> {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        v2(&mounts, &own).or_else(|| v1(&mounts, &own))
    }

    /// `cgroup-v1` or `cgroup-v2`.
    pub fn name(&self) -> &'static str {
        match self {
            Hierarchy::V1 { .. } => "cgroup-v1",
            Hierarchy::V2 { .. } => "cgroup-v2",
        }
    }

    /// Whether the CPU cap can be enforced here.
    pub fn caps_cpu(&self) -> bool {
        match self {
            Hierarchy::V1 { cpu, .. } => cpu.is_some(),
            Hierarchy::V2 { .. } => true,
        }
    }

    /// The cgroup of session `id`, if a previous process made it.
    pub fn open(&self, id: &str) -> Option<Cgroup> {
        let cgroup = self.of(id);
        cgroup.dirs().iter().all(|d| d.is_dir()).then_some(cgroup)
    }

    fn of(&self, id: &str) -> Cgroup {
        match self {
            Hierarchy::V1 {
                memory,
                pids,
                cpu,
                cpuacct,
                freezer,
            } => Cgroup::V1 {
                memory: memory.join(id),
                pids: pids.join(id),
                cpu: cpu.as_ref().map(|c| c.join(id)),
                cpuacct: cpuacct
                    .as_ref()
                    .filter(|a| Some(*a) != cpu.as_ref())
                    .map(|c| c.join(id)),
                freezer: freezer.as_ref().map(|f| f.join(id)),
            },
            Hierarchy::V2 { parent } => Cgroup::V2 {
                dir: parent.join(id),
            },
        }
    }

    /// Makes the cgroup of session `id` with its caps.
    pub fn create(&self, id: &str, limits: &Limits) -> Result<Cgroup> {
        let cgroup = self.of(id);
        for dir in cgroup.dirs() {
            std::fs::create_dir(dir).with_context(|| format!("mkdir {}", dir.display()))?;
        }
        let quota = (limits.cpus * PERIOD_US as f64).ceil() as u64;
        let written = match &cgroup {
            Cgroup::V1 {
                memory, pids, cpu, ..
            } => {
                let memsw = memory.join("memory.memsw.limit_in_bytes");
                set(memory, "memory.limit_in_bytes", limits.memory_bytes)
                    .and_then(|()| match memsw.exists() {
                        true => set(memory, "memory.memsw.limit_in_bytes", limits.memory_bytes),
                        false => Ok(()),
                    })
                    .and_then(|()| set(pids, "pids.max", limits.pids))
                    .and_then(|()| match cpu {
                        Some(cpu) => set(cpu, "cpu.cfs_period_us", PERIOD_US)
                            .and_then(|()| set(cpu, "cpu.cfs_quota_us", quota)),
                        None => Ok(()),
                    })
            }
            Cgroup::V2 { dir } => set(dir, "memory.max", limits.memory_bytes)
                .and_then(|()| set(dir, "memory.swap.max", 0))
                .and_then(|()| set(dir, "memory.oom.group", 1))
                .and_then(|()| set(dir, "pids.max", limits.pids))
                .and_then(|()| write(dir, "cpu.max", &format!("{quota} {PERIOD_US}"))),
        };
        if let Err(e) = written {
            cgroup.remove();
            return Err(e);
        }
        Ok(cgroup)
    }
}

/// One session's cgroup.
#[derive(Debug, Clone, PartialEq)]
pub enum Cgroup {
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: Option<PathBuf>,
        cpuacct: Option<PathBuf>,
        freezer: Option<PathBuf>,
    },
    V2 {
        dir: PathBuf,
    },
}

impl Cgroup {
    fn dirs(&self) -> Vec<&PathBuf> {
        match self {
            Cgroup::V1 {
                memory,
                pids,
                cpu,
                cpuacct,
                freezer,
            } => [
                Some(memory),
                Some(pids),
                cpu.as_ref(),
                cpuacct.as_ref(),
                freezer.as_ref(),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Cgroup::V2 { dir } => vec![dir],
        }
    }

    /// The files the session's first process writes its pid to, to join.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    pub fn usage(&self) -> Usage {
        match self {
            Cgroup::V1 {
                memory,
                pids,
                cpu,
                cpuacct,
                ..
            } => Usage {
                memory_bytes: read(memory, "memory.usage_in_bytes").unwrap_or(0),
                pids: read(pids, "pids.current").unwrap_or(0),
                cpu_seconds: cpuacct
                    .as_ref()
                    .or(cpu.as_ref())
                    .and_then(|d| read(d, "cpuacct.usage"))
                    .map_or(0.0, |ns| ns as f64 / 1e9),
            },
            Cgroup::V2 { dir } => Usage {
                memory_bytes: read(dir, "memory.current").unwrap_or(0),
                pids: read(dir, "pids.current").unwrap_or(0),
                cpu_seconds: keyed(dir, "cpu.stat", "usage_usec").map_or(0.0, |us| us as f64 / 1e6),
            },
        }
    }

    /// Processes the kernel killed for the memory cap so far.
    pub fn oom_kills(&self) -> u64 {
        match self {
            Cgroup::V1 { memory, .. } => keyed(memory, "memory.oom_control", "oom_kill"),
            Cgroup::V2 { dir } => keyed(dir, "memory.events", "oom_kill"),
        }
        .unwrap_or(0)
    }

    /// An eventfd that becomes readable when the session reaches its memory cap (v1: the
    /// kernel then kills one process, and ptyhost ends the rest). v2 needs none: its
    /// `memory.oom.group` kills the whole session at once.
    pub fn oom_events(&self) -> Result<Option<OwnedFd>> {
        let Cgroup::V1 { memory, .. } = self else {
            return Ok(None);
        };
        use std::os::fd::AsRawFd;
        let efd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        let control = std::fs::File::open(memory.join("memory.oom_control"))?;
        write(
            memory,
            "cgroup.event_control",
            &format!("{} {}", efd.as_raw_fd(), control.as_raw_fd()),
        )?;
        Ok(Some(efd))
    }

    /// Freezes (`true`) or thaws every process of the session, and waits until the kernel
    /// says it is done. False when there is no freezer here (v1 without the controller).
    pub fn freeze(&self, frozen: bool) -> Result<bool> {
        let (dir, file, value, done): (&Path, _, _, fn(&Path) -> bool) = match self {
            Cgroup::V1 { freezer: None, .. } => return Ok(false),
            Cgroup::V1 {
                freezer: Some(dir), ..
            } => (
                dir,
                "freezer.state",
                if frozen { "FROZEN" } else { "THAWED" },
                if frozen {
                    |d| {
                        std::fs::read_to_string(d.join("freezer.state"))
                            .is_ok_and(|s| s.trim() == "FROZEN")
                    }
                } else {
                    |d| {
                        std::fs::read_to_string(d.join("freezer.state"))
                            .is_ok_and(|s| s.trim() == "THAWED")
                    }
                },
            ),
            Cgroup::V2 { dir } => (
                dir,
                "cgroup.freeze",
                if frozen { "1" } else { "0" },
                if frozen {
                    |d| keyed(d, "cgroup.events", "frozen") == Some(1)
                } else {
                    |d| keyed(d, "cgroup.events", "frozen") == Some(0)
                },
            ),
        };
        write(dir, file, value)?;
        for _ in 0..200 {
            if done(dir) {
                return Ok(true);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        anyhow::bail!("{} did not become {value}", dir.join(file).display())
    }

    /// Removes the cgroup once its processes are gone (it waits a little for them).
    pub fn remove(&self) {
        for dir in self.dirs() {
            for _ in 0..50 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        }
    }
}

fn write(dir: &Path, file: &str, value: &str) -> Result<()> {
    std::fs::write(dir.join(file), value)
        .with_context(|| format!("writing {value} to {}", dir.join(file).display()))
}

fn set(dir: &Path, file: &str, value: u64) -> Result<()> {
    write(dir, file, &value.to_string())
}

fn read(dir: &Path, file: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The value of `key` in a flat-keyed file (`key value` lines).
fn keyed(dir: &Path, file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Mount points of cgroup file systems: (mount point, fstype, super options).
fn cgroup_mounts(mountinfo: &str) -> Vec<(PathBuf, &str, &str)> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let point = l.split(' ').nth(4)?;
            let (_, after) = l.split_once(" - ")?;
            let mut f = after.split(' ');
            let (fstype, opts) = (f.next()?, f.nth(1)?);
            fstype
                .starts_with("cgroup")
                .then(|| (PathBuf::from(point), fstype, opts))
        })
        .collect()
}

fn v1(mountinfo: &str, own: &str) -> Option<Hierarchy> {
    let mounts = cgroup_mounts(mountinfo);
    let parent = |controller: &str| -> Option<PathBuf> {
        let (point, _, _) = mounts
            .iter()
            .find(|(_, t, o)| *t == "cgroup" && o.split(',').any(|c| c == controller))?;
        let path = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then_some(path)
        })?;
        let dir = point.join(path.trim_start_matches('/')).join(PARENT);
        std::fs::create_dir_all(&dir).ok()?;
        Some(dir)
    };
    Some(Hierarchy::V1 {
        memory: parent("memory")?,
        pids: parent("pids")?,
        cpu: parent("cpu"),
        cpuacct: parent("cpuacct"),
        freezer: parent("freezer"),
    })
}

/// v2 needs memory, pids and cpu delegated to ptyhost's cgroup. A cgroup with processes in
/// it cannot pass controllers to children, so when ptyhost is alone in its cgroup it moves
/// itself into a `server` child first.
fn v2(mountinfo: &str, own: &str) -> Option<Hierarchy> {
    let (point, _, _) = cgroup_mounts(mountinfo)
        .into_iter()
        .find(|(_, t, _)| *t == "cgroup2")?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = point.join(path.trim_start_matches('/'));
    let wanted = ["memory", "pids", "cpu"];
    let available = std::fs::read_to_string(dir.join("cgroup.controllers")).ok()?;
    if !wanted
        .iter()
        .all(|w| available.split_whitespace().any(|a| a == *w))
    {
        return None;
    }
    let enable = |d: &Path| write(d, "cgroup.subtree_control", "+memory +pids +cpu").is_ok();
    if !enable(&dir) {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        if procs
            .split_whitespace()
            .ne([std::process::id().to_string().as_str()])
        {
            return None;
        }
        let server = dir.join("server");
        std::fs::create_dir_all(&server).ok()?;
        write(&server, "cgroup.procs", &std::process::id().to_string()).ok()?;
        if !enable(&dir) {
            return None;
        }
    }
    let parent = dir.join(PARENT);
    std::fs::create_dir_all(&parent).ok()?;
    enable(&parent).then_some(Hierarchy::V2 { parent })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime shared:10 - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw
";

    #[test]
    fn cgroup_mounts_are_read_with_their_controllers() {
        let m = cgroup_mounts(MOUNTINFO);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[0],
            (
                PathBuf::from("/sys/fs/cgroup/memory"),
                "cgroup",
                "rw,memory"
            )
        );
        assert_eq!(m[2].1, "cgroup2");
    }

    #[test]
    fn keyed_files_give_the_value_of_their_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("f"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        )
        .unwrap();
        assert_eq!(keyed(dir.path(), "f", "oom_kill"), Some(3));
        assert_eq!(keyed(dir.path(), "f", "missing"), None);
    }
}
