//! The operating-system calls ptyhost makes on terminals, descriptors and processes, through
//! rustix's safe wrappers. The crate denies `unsafe` everywhere else; the blocks here
//! borrow the descriptor portable-pty hands out as a raw number, register a file with
//! Tokio's reactor, and ask glibc to give freed memory back.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::OFlags;
use rustix::process::Pid;
pub use rustix::process::Signal;
use rustix::termios::{OptionalActions, Termios};

/// A new descriptor for the open file `fd` names (a PTY master that stays open meanwhile).
pub fn dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: callers pass a descriptor they own and keep open for this call; the borrow
    // ends before it returns, and the duplicate is owned independently.
    #[allow(unsafe_code)]
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}

/// A non-blocking descriptor registered with Tokio's reactor, to read and write it as it
/// becomes ready.
pub fn registered(file: std::fs::File) -> io::Result<tokio::io::unix::AsyncFd<std::fs::File>> {
    // SAFETY: a `File` owns its descriptor: it stays open, and the same, until the
    // `AsyncFd` drops the file.
    #[allow(unsafe_code)]
    let registered = unsafe { tokio::io::unix::AsyncFd::register(file) };
    registered.map_err(|e| e.into_parts().1)
}

/// Makes reads and writes on the open file (every descriptor of it) return at once.
pub fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

/// What to wait for on a descriptor.
#[derive(Debug, Clone, Copy)]
pub enum Ready {
    Read,
    Write,
}

/// Blocks until `fd` is ready (or hung up: the next call on it then fails).
pub fn wait_for(fd: impl AsFd, ready: Ready) -> io::Result<()> {
    let flags = match ready {
        Ready::Read => PollFlags::IN,
        Ready::Write => PollFlags::OUT,
    };
    let mut fds = [PollFd::new(&fd, flags)];
    loop {
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// What the descriptor takes of `data` without waiting (0 when it takes nothing now).
pub fn write_now(fd: impl AsFd, data: &[u8]) -> io::Result<usize> {
    loop {
        match rustix::io::write(&fd, data) {
            Ok(n) => return Ok(n),
            Err(rustix::io::Errno::AGAIN) => return Ok(0),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Sends `signal` to process group `pgid`. Groups 0 and 1 are refused: `kill(0, …)` would
/// signal ptyhost's own group and 1 is init's, so a bad id can never reach either.
pub fn signal_group(pgid: i32, signal: Signal) -> io::Result<()> {
    let pid = (pgid > 1)
        .then(|| Pid::from_raw(pgid))
        .flatten()
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "refusing process group <= 1")
        })?;
    rustix::process::kill_process_group(pid, signal)?;
    Ok(())
}

/// Sends `signal` to process `pid` (never 0 or 1, as for `signal_group`).
pub fn signal_process(pid: u32, signal: Signal) -> io::Result<()> {
    let pid = (pid > 1)
        .then(|| Pid::from_raw(pid as i32))
        .flatten()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "refusing pid <= 1"))?;
    rustix::process::kill_process(pid, signal)?;
    Ok(())
}

/// Every process and its parent's pid, from `/proc` (field 4 of `stat`, after the
/// parenthesised command name, which may hold spaces and parentheses).
fn processes() -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            Some((pid, ppid.parse().ok()?))
        })
        .collect()
}

/// The children of process `parent`, oldest (lowest pid) first.
pub fn children(parent: u32) -> Vec<u32> {
    let mut children: Vec<u32> = (processes().into_iter())
        .filter(|(_, pp)| *pp == parent)
        .map(|(p, _)| p)
        .collect();
    children.sort_unstable();
    children
}

/// The descendants of process `root`, parents before their children, from one read of
/// `/proc`.
pub fn descendants(root: u32) -> Vec<u32> {
    let parents = processes();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Namespaces `unshare` may make (the flags of `unshare(2)`).
pub use rustix::thread::UnshareFlags;

/// Moves this process into new namespaces.
///
/// Only the sandbox helper calls it, while it is the single thread of a process that has
/// just started (`ptyhost sandbox-exec`), and never with `CLONE_FILES` or `CLONE_FS`, whose
/// unsharing is what makes the call unsafe for other threads' descriptor tables.
pub fn unshare(flags: UnshareFlags) -> io::Result<()> {
    assert!(!flags.intersects(UnshareFlags::FILES | UnshareFlags::FS));
    // SAFETY: see above: the caller is single-threaded and shares no descriptor table.
    #[allow(unsafe_code)]
    unsafe {
        rustix::thread::unshare_unsafe(flags)?
    };
    Ok(())
}

/// Forks this process: `None` in the child, the child's pid in the parent.
///
/// Only the sandbox helper calls it, while it is single-threaded, so the child's copy of
/// the process has no lock held by a thread that does not exist there.
pub fn fork() -> io::Result<Option<u32>> {
    // SAFETY: see above: with one thread, fork's child may run any code.
    #[allow(unsafe_code)]
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid as u32)),
    }
}

/// Gives up the controlling terminal `fd` is (TIOCNOTTY), so a process in another session
/// can take it as its own.
pub fn give_up_terminal(fd: impl AsFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: TIOCNOTTY takes no argument; the descriptor is borrowed for the call.
    #[allow(unsafe_code)]
    let r = unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), libc::TIOCNOTTY) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Brings the loopback interface of this process's network namespace up.
pub fn loopback_up() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    // SAFETY: ifreq is plain data, zeroed then filled in; the ioctls read and write only
    // that struct, which outlives both calls.
    #[allow(unsafe_code)]
    unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) == -1 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &req) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Signals held back from delivery so that `SignalSet::wait` takes them one at a time.
pub struct SignalSet(libc::sigset_t);

impl SignalSet {
    /// Blocks `signals` for this thread and returns them as a set to wait on.
    pub fn block(signals: &[i32]) -> io::Result<SignalSet> {
        // SAFETY: sigset_t is plain data that sigemptyset initialises; sigaddset and
        // sigprocmask only read and write it.
        #[allow(unsafe_code)]
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in signals {
                libc::sigaddset(&mut set, *s);
            }
            if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(SignalSet(set))
        }
    }

    /// Runs `f` with the set unblocked: a child started in it begins with none of them
    /// blocked (a signal mask survives fork and exec).
    pub fn unblocked<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: the set was initialised by `block`; sigprocmask only reads it.
        #[allow(unsafe_code)]
        unsafe {
            libc::sigprocmask(libc::SIG_UNBLOCK, &self.0, std::ptr::null_mut());
        }
        let out = f();
        // SAFETY: as above.
        #[allow(unsafe_code)]
        unsafe {
            libc::sigprocmask(libc::SIG_BLOCK, &self.0, std::ptr::null_mut());
        }
        out
    }

    /// Waits for one of the set's signals and returns its number.
    pub fn wait(&self) -> i32 {
        loop {
            // SAFETY: the set was initialised by `block`; no siginfo is asked for.
            #[allow(unsafe_code)]
            let s = unsafe { libc::sigwaitinfo(&self.0, std::ptr::null_mut()) };
            if s > 0 {
                return s;
            }
        }
    }

    /// Takes a signal of the set that is pending now, if any.
    pub fn take_pending(&self) -> Option<i32> {
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: as in `wait`, with a timeout that lives through the call.
        #[allow(unsafe_code)]
        let s = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &zero) };
        (s > 0).then_some(s)
    }
}

/// Ends this process with `signal`, as the program it stood for ended: the signal's
/// default action is restored and it is unblocked and raised. Falls back to exit 128+n.
pub fn die_by_signal(signal: i32) -> ! {
    // SAFETY: restoring a default disposition, unblocking and raising take plain values.
    #[allow(unsafe_code)]
    unsafe {
        let nocore = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &nocore);
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signal);
    }
    std::process::exit(128 + signal)
}

/// Registers a descriptor with tokio's reactor, to await its readiness.
pub fn async_fd(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns the descriptor, so nothing can close it (and let the
    // number be reused) while it is registered.
    #[allow(unsafe_code)]
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// Puts a terminal in raw mode for as long as it lives.
pub struct RawMode<Fd: AsFd> {
    fd: Fd,
    saved: Termios,
}

impl<Fd: AsFd> RawMode<Fd> {
    /// `None` when `fd` is no terminal (or its mode cannot be changed).
    pub fn enter(fd: Fd) -> Option<RawMode<Fd>> {
        if !rustix::termios::isatty(&fd) {
            return None;
        }
        let saved = rustix::termios::tcgetattr(&fd).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(&fd, OptionalActions::Now, &raw).ok()?;
        Some(RawMode { fd, saved })
    }
}

impl<Fd: AsFd> Drop for RawMode<Fd> {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(&self.fd, OptionalActions::Now, &self.saved);
    }
}

/// (columns, rows) of the terminal `fd` is, if it is one.
pub fn terminal_size(fd: impl AsFd) -> Option<(u16, u16)> {
    let ws = rustix::termios::tcgetwinsize(fd).ok()?;
    (ws.ws_col > 0).then_some((ws.ws_col, ws.ws_row))
}

/// Raises the soft limit on open descriptors to the hard one; returns the limit now.
pub fn raise_open_files_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if let (Some(_), Some(hard)) = (limit.current, limit.maximum) {
        let raised = Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return hard;
        }
    }
    limit.current.unwrap_or(u64::MAX)
}

/// Tunes an accepted connection: no Nagle delay (terminal frames are small and latency
/// bound), and at most `UNSENT_BYTES` waiting unsent in the kernel, so what a slow viewer
/// has not taken yet waits in ptyhost, where it can age out (`PTY_OUTPUT_LAGGED`), instead
/// of in a socket buffer that can hold seconds of output.
pub fn tune_connection(tcp: &tokio::net::TcpStream) -> io::Result<()> {
    const UNSENT_BYTES: u32 = 128 * 1024;
    tcp.set_nodelay(true)?;
    socket2::SockRef::from(tcp).set_tcp_notsent_lowat(UNSENT_BYTES)
}

/// A release of free memory is pending (`release_memory_soon`).
static RELEASE_PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Gives the memory that ended connections freed back to the system, a second after the
/// first of a burst of them ended. glibc keeps freed memory in its arenas: after 300
/// observers leave, RSS stays at three times what it was before they came.
pub fn release_memory_soon() {
    use std::sync::atomic::Ordering;
    if RELEASE_PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        RELEASE_PENDING.store(false, Ordering::Release);
        let _ = tokio::task::spawn_blocking(release_free_memory).await;
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim takes no pointers and is thread-safe: it locks each arena while
    // it returns that arena's free pages.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_signal_reaches_group_zero_or_init() {
        for pgid in [-5, 0, 1] {
            let refused = signal_group(pgid, Signal::KILL).unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{pgid}");
        }
    }

    #[test]
    fn a_descriptor_that_is_no_terminal_has_no_raw_mode_or_size() {
        let file = tempfile::tempfile().unwrap();
        assert!(RawMode::enter(&file).is_none());
        assert_eq!(terminal_size(&file), None);
    }
}
