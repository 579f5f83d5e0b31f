//! A sandboxed session's only way out: an HTTP proxy (CONNECT, and plain HTTP with an
//! absolute URI) that ptyhost serves on a listener bound inside the session's network
//! namespace. ptyhost resolves each name itself and connects from its own namespace only
//! to an address the session's allowlist (`rules`) allows; everything else is answered 403
//! and audited. The allowlist can change while the session runs: new connections follow
//! it at once, and open ones whose target it no longer allows are cut.

mod rules;

pub use rules::{Rule, Rules};

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::audit::{self, Audit, Detail, Event};

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A running proxy. Dropping it stops the proxy and cuts every connection through it.
pub struct Egress {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

struct Shared {
    session_id: String,
    rules: watch::Sender<Arc<Rules>>,
    open: Mutex<Vec<Open>>,
    next: AtomicU64,
    audit: Audit,
}

/// A connection through the proxy, while it lasts.
struct Open {
    id: u64,
    host: String,
    addr: SocketAddr,
    cut: CancellationToken,
}

impl Egress {
    /// Serves `listener` for session `session_id` under `rules`.
    pub fn start(listener: TcpListener, session_id: &str, rules: Rules, audit: Audit) -> Egress {
        let shared = Arc::new(Shared {
            session_id: session_id.to_owned(),
            rules: watch::Sender::new(Arc::new(rules)),
            open: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            audit,
        });
        let stop = CancellationToken::new();
        let (me, done) = (shared.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let client = tokio::select! {
                    _ = done.cancelled() => break,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => client,
                        Err(_) => continue,
                    },
                };
                let me = me.clone();
                let cut = done.child_token();
                tokio::spawn(async move { me.serve(client, cut).await });
            }
        });
        Egress { shared, stop }
    }

    pub fn rules(&self) -> Arc<Rules> {
        self.shared.rules.borrow().clone()
    }

    /// Replaces the allowlist: the next connection follows it, and open connections to a
    /// target it no longer allows are cut.
    pub fn set(&self, rules: Rules) {
        let mut open = self.shared.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|o| {
            let allowed = rules.allows(&o.host, o.addr);
            if !allowed {
                o.cut.cancel();
            }
            allowed
        });
        self.shared.rules.send_replace(Arc::new(rules));
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Where a client asked to go, and what to send there first.
struct Target {
    host: String,
    port: u16,
    /// `None` for CONNECT (answered 200, then a tunnel); the rewritten request otherwise.
    forward: Option<Vec<u8>>,
}

impl Shared {
    async fn serve(self: Arc<Self>, mut client: TcpStream, cut: CancellationToken) {
        let _ = client.set_nodelay(true);
        let (target, rest, upstream, addr) = match self.open_upstream(&mut client).await {
            Ok(opened) => opened,
            Err((status, why)) => {
                let _ = answer(&mut client, status, &why).await;
                return;
            }
        };
        let label = format!("{}:{}", target.host, target.port);
        let _ = upstream.set_nodelay(true);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Open {
                id,
                host: target.host.clone(),
                addr,
                cut: cut.clone(),
            });
        // A change between `open_upstream`'s check and this registration found no
        // connection to cut: check the rules it left.
        if !self.rules.borrow().allows(&target.host, addr) {
            cut.cancel();
        }
        let (sent, received, was_cut) = tunnel(client, upstream, target.forward, rest, &cut).await;
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|o| o.id != id);
        self.record(
            Event::Egress,
            Detail::Egress {
                target: label,
                address: addr.to_string(),
                sent,
                received,
                cut: was_cut,
            },
        );
    }

    /// Reads the client's request and connects where it asks, if the rules allow it:
    /// the target, what the client sent after its head, the connection and its address;
    /// else the status and body to answer with.
    async fn open_upstream(
        &self,
        client: &mut TcpStream,
    ) -> Result<(Target, Vec<u8>, TcpStream, SocketAddr), (&'static str, String)> {
        let (target, rest) = read_request(client)
            .await
            .map_err(|why| ("400 Bad Request", why))?;
        let label = format!("{}:{}", target.host, target.port);
        let rules = self.rules.borrow().clone();
        let addrs: Vec<SocketAddr> = match target.host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, target.port)],
            Err(_) => tokio::net::lookup_host((target.host.as_str(), target.port))
                .await
                .map_err(|e| {
                    let why = format!("ptyhost: {label} does not resolve: {e}\n");
                    ("502 Bad Gateway", why)
                })?
                .collect(),
        };
        let Some(addr) = addrs
            .iter()
            .copied()
            .find(|a| rules.allows(&target.host, *a))
        else {
            self.record(
                Event::EgressDenied,
                Detail::EgressDenied {
                    target: label.clone(),
                    rules: rules.texts(),
                },
            );
            let why =
                format!("ptyhost: {label} is not in this session's egress allowlist ({rules})\n");
            return Err(("403 Forbidden", why));
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(upstream)) => Ok((target, rest, upstream, addr)),
            Ok(Err(e)) => Err((
                "502 Bad Gateway",
                format!("ptyhost: {label} ({addr}) refused: {e}\n"),
            )),
            Err(_) => Err((
                "504 Gateway Timeout",
                format!("ptyhost: {label} ({addr}) did not answer\n"),
            )),
        }
    }

    fn record(&self, event: Event, detail: Detail) {
        self.audit
            .record(audit::Record::new(event, &self.session_id).detail(detail));
    }
}

/// Reads a request head; the target and whatever the client sent after the head.
async fn read_request(client: &mut TcpStream) -> Result<(Target, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() >= MAX_HEAD {
            return Err("ptyhost: the request head is over 16 KiB\n".into());
        }
        let mut chunk = [0u8; 2048];
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| format!("ptyhost: reading the request: {e}\n"))?;
        if n == 0 {
            return Err("ptyhost: the client closed before its request ended\n".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(&buf[..end])
        .map_err(|e| format!("ptyhost: no HTTP request ({e})\n"))?;
    let (method, path) = (req.method.unwrap_or(""), req.path.unwrap_or(""));
    let target = if method == "CONNECT" {
        let (host, port) = split_authority(path, None)?;
        Target {
            host,
            port,
            forward: None,
        }
    } else {
        let rest = path.strip_prefix("http://").ok_or_else(|| {
            format!("ptyhost: this proxy forwards http:// URLs and CONNECT tunnels, not {path:?}\n")
        })?;
        let (authority, origin) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        let (host, port) = split_authority(authority, Some(80))?;
        let mut head = format!("{method} {origin} HTTP/1.1\r\n").into_bytes();
        for h in req.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            if !matches!(
                name.as_str(),
                "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive"
            ) {
                head.extend_from_slice(h.name.as_bytes());
                head.extend_from_slice(b": ");
                head.extend_from_slice(h.value);
                head.extend_from_slice(b"\r\n");
            }
        }
        head.extend_from_slice(b"Connection: close\r\n\r\n");
        Target {
            host,
            port,
            forward: Some(head),
        }
    };
    Ok((target, buf[end..].to_vec()))
}

/// `host:port` (an IPv6 host in brackets); `default` when the port is left out.
fn split_authority(authority: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let bad = || format!("ptyhost: {authority:?} is no host:port\n");
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && p.bytes().all(|b| b.is_ascii_digit()) => {
            (h, p.parse::<u16>().map_err(|_| bad())?)
        }
        _ => (authority, default.ok_or_else(bad)?),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

async fn answer(client: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

/// Relays both ways until both sides are done or `cut` fires; bytes sent upstream, bytes
/// received from it, and whether it was cut.
async fn tunnel(
    mut client: TcpStream,
    mut upstream: TcpStream,
    forward: Option<Vec<u8>>,
    early: Vec<u8>,
    cut: &CancellationToken,
) -> (u64, u64, bool) {
    let opened = async {
        match &forward {
            Some(head) => upstream.write_all(head).await?,
            None => {
                client
                    .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    .await?
            }
        }
        upstream.write_all(&early).await
    };
    if opened.await.is_err() {
        return (0, 0, false);
    }
    // The sockets, again, so that a cut can end the relay and still read its counts.
    let (Ok(client_fd), Ok(upstream_fd)) = (
        client.as_fd().try_clone_to_owned(),
        upstream.as_fd().try_clone_to_owned(),
    ) else {
        return (early.len() as u64, 0, false);
    };
    let relay = tokio_splice2::copy_bidirectional(&mut client, &mut upstream);
    let mut relay = std::pin::pin!(relay);
    let (relayed, was_cut) = tokio::select! {
        done = &mut relay => (done, false),
        _ = cut.cancelled() => {
            for fd in [&client_fd, &upstream_fd] {
                let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::Both);
            }
            (relay.await, true)
        }
    };
    match relayed {
        // splice(2) moves the bytes between the sockets through a pipe, in the kernel.
        Ok(t) => (early.len() as u64 + t.tx as u64, t.rx as u64, was_cut),
        Err(_) => (early.len() as u64, 0, was_cut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(
            split_authority("Example.com:443", None).unwrap(),
            ("example.com".into(), 443)
        );
        assert_eq!(
            split_authority("[::1]:8080", None).unwrap(),
            ("::1".into(), 8080)
        );
        assert_eq!(
            split_authority("example.com", Some(80)).unwrap(),
            ("example.com".into(), 80)
        );
        assert!(split_authority("example.com", None).is_err());
        assert!(split_authority(":80", None).is_err());
    }
}
