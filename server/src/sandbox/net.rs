//! A sandboxed session's network namespace, reached from outside it.
//!
//! ptyhost is multithreaded, so it cannot enter a namespace its helper made (`setns` into a
//! user namespace wants a single thread). The helper, after making the user and network
//! namespaces and before anything else, forks the **net agent**: a single-threaded process
//! inside the session's network namespace but in the host's mount and PID namespaces,
//! where the session cannot see or signal it. The agent
//!
//! - binds the egress proxy's listener on `127.0.0.1:PROXY_PORT` inside the namespace
//!   before the program starts, so the program's first connection queues there;
//! - answers on a Unix socket in the data directory (outside every workspace) with
//!   descriptors passed over `SCM_RIGHTS`: that listener, or a fresh TCP socket made in the
//!   namespace, which ptyhost then connects to a port inside (port previews).
//!
//! A socket keeps the network namespace it was made in, so ptyhost's own tasks use these
//! descriptors like any other. The agent dies with the helper (`PR_SET_PDEATHSIG`).

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// The egress proxy's port on the session's loopback.
pub const PROXY_PORT: u16 = 3128;

/// What ptyhost asks the agent for, one byte each.
const LISTENER: u8 = b'L';
const SOCKET_V4: u8 = b'4';
const DIAG: u8 = b'D';

/// The agent: serves descriptors until the helper (and with it the session) ends. Writes
/// one byte to `ready` once the proxy listener is bound.
pub fn agent_main(socket: &Path, ready: std::io::PipeWriter) -> ! {
    match agent(socket, ready) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("ptyhost sandbox: the net agent failed: {e}");
            std::process::exit(1)
        }
    }
}

enum Never {}

fn agent(socket: &Path, mut ready: std::io::PipeWriter) -> io::Result<Never> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    crate::sys::loopback_up()?;
    let proxy = std::net::TcpListener::bind(("127.0.0.1", PROXY_PORT))?;
    let _ = std::fs::remove_file(socket);
    let requests = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    ready.write_all(&[1])?;
    drop(ready);
    loop {
        let (mut conn, _) = requests.accept()?;
        let mut op = [0u8];
        while conn.read_exact(&mut op).is_ok() {
            let fd: OwnedFd = match op[0] {
                LISTENER => proxy.try_clone()?.into(),
                SOCKET_V4 => {
                    socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?.into()
                }
                DIAG => super::ports::diag_socket()?,
                _ => break,
            };
            if send_fd(&conn, &fd).is_err() {
                break;
            }
        }
    }
}

fn send_fd(conn: &UnixStream, fd: &OwnedFd) -> io::Result<()> {
    let fds = [fd.as_fd()];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        conn,
        &[io::IoSlice::new(&[1])],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// How many sockets ptyhost takes from the agent at a time: a socket keeps the namespace
/// it was made in, so spare ones wait here and a preview's connection skips the agent.
const SPARE_SOCKETS: usize = 16;

/// ptyhost's side: asks a session's agent for descriptors.
#[derive(Debug, Clone)]
pub struct NetAgent {
    socket: PathBuf,
    spare: Arc<Mutex<Vec<OwnedFd>>>,
    /// The namespace's `NETLINK_SOCK_DIAG` socket, once asked for; its lock keeps one
    /// dump at a time.
    diag: Arc<Mutex<Option<OwnedFd>>>,
}

impl NetAgent {
    /// The agent of the session whose helper was launched with `socket`.
    pub fn at(socket: PathBuf) -> NetAgent {
        NetAgent {
            socket,
            spare: Arc::default(),
            diag: Arc::default(),
        }
    }

    /// Where the agent answers.
    pub fn path(&self) -> &Path {
        &self.socket
    }

    /// The egress proxy's listener, bound inside the session's namespace. The agent may
    /// still be starting: this waits up to `wait` for it.
    pub async fn proxy_listener(&self, wait: std::time::Duration) -> io::Result<OwnedFd> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match self.ask(LISTENER, 1).await.map(|mut fds| fds.pop()) {
                Ok(Some(fd)) => return Ok(fd),
                Ok(None) => return Err(no_descriptor()),
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    }

    /// A TCP socket made inside the session's namespace, not yet connected.
    pub async fn socket(&self) -> io::Result<tokio::net::TcpSocket> {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let fd = match spare {
            Some(fd) => fd,
            None => {
                let mut made = self.ask(SOCKET_V4, SPARE_SOCKETS).await?;
                let fd = made.pop().ok_or_else(no_descriptor)?;
                (self.spare.lock().unwrap_or_else(|e| e.into_inner())).extend(made);
                fd
            }
        };
        let std = std::net::TcpStream::from(fd);
        std.set_nonblocking(true)?;
        Ok(tokio::net::TcpSocket::from_std_stream(std))
    }

    /// Takes the namespace's `NETLINK_SOCK_DIAG` socket from the agent now, while it runs:
    /// a paused session's agent is frozen with it and answers nothing, but a socket already
    /// taken still lists its ports.
    pub async fn prepare_ports(&self) -> io::Result<()> {
        self.with_diag(|_| Ok(())).await
    }

    /// The TCP ports something listens on inside the session's namespace, without the
    /// egress proxy's.
    pub async fn listening_ports(&self) -> io::Result<Vec<u16>> {
        let mut ports = self.with_diag(super::ports::listening).await?;
        ports.retain(|&p| p != PROXY_PORT);
        Ok(ports)
    }

    /// `f` of the diag socket, taken from the agent the first time; a socket that failed
    /// is let go, and the next call takes a fresh one.
    async fn with_diag<T: Send + 'static>(
        &self,
        f: impl FnOnce(&OwnedFd) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let (socket, diag) = (self.socket.clone(), self.diag.clone());
        tokio::task::spawn_blocking(move || {
            let mut diag = diag.lock().unwrap_or_else(|e| e.into_inner());
            let fd = match diag.take() {
                Some(fd) => fd,
                None => ask(&socket, DIAG, 1)?.pop().ok_or_else(no_descriptor)?,
            };
            let out = f(&fd)?;
            *diag = Some(fd);
            Ok(out)
        })
        .await
        .map_err(io::Error::other)?
    }

    /// `count` descriptors of what `op` names, over one connection.
    async fn ask(&self, op: u8, count: usize) -> io::Result<Vec<OwnedFd>> {
        let socket = self.socket.clone();
        tokio::task::spawn_blocking(move || ask(&socket, op, count))
            .await
            .map_err(io::Error::other)?
    }
}

/// How long the agent may take to answer: a paused session's agent is frozen, and a
/// request to it fails after this instead of waiting for the resume.
const AGENT_REPLY: std::time::Duration = std::time::Duration::from_secs(2);

fn ask(socket: &Path, op: u8, count: usize) -> io::Result<Vec<OwnedFd>> {
    let mut conn = UnixStream::connect(socket)?;
    conn.set_read_timeout(Some(AGENT_REPLY))?;
    conn.set_write_timeout(Some(AGENT_REPLY))?;
    conn.write_all(&vec![op; count])?;
    (0..count).map(|_| receive_fd(&conn)).collect()
}

fn receive_fd(conn: &UnixStream) -> io::Result<OwnedFd> {
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8];
    rustix::net::recvmsg(
        conn,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(no_descriptor())
}

fn no_descriptor() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the session's net agent sent no descriptor",
    )
}
