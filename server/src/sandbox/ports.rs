//! The TCP ports something listens on inside a session's network namespace, asked of the
//! kernel over a `NETLINK_SOCK_DIAG` socket made in that namespace (the net agent makes it).
//!
//! A dump of LISTEN sockets walks only the namespace's listening hash, so it costs
//! microseconds; `/proc/PID/net/tcp` walks the whole established hash as well and formats
//! every row as text, milliseconds per session even when the table is empty.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::{
    AF_INET, AF_INET6, IPPROTO_TCP, SockDiagMessage,
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags},
};
use rustix::net::netlink::{SOCK_DIAG, SocketAddrNetlink};

/// A socket for [`listening`], in the caller's network namespace.
pub fn diag_socket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        rustix::net::AddressFamily::NETLINK,
        rustix::net::SocketType::RAW,
        rustix::net::SocketFlags::CLOEXEC,
        Some(SOCK_DIAG),
    )?)
}

/// The ports of TCP sockets in state LISTEN, IPv4 and IPv6, sorted and without repeats, in
/// the namespace `diag` was made in. One dump at a time per socket.
pub fn listening(diag: &impl AsFd) -> io::Result<Vec<u16>> {
    let mut ports = Vec::new();
    for (seq, family) in [(1, AF_INET), (2, AF_INET6)] {
        dump(diag.as_fd(), seq, family, &mut ports)?;
    }
    ports.sort_unstable();
    ports.dedup();
    Ok(ports)
}

fn dump(
    diag: std::os::fd::BorrowedFd<'_>,
    seq: u32,
    family: u8,
    ports: &mut Vec<u16>,
) -> io::Result<()> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = seq;
    let socket_id = match family {
        AF_INET => SocketId::new_v4(),
        _ => SocketId::new_v6(),
    };
    let mut request = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::LISTEN,
            socket_id,
        })
        .into(),
    );
    request.finalize();
    let mut bytes = vec![0; request.buffer_len()];
    request.serialize(&mut bytes);
    rustix::net::sendto(
        diag,
        &bytes,
        rustix::net::SendFlags::empty(),
        &SocketAddrNetlink::new(0, 0),
    )?;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let (len, _) = rustix::net::recv(diag, &mut buf[..], rustix::net::RecvFlags::empty())?;
        if parse(&buf[..len], seq, ports)? {
            return Ok(());
        }
    }
}

/// Takes the ports out of one datagram of a dump; true once the dump is done.
fn parse(mut datagram: &[u8], seq: u32, ports: &mut Vec<u16>) -> io::Result<bool> {
    while !datagram.is_empty() {
        let message = NetlinkMessage::<SockDiagMessage>::deserialize(datagram)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let len = (message.header.length as usize).clamp(1, datagram.len());
        datagram = &datagram[len.next_multiple_of(4).min(datagram.len())..];
        if message.header.sequence_number != seq {
            continue;
        }
        match message.payload {
            NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(response)) => {
                ports.push(response.header.socket_id.source_port);
            }
            NetlinkPayload::Done(_) => return Ok(true),
            NetlinkPayload::Error(e) => return Err(e.to_io()),
            _ => {}
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_is_found_and_a_connected_one_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let client_port = client.local_addr().unwrap().port();
        let ports = listening(&diag_socket().unwrap()).unwrap();
        assert!(ports.contains(&port), "{ports:?} lacks {port}");
        assert!(!ports.contains(&client_port), "{ports:?} has {client_port}");
    }
}
