//! The operating-system calls ptyhost makes on terminals, descriptors and processes, through
//! rustix's safe wrappers. The crate denies `unsafe` everywhere else; the two blocks here
//! borrow the descriptor portable-pty hands out as a raw number, and ask glibc to give
//! freed memory back.

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
