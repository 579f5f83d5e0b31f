//! What the init does to itself before it starts the program, which inherits all of it:
//! `no_new_privs`; Landlock, which again limits writes to the workspace, `/tmp` and `/dev`
//! beneath the mount namespace (and, from ABI 6, signals and abstract sockets to the
//! session itself); no capabilities, in any set; and a seccomp filter that refuses new
//! namespaces, mounts and the calls that reach the kernel's most exposed parts.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use rustix::thread::CapabilitySet;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde::{Deserialize, Serialize};

use super::Launch;

/// The newest Landlock ABI ptyhost asks for; an older kernel enforces what it has.
const LANDLOCK_ABI: ABI = ABI::V6;

/// What the init enforced, as the start-up probe reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `full`, `partial` or `none`.
    pub landlock: String,
    pub seccomp: bool,
}

pub fn apply(launch: &Launch) -> Result<Report> {
    rustix::thread::set_no_new_privs(true)?;
    let landlock = landlock(launch)?;
    drop_capabilities()?;
    seccomp()?;
    Ok(Report {
        landlock: landlock.into(),
        seccomp: true,
    })
}

fn landlock(launch: &Launch) -> Result<&'static str> {
    let abi = LANDLOCK_ABI;
    let read = AccessFs::from_read(abi);
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(["/"], read))?
        .add_rules(path_beneath_rules(
            [launch.workspace.as_path(), "/tmp".as_ref(), "/dev".as_ref()],
            AccessFs::from_all(abi),
        ))?
        .restrict_self()
        .context("applying Landlock")?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "full",
        RulesetStatus::PartiallyEnforced => "partial",
        RulesetStatus::NotEnforced => "none",
    })
}

/// Empties the bounding and ambient sets, then every other set: the program, exec'd
/// after this, can never regain a capability (`no_new_privs` also ignores file caps).
fn drop_capabilities() -> Result<()> {
    for cap in CapabilitySet::all().iter() {
        match rustix::thread::remove_capability_from_bounding_set(cap) {
            // A capability newer than this kernel.
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(e).context("dropping the capability bounding set"),
        }
    }
    rustix::thread::clear_ambient_capability_set()?;
    rustix::thread::set_capabilities(
        None,
        rustix::thread::CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .context("dropping capabilities")
}

/// Calls that fail with EPERM inside a session, whatever their arguments.
const REFUSED: &[i64] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_fanotify_init,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// clone(2) flags that make namespaces.
const NAMESPACE_FLAGS: [i32; 8] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
    0x80, // CLONE_NEWTIME
];

fn seccomp() -> Result<()> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| anyhow::anyhow!("seccomp: {e:?}"))?;
    let any = |n: i64| (n, Vec::new());
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = REFUSED.iter().copied().map(any).collect();
    // clone with a namespace flag; TIOCSTI and TIOCLINUX, which type into the terminal.
    let flag_rules = NAMESPACE_FLAGS
        .iter()
        .map(|f| {
            rule(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(*f as u64),
                *f as u64,
            )
        })
        .collect::<Result<_>>()?;
    refused.insert(libc::SYS_clone, flag_rules);
    let ioctl_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .iter()
        .map(|r| rule(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *r))
        .collect::<Result<_>>()?;
    refused.insert(libc::SYS_ioctl, ioctl_rules);
    install(refused, libc::EPERM, arch)?;
    // clone3 passes its flags in memory a filter cannot read: ENOSYS sends libc back to
    // clone, whose flags it can.
    install(BTreeMap::from([any(libc::SYS_clone3)]), libc::ENOSYS, arch)
}

fn rule(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> Result<SeccompRule> {
    let condition = SeccompCondition::new(arg, len, op, value)
        .map_err(|e| anyhow::anyhow!("seccomp condition: {e}"))?;
    SeccompRule::new(vec![condition]).map_err(|e| anyhow::anyhow!("seccomp rule: {e}"))
}

fn install(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32, arch: TargetArch) -> Result<()> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| anyhow::anyhow!("seccomp filter: {e}"))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e| anyhow::anyhow!("seccomp program: {e:?}"))?;
    seccompiler::apply_filter(&program).context("installing the seccomp filter")
}
