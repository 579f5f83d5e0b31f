//! A process on a real PTY. The master is non-blocking: the session's task reads output
//! as the terminal has it (through Tokio's reactor, with no thread or queue between) and
//! writes input at once when the terminal takes it; two plain threads keep the calls that
//! must wait away from that task: one writes input the terminal could not take yet (and
//! whatever follows it), one waits for the exit status.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::SessionSpec;
use crate::sys::{self, Ready, Signal};

/// A terminal hands out at most its line discipline's buffer (4 KiB) per read.
const READ_CHUNK: usize = 4096;
/// Chunks of input queued for the PTY before a write is refused.
const INPUT_QUEUE: usize = 256;

pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    /// A descriptor of the master, for writes that must not wait.
    fd: OwnedFd,
    input: mpsc::Sender<Vec<u8>>,
    /// Writes handed to the writer thread and not finished: while there are any, later
    /// input queues behind them.
    queued: Arc<AtomicUsize>,
    pid: Option<u32>,
    program: Arc<ProgramPid>,
}

/// The pid of the session's own program: the PTY's child, or, when that is the sandbox's
/// helper, the program it runs, looked up the first time it is asked for and then kept.
#[derive(Debug)]
pub struct ProgramPid {
    child: Option<u32>,
    confined: bool,
    found: std::sync::atomic::AtomicU32,
}

impl ProgramPid {
    pub fn get(&self) -> Option<u32> {
        if !self.confined {
            return self.child;
        }
        match self.found.load(Ordering::Acquire) {
            0 => {
                let found = crate::sandbox::program_pid(self.child?)?;
                self.found.store(found, Ordering::Release);
                Some(found)
            }
            known => Some(known),
        }
    }
}

/// What the process produces: its output and its exit.
pub struct PtyEvents {
    pub output: PtyOutput,
    pub exit: oneshot::Receiver<Exit>,
}

/// The terminal's output side, read by the session's task as it becomes readable. The
/// master is registered with the reactor on the first read, in the task that reads it (a
/// sandboxed session's PTY is opened on a thread of its own).
pub struct PtyOutput {
    file: Option<File>,
    ready: Option<AsyncFd<File>>,
    ended: bool,
}

impl PtyOutput {
    /// The next output, once there is some; `None` when the terminal has hung up. Safe to
    /// cancel: it reads only after its last wait.
    pub async fn read(&mut self) -> Option<Vec<u8>> {
        if let Some(file) = self.file.take() {
            self.ready = sys::registered(file).ok();
        }
        let ready = self.ready.as_ref().filter(|_| !self.ended)?;
        loop {
            let mut guard = ready.readable().await.ok()?;
            let mut data = Vec::new();
            match guard.try_io(|f| read_into(f.get_ref(), &mut data, READ_CHUNK)) {
                Ok(Ok(n)) if n > 0 => return Some(data),
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(_) => {
                    self.ended = true;
                    return None;
                }
                Err(_would_block) => {}
            }
        }
    }

    /// Appends output to `data`, up to `max` bytes in all: what the terminal has now, and
    /// what it gets until `deadline` (a flood is read as it comes, so that the program
    /// never waits on a full terminal while a frame is gathered).
    pub async fn read_more(&mut self, data: &mut Vec<u8>, max: usize, deadline: Instant) {
        let Some(ready) = self.ready.as_ref() else {
            return;
        };
        while data.len() < max && !self.ended {
            let most = max - data.len();
            // Before the deadline, wait for more; after it (or without one), take only what
            // is there: a timer already due would still wait for the clock's next tick.
            let waited = match Instant::now() < deadline {
                true => tokio::time::timeout_at(deadline, ready.readable())
                    .await
                    .ok(),
                false => None,
            };
            let read = match waited {
                Some(Ok(mut guard)) => match guard.try_io(|f| read_into(f.get_ref(), data, most)) {
                    Ok(read) => read,
                    Err(_would_block) => continue,
                },
                Some(Err(e)) => Err(e),
                // Through the reactor, so that an EAGAIN clears the readiness: the next read
                // then waits instead of trying the terminal again.
                None => ready.try_io(Interest::READABLE, |f| read_into(f, data, most)),
            };
            match read {
                Ok(0) => self.ended = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return;
                    }
                }
                Err(_) => self.ended = true,
            }
        }
    }
}

/// Reads at most `most` bytes onto the end of `data`. A terminal that has hung up (every
/// descriptor of its other side closed) answers EIO, which ends the output like EOF.
fn read_into(file: &File, data: &mut Vec<u8>, most: usize) -> io::Result<usize> {
    data.reserve_exact(most.min(READ_CHUNK));
    Ok(rustix::io::read(
        file,
        rustix::buffer::spare_capacity(data),
    )?)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// The exit code, or `None` when a signal ended the process.
    pub code: Option<i32>,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the PTY input queue is full")]
    Full,
    #[error("the PTY no longer accepts input")]
    Closed,
}

pub fn size(cols: u16, rows: u16) -> PtySize {
    PtySize {
        rows,
        cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

pub fn spawn(spec: &SessionSpec) -> anyhow::Result<(Pty, PtyEvents)> {
    let pair = native_pty_system().openpty(size(spec.cols, spec.rows))?;
    let mut cmd = CommandBuilder::from_argv(spec.argv.iter().map(Into::into).collect());
    if spec.confined.is_some() {
        // The sandbox's helper gets its launch alone: ptyhost's own environment (which
        // may hold its bootstrap token) never enters the session.
        cmd.env_clear();
    }
    cmd.env("TERM", "xterm-256color");
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(cwd) = &spec.cwd {
        cmd.cwd(cwd);
    }
    let mut child = pair.slave.spawn_command(cmd)?;
    drop(pair.slave);
    let pid = child.process_id();
    let fd = pair
        .master
        .as_raw_fd()
        .ok_or_else(|| anyhow::anyhow!("the PTY master has no descriptor"))?;
    let fd = sys::dup(fd)?;
    sys::set_nonblocking(&fd)?;
    let reader = File::from(fd.try_clone()?);
    let ready = fd.try_clone()?;
    let mut writer = pair.master.take_writer()?;

    let (input, mut in_rx) = mpsc::channel::<Vec<u8>>(INPUT_QUEUE);
    let queued = Arc::new(AtomicUsize::new(0));
    let done = queued.clone();
    std::thread::Builder::new()
        .name("pty-write".into())
        .spawn(move || {
            while let Some(data) = in_rx.blocking_recv() {
                if write_all(&mut writer, &ready, &data).is_err() {
                    break;
                }
                done.fetch_sub(1, Ordering::Release);
            }
        })?;

    let (exit_tx, exit) = oneshot::channel();
    std::thread::Builder::new()
        .name("pty-wait".into())
        .spawn(move || {
            let code = match child.wait() {
                Ok(status) if status.signal().is_none() => Some(status.exit_code() as i32),
                _ => None,
            };
            let _ = exit_tx.send(Exit { code });
        })?;

    Ok((
        Pty {
            master: pair.master,
            fd,
            input,
            queued,
            pid,
            program: Arc::new(ProgramPid {
                child: pid,
                confined: spec.confined.is_some(),
                found: Default::default(),
            }),
        },
        PtyEvents {
            output: PtyOutput {
                file: Some(reader),
                ready: None,
                ended: false,
            },
            exit,
        },
    ))
}

impl Pty {
    /// Queues input for the process without waiting.
    /// Writes input now if the terminal takes it (and nothing is queued before it);
    /// whatever it does not take goes to the writer thread, in order.
    /// The program's process id (for a managed session, the tmux client's).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub fn write(&self, mut data: Vec<u8>) -> Result<(), InputError> {
        if self.queued.load(Ordering::Acquire) == 0 {
            match sys::write_now(&self.fd, &data) {
                Ok(n) if n == data.len() => return Ok(()),
                Ok(n) => drop(data.drain(..n)),
                Err(_) => return Err(InputError::Closed),
            }
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.input.try_send(data).map_err(|e| {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            match e {
                mpsc::error::TrySendError::Full(_) => InputError::Full,
                mpsc::error::TrySendError::Closed(_) => InputError::Closed,
            }
        })
    }

    pub fn resize(&self, cols: u16, rows: u16) -> anyhow::Result<()> {
        self.master.resize(size(cols, rows))
    }

    /// Whether a process of the terminal's foreground job is blocked in read(2) on this
    /// terminal, i.e. waiting for someone to type. While a command runs that includes the
    /// shell itself (its `read` builtin); callers do not ask while the shell is at a prompt.
    pub fn foreground_reads_terminal(&self) -> bool {
        let (Some(pgid), Some(tty)) = (self.master.process_group_leader(), self.master.tty_name())
        else {
            return false;
        };
        if pgid <= 0 {
            return false;
        }
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return false;
        };
        procs
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| process_group(*p) == Some(pgid))
            .any(|p| {
                reading_fd(p).is_some_and(|fd| {
                    std::fs::read_link(format!("/proc/{p}/fd/{fd}")).is_ok_and(|l| l == tty)
                })
            })
    }

    /// The session's own program (see `ProgramPid`).
    pub fn program(&self) -> Arc<ProgramPid> {
        self.program.clone()
    }

    /// Kills the terminal's foreground process group, unless that is the session's
    /// program itself (the shell).
    pub fn kill_foreground_job(&self) {
        if let (Some(pgid), Some(pid)) = (self.master.process_group_leader(), self.program.get())
            && pgid != pid as i32
        {
            let _ = sys::signal_group(pgid, Signal::KILL);
        }
    }

    /// The command line of the terminal's foreground job, when that is not the session's
    /// own program (a shell at its prompt runs nothing).
    pub fn foreground_command(&self) -> Option<String> {
        let pgid = self.master.process_group_leader().filter(|p| *p > 0)?;
        if self.program.get() == Some(pgid as u32) {
            return None;
        }
        let argv = std::fs::read(format!("/proc/{pgid}/cmdline")).ok()?;
        let words: Vec<String> = (argv.split(|b| *b == 0))
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        (!words.is_empty()).then(|| words.join(" "))
    }

    /// Sends `signal` to the process group the session leader heads.
    /// Stops (`true`) or continues every process of the session, its program's children
    /// and theirs: the parent first on the way down, last on the way up, so that no shell
    /// sees its job stopped.
    pub fn stop_tree(&self, stop: bool) {
        let Some(root) = self.pid else {
            return;
        };
        let mut tree = sys::descendants(root);
        tree.insert(0, root);
        let signal = match stop {
            true => Signal::STOP,
            false => {
                tree.reverse();
                Signal::CONT
            }
        };
        for pid in tree {
            let _ = sys::signal_process(pid, signal);
        }
    }

    pub fn signal_group(&self, signal: Signal) {
        if let Some(pid) = self.pid {
            // The child called setsid(), so its pid is its process group id.
            let _ = sys::signal_group(pid as i32, signal);
        }
    }
}

/// Writes all of `data`, waiting on `ready` (the same terminal) whenever it is full.
fn write_all(writer: &mut impl Write, ready: impl AsFd, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match writer.write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => sys::wait_for(&ready, Ready::Write)?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    writer.flush()
}

/// The process group of a process (field 5 of /proc/PID/stat).
fn process_group(pid: u32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(2)?.parse().ok()
}

/// The fd a process is blocked reading, from /proc/PID/syscall ("NR arg0 …").
fn reading_fd(pid: u32) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    const READ: &str = "0";
    #[cfg(target_arch = "aarch64")]
    const READ: &str = "63";
    let line = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != READ {
        return None;
    }
    u64::from_str_radix(fields.next()?.trim_start_matches("0x"), 16).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn input_the_terminal_cannot_take_yet_arrives_later_in_order() {
        // Raw mode, and nobody reads for a while: the terminal's input buffers fill up.
        let argv = ["sh", "-c", "stty raw -echo; sleep 1; exec cat"];
        let spec = SessionSpec::plain(argv.map(String::from).to_vec(), 80, 24);
        let (pty, mut events) = spawn(&spec).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sent: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("{i:05}\n").into_bytes())
            .collect();
        for chunk in sent.chunks(4096) {
            pty.write(chunk.to_vec()).unwrap();
        }
        assert!(
            pty.queued.load(Ordering::Acquire) > 0,
            "{} bytes should not fit the terminal at once",
            sent.len()
        );
        let mut got = Vec::new();
        while got.len() < sent.len() {
            let chunk = tokio::time::timeout(Duration::from_secs(10), events.output.read())
                .await
                .expect("output stalled")
                .expect("output ended");
            got.extend_from_slice(&chunk);
        }
        assert!(got == sent, "the input came back changed or reordered");
    }
}
