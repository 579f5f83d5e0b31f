//! `ptyhost sandbox-exec`: the helper a sandboxed session's PTY runs. It is ptyhost's own
//! binary started anew, so it is single-threaded while it makes namespaces, forks and
//! mounts. Three processes stand between ptyhost and the program:
//!
//! - the **helper** (this process, in the host's namespaces): it gives up the PTY as its
//!   controlling terminal, dies with its parent (`PR_SET_PDEATHSIG`), joins the session's
//!   cgroup, makes the namespaces and forks the init. It forwards SIGHUP and SIGTERM to the
//!   init and ends as the program ended (its exit code, or its signal).
//! - the **init** (pid 1 of the new PID namespace): it takes the PTY as its controlling
//!   terminal, builds the root (`root`), confines itself (`confine`), runs the program and
//!   reaps every orphan until the program ends. When it ends, the kernel kills whatever is
//!   left in the namespace, so nothing outlives the session.
//! - the **program**, which inherits the confinement and runs with no capabilities.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;

use anyhow::{Context, Result};
use rustix::process::{Pid, Signal, WaitOptions};

use super::{Launch, root};
use crate::sys::{self, SignalSet, UnshareFlags};

/// The subcommand (hidden from `--help`) that runs the helper.
pub const SUBCOMMAND: &str = "sandbox-exec";
/// The environment variable that carries the helper's `Launch` (JSON).
pub const LAUNCH_ENV: &str = "PTYHOST_SANDBOX_LAUNCH";
/// The line prefix under which the init reports what it enforced, when asked to.
pub const REPORT_PREFIX: &str = "ptyhost-sandbox-report ";
/// The exit code of a helper or init that could not confine or start the program.
const CANNOT_CONFINE: u8 = 125;

const FORWARDED: [i32; 2] = [libc::SIGHUP, libc::SIGTERM];

/// Runs the helper; never returns to ptyhost's own main.
pub fn main() -> ExitCode {
    let launch = std::env::var(LAUNCH_ENV)
        .context("no launch in the environment")
        .and_then(|l| serde_json::from_str::<Launch>(&l).context("the launch is no JSON"));
    match launch.and_then(helper) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("ptyhost sandbox: {e:#}");
            ExitCode::from(CANNOT_CONFINE)
        }
    }
}

enum Never {}

fn helper(launch: Launch) -> Result<Never> {
    let signals = SignalSet::block(&[
        libc::SIGHUP,
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGCHLD,
    ])?;
    // The PTY is this process's controlling terminal (its spawner made it so); the init,
    // in another session, takes it. Giving it up sends this session SIGHUP, held back above.
    let stdin = std::io::stdin();
    if rustix::termios::isatty(stdin.as_fd()) {
        sys::give_up_terminal(stdin.as_fd()).context("giving up the terminal")?;
        while signals.take_pending() == Some(libc::SIGHUP) {}
    }
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    if rustix::process::getppid().is_none_or(|p| p.as_raw_nonzero().get() == 1) {
        anyhow::bail!("the server that started this session is gone");
    }
    for procs in &launch.cgroup_procs {
        std::fs::write(procs, std::process::id().to_string())
            .with_context(|| format!("joining the session's cgroup ({})", procs.display()))?;
    }
    launch.rlimits.apply()?;
    let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
    let mut first = UnshareFlags::NEWUSER;
    if launch.own_network {
        first |= UnshareFlags::NEWNET;
    }
    sys::unshare(first).context("making the session's namespaces (user namespaces refused?)")?;
    // The session keeps its user and group ids, which are the only ones it has.
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{0} {0} 1", uid.as_raw()))?;
    std::fs::write("/proc/self/gid_map", format!("{0} {0} 1", gid.as_raw()))?;
    // The net agent lives in the session's network namespace and the host's others; it
    // has bound the egress proxy's listener before the program can start.
    if let (true, Some(socket)) = (launch.own_network, &launch.net_socket) {
        let (mut ready_r, ready_w) = std::io::pipe()?;
        if sys::fork()?.is_none() {
            drop(ready_r);
            super::net::agent_main(socket, ready_w);
        }
        drop(ready_w);
        let mut ready = [0u8];
        ready_r
            .read_exact(&mut ready)
            .context("starting the session's net agent")?;
    }
    sys::unshare(
        UnshareFlags::NEWNS
            | UnshareFlags::NEWPID
            | UnshareFlags::NEWIPC
            | UnshareFlags::NEWUTS
            | UnshareFlags::NEWCGROUP,
    )
    .context("making the session's namespaces")?;
    let (mut status_r, status_w) = std::io::pipe()?;
    let Some(init) = sys::fork()? else {
        drop(status_r);
        init_main(&launch, status_w, &signals);
    };
    drop(status_w);
    let init = Pid::from_raw(init as i32).context("fork returned no pid")?;
    let ended = loop {
        match signals.wait() {
            libc::SIGCHLD => {
                if let Some((_, st)) = rustix::process::waitpid(Some(init), WaitOptions::NOHANG)? {
                    break st;
                }
            }
            s if FORWARDED.contains(&s) => {
                let _ = rustix::process::kill_process(init, signal(s));
            }
            _ => {}
        }
    };
    // How the program ended, from the init; an init that was killed (by its memory cap,
    // say) before it could tell stands for the program.
    let mut status = [0u8; 2];
    match status_r.read_exact(&mut status) {
        Ok(()) if status[0] == 1 => sys::die_by_signal(status[1] as i32),
        Ok(()) => std::process::exit(status[1] as i32),
        Err(_) => match ended.terminating_signal() {
            Some(sig) => sys::die_by_signal(sig),
            None => std::process::exit(ended.exit_status().map_or(CANNOT_CONFINE as i32, |c| c)),
        },
    }
}

fn signal(s: i32) -> Signal {
    Signal::from_named_raw(s).unwrap_or(Signal::TERM)
}

/// The init: confines itself, runs the program, reaps, and reports how the program ended.
fn init_main(launch: &Launch, mut status: std::io::PipeWriter, signals: &SignalSet) -> ! {
    let program = match confine_and_start(launch, signals) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ptyhost sandbox: {e:#}");
            let _ = status.write_all(&[0, CANNOT_CONFINE]);
            std::process::exit(CANNOT_CONFINE as i32);
        }
    };
    let program = Pid::from_child(&program);
    // A child that ended while SIGCHLD was unblocked (to start the program) sent it then;
    // so reap first, then after every SIGCHLD.
    let mut signal_number = libc::SIGCHLD;
    loop {
        match signal_number {
            libc::SIGCHLD => loop {
                match rustix::process::waitpid(None, WaitOptions::NOHANG) {
                    Ok(Some((pid, st))) if pid == program => {
                        let report = match (st.exit_status(), st.terminating_signal()) {
                            (Some(code), _) => [0, code as u8],
                            (None, Some(sig)) => [1, sig as u8],
                            _ => [0, CANNOT_CONFINE],
                        };
                        let _ = status.write_all(&report);
                        std::process::exit(0);
                    }
                    Ok(Some(_)) => {}
                    _ => break,
                }
            },
            s if FORWARDED.contains(&s) => {
                let _ = rustix::process::kill_process(program, signal(s));
            }
            // Ctrl-C and Ctrl-\ reach the terminal's foreground group, which may be this
            // init's; they are meant for the program.
            _ => {}
        }
        signal_number = signals.wait();
    }
}

fn confine_and_start(launch: &Launch, signals: &SignalSet) -> Result<std::process::Child> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    // The program runs as the same user: without this it could read the init's memory
    // and environment (its launch, and under tmux the tmux server's environment) through
    // /proc/1.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    rustix::process::setsid()?;
    let stdin = std::io::stdin();
    if rustix::termios::isatty(stdin.as_fd()) {
        rustix::process::ioctl_tiocsctty(stdin.as_fd()).context("taking the terminal")?;
    }
    root::build(launch).context("building the session's root")?;
    rustix::system::sethostname(b"ptyhost")?;
    if launch.own_network {
        sys::loopback_up().context("bringing up the loopback interface")?;
    }
    let report = super::confine::apply(launch)?;
    if launch.report {
        println!("{REPORT_PREFIX}{}", serde_json::to_string(&report)?);
    }
    let (program, args) = launch
        .argv
        .split_first()
        .context("the launch names no program")?;
    // The program starts with no signal blocked; until it has started, a signal for the
    // init takes its default action, which ends the session as its program would.
    signals
        .unblocked(|| {
            std::process::Command::new(program)
                .args(args)
                .env_clear()
                .envs(&launch.env)
                .current_dir(&launch.workspace)
                .spawn()
        })
        .with_context(|| format!("cannot run {program:?}"))
}
