//! A process on a real PTY. Three plain threads keep every blocking call away from the
//! session's task: one reads output, one writes input, one waits for the exit status.

use std::io::{Read, Write};

use bytes::Bytes;
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use tokio::sync::{mpsc, oneshot};

use super::SessionSpec;

/// Output is read in chunks of at most this many bytes.
const READ_CHUNK: usize = 64 * 1024;
/// Chunks of input queued for the PTY before a write is refused.
const INPUT_QUEUE: usize = 256;

pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    input: mpsc::Sender<Vec<u8>>,
    pid: Option<u32>,
}

/// What the process produces: output chunks (closed at PTY EOF) and its exit.
pub struct PtyEvents {
    pub output: mpsc::Receiver<Bytes>,
    pub exit: oneshot::Receiver<Exit>,
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
    let mut reader = pair.master.try_clone_reader()?;
    let mut writer = pair.master.take_writer()?;

    let (out_tx, output) = mpsc::channel::<Bytes>(64);
    std::thread::Builder::new()
        .name("pty-read".into())
        .spawn(move || {
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if out_tx
                            .blocking_send(Bytes::copy_from_slice(&buf[..n]))
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
        })?;

    let (input, mut in_rx) = mpsc::channel::<Vec<u8>>(INPUT_QUEUE);
    std::thread::Builder::new()
        .name("pty-write".into())
        .spawn(move || {
            while let Some(data) = in_rx.blocking_recv() {
                if writer
                    .write_all(&data)
                    .and_then(|()| writer.flush())
                    .is_err()
                {
                    break;
                }
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
            input,
            pid,
        },
        PtyEvents { output, exit },
    ))
}

impl Pty {
    /// Queues input for the process without waiting.
    pub fn write(&self, data: Vec<u8>) -> Result<(), InputError> {
        self.input.try_send(data).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => InputError::Full,
            mpsc::error::TrySendError::Closed(_) => InputError::Closed,
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

    /// Kills the terminal's foreground process group, unless that is the session leader
    /// itself (the shell).
    pub fn kill_foreground_job(&self) {
        if let (Some(pgid), Some(pid)) = (self.master.process_group_leader(), self.pid)
            && pgid > 0
            && pgid != pid as i32
        {
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }

    /// Sends `signal` to the process group the session leader heads.
    pub fn signal_group(&self, signal: i32) {
        if let Some(pid) = self.pid {
            // The child called setsid(), so its pid is its process group id.
            unsafe {
                libc::kill(-(pid as i32), signal);
            }
        }
    }
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
