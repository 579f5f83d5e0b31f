//! The session's filesystem view, built by the init in its own mount namespace: a fresh
//! tmpfs root that holds read-only binds of the host's `/usr`, `/bin`, `/sbin`, `/lib*`
//! and `/etc` (secrets masked), a private `/tmp`, a `/dev` with the usual devices and a
//! devpts of its own, a `/proc` of the session's PID namespace, and the workspace,
//! read-write at its host path. Nothing else of the host is reachable: the old root is
//! detached at the end.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rustix::fs::StatVfsMountFlags;
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};

use super::{Launch, SHELL_RC_PATH};

/// Host directories the session sees, read-only (those a host lacks are left out).
const SYSTEM: [&str; 8] = [
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
];
/// Device nodes the session gets from the host's `/dev`.
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];
/// Files of `/etc` that only the host may read: they show as empty and unreadable.
const MASKED: [&str; 4] = ["etc/shadow", "etc/shadow-", "etc/gshadow", "etc/gshadow-"];

/// Where the host's root is while the new one is built (inside the staging root).
const OLD: &str = "/oldroot";
/// Where the new root is built.
const NEW: &str = "/newroot";

pub fn build(launch: &Launch) -> Result<()> {
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    // A staging tmpfs becomes the root, with the host's root under it at OLD, so that
    // every bind below names its source by a path that nothing has covered.
    let staging = Path::new("/tmp");
    tmpfs(staging, "mode=0755")?;
    for d in [OLD, NEW] {
        mkdir(&staging.join(&d[1..]), 0o755)?;
    }
    rustix::process::pivot_root(staging, staging.join(&OLD[1..])).context("pivot_root")?;
    std::env::set_current_dir("/")?;
    let new = Path::new(NEW);
    tmpfs(new, "mode=0755")?;
    for name in SYSTEM {
        system_dir(name)?;
    }
    mkdir(&new.join("tmp"), 0o1777)?;
    tmpfs(&new.join("tmp"), "mode=1777")?;
    devices(new)?;
    let proc = new.join("proc");
    mkdir(&proc, 0o555)?;
    mount_new(
        "proc",
        &proc,
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        "",
    )?;
    let rc = new.join(&SHELL_RC_PATH[1..]);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(rc.parent().unwrap_or(new))?;
    if let Some(text) = &launch.shell_rc {
        std::fs::write(&rc, text)?;
    }
    mask_secrets(new)?;
    workspace(new, &launch.workspace)?;
    // The new root replaces the staging one, and the host's root goes with it.
    std::env::set_current_dir(new)?;
    rustix::process::pivot_root(".", ".").context("pivot_root into the session's root")?;
    rustix::mount::unmount(".", UnmountFlags::DETACH).context("detaching the host's root")?;
    std::env::set_current_dir("/")?;
    remount("/", MountFlags::RDONLY)
}

fn tmpfs(at: &Path, options: &str) -> Result<()> {
    mount_new("tmpfs", at, MountFlags::NOSUID | MountFlags::NODEV, options)
}

/// Mounts a new file system of type `fs` (its source named the same) at `at`.
fn mount_new(fs: &str, at: &Path, flags: MountFlags, options: &str) -> Result<()> {
    let options = std::ffi::CString::new(options)?;
    rustix::mount::mount(fs, at, fs, flags, Some(options.as_c_str()))
        .with_context(|| format!("mounting a {fs} at {}", at.display()))
}

fn mkdir(path: &Path, mode: u32) -> Result<()> {
    std::fs::DirBuilder::new()
        .mode(mode)
        .create(path)
        .with_context(|| format!("mkdir {}", path.display()))
}

fn old(name: &str) -> PathBuf {
    Path::new(OLD).join(name)
}

/// A host directory under the new root: read-only, or the same symlink (`/bin` -> `usr/bin`).
fn system_dir(name: &str) -> Result<()> {
    let (src, dst) = (old(name), Path::new(NEW).join(name));
    let Ok(meta) = std::fs::symlink_metadata(&src) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        return Ok(());
    }
    if !meta.is_dir() {
        return Ok(());
    }
    mkdir(&dst, 0o755)?;
    rustix::mount::mount_bind_recursive(&src, &dst).with_context(|| format!("binding /{name}"))?;
    read_only_tree(&dst)
}

/// Remounts `top` and every mount beneath it read-only.
fn read_only_tree(top: &Path) -> Result<()> {
    let info = std::fs::read_to_string(old("proc/self/mountinfo"))?;
    let top_s = top.to_string_lossy();
    let beneath = |p: &str| {
        top_s == "/" || p == top_s || p.strip_prefix(&*top_s).is_some_and(|r| r.starts_with('/'))
    };
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape)
        .filter(|p| beneath(p))
        .collect();
    points.dedup();
    points
        .iter()
        .try_for_each(|p| remount(p, MountFlags::RDONLY))
}

/// Remounts the mount at `point` with `add` on top of the flags it has (a user namespace
/// may add flags to a mount it did not make, never take them away).
fn remount(point: &str, add: MountFlags) -> Result<()> {
    let flags = rustix::fs::statvfs(point)
        .with_context(|| format!("statvfs {point}"))?
        .f_flag;
    let mut keep = MountFlags::BIND | add;
    for (have, flag) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if flags.contains(have) {
            keep |= flag;
        }
    }
    rustix::mount::mount_remount(point, keep, "").with_context(|| format!("remounting {point}"))
}

/// A mountinfo path with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `/dev`: a tmpfs with the host's harmless devices bound in, a devpts of its own and a
/// private `/dev/shm`.
fn devices(new: &Path) -> Result<()> {
    let dev = new.join("dev");
    mkdir(&dev, 0o755)?;
    tmpfs(&dev, "mode=0755")?;
    for name in DEVICES {
        let dst = dev.join(name);
        std::fs::File::create(&dst)?;
        rustix::mount::mount_bind(old(&format!("dev/{name}")), &dst)
            .with_context(|| format!("binding /dev/{name}"))?;
    }
    let pts = dev.join("pts");
    mkdir(&pts, 0o755)?;
    mount_new(
        "devpts",
        &pts,
        MountFlags::NOSUID | MountFlags::NOEXEC,
        "newinstance,ptmxmode=0666,mode=0620",
    )?;
    std::os::unix::fs::symlink("pts/ptmx", dev.join("ptmx"))?;
    let shm = dev.join("shm");
    mkdir(&shm, 0o1777)?;
    tmpfs(&shm, "mode=1777")?;
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(name))?;
    }
    Ok(())
}

/// Covers the host's password hashes and SSH host keys with an empty file nobody may read.
fn mask_secrets(new: &Path) -> Result<()> {
    let empty = new.join("run/ptyhost/masked");
    std::fs::File::create(&empty)?;
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o000))?;
    let mut targets: Vec<PathBuf> = MASKED.iter().map(|m| new.join(m)).collect();
    if let Ok(ssh) = std::fs::read_dir(new.join("etc/ssh")) {
        targets.extend(ssh.flatten().map(|e| e.path()).filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("ssh_host_") && name.ends_with("_key")
        }));
    }
    for target in targets.iter().filter(|t| t.exists()) {
        rustix::mount::mount_bind(&empty, target)
            .with_context(|| format!("masking {}", target.display()))?;
        remount(&target.to_string_lossy(), MountFlags::RDONLY)?;
    }
    Ok(())
}

/// The workspace, read-write at the path it has on the host.
fn workspace(new: &Path, workspace: &Path) -> Result<()> {
    anyhow::ensure!(
        workspace.is_absolute(),
        "the workspace path is not absolute"
    );
    let dst = new.join(workspace.strip_prefix("/")?);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&dst)
        .with_context(|| format!("making {} in the session's root", workspace.display()))?;
    let src = Path::new(OLD).join(workspace.strip_prefix("/")?);
    rustix::mount::mount_bind_recursive(&src, &dst)
        .with_context(|| format!("binding the workspace {}", workspace.display()))?;
    remount(
        &dst.to_string_lossy(),
        MountFlags::NOSUID | MountFlags::NODEV,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_have_their_escapes_decoded() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/end\04"), r"/end\04");
    }
}
