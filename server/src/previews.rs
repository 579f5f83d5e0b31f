//! Where port previews live: each (session, port) on an origin of its own,
//! `{scheme}://{port}-{session_id}.{domain}[:{port}]/`, so that a page a session serves can
//! read neither the operator UI's storage nor another preview's cookies.
//!
//! The domain is `serve --preview-domain`, whose names (a wildcard DNS record) reach this
//! server on the public URL's port. Without one, a server whose public URL is on loopback
//! uses `localhost`, whose subdomains browsers resolve to loopback themselves (RFC 6761).
//!
//! [`Client`] carries a preview's requests into the session's namespace.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::sandbox::net::NetAgent;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewHosts {
    scheme: String,
    domain: String,
    /// `:PORT` when the public URL names one, else empty.
    port: String,
}

impl PreviewHosts {
    /// The preview origins of a server reached at `public_url`, under `domain` if given.
    /// None when there is no domain to use: previews are then served under the API's own
    /// paths only, sandboxed by CSP to an opaque origin.
    pub fn new(public_url: &str, domain: Option<&str>) -> Option<PreviewHosts> {
        let url = url::Url::parse(public_url).ok()?;
        let loopback = match url.host()? {
            url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
        };
        let domain = match domain {
            Some(d) => d.trim_matches('.').to_ascii_lowercase(),
            None if loopback => "localhost".to_owned(),
            None => return None,
        };
        Some(PreviewHosts {
            scheme: url.scheme().to_owned(),
            domain,
            port: url.port().map(|p| format!(":{p}")).unwrap_or_default(),
        })
    }

    /// The origin, with a trailing slash, of `port` inside session `sid`.
    pub fn url(&self, sid: &str, port: u16) -> String {
        format!(
            "{}://{port}-{sid}.{}{}/",
            self.scheme, self.domain, self.port
        )
    }

    /// The session and port a request's `Host` names, if it is a preview origin.
    pub fn target(&self, host: &str) -> Option<(String, u16)> {
        let name = match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        };
        let label = name
            .to_ascii_lowercase()
            .strip_suffix(&self.domain)?
            .strip_suffix('.')?
            .to_owned();
        let (port, sid) = label.split_once('-')?;
        if sid.is_empty() || label.contains('.') {
            return None;
        }
        Some((sid.to_owned(), port.parse().ok()?))
    }
}

/// HTTP connections into one session's network namespace, kept alive between a preview's
/// requests (a dev server that keeps them open answers without a new connection).
#[derive(Debug, Clone)]
pub struct Client(legacy::Client<Inside, Body>);

impl Client {
    pub fn new(agent: NetAgent) -> Client {
        let client = legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .build(Inside(agent));
        Client(client)
    }

    /// Sends `req`, whose URI is `http://127.0.0.1:{port}/…`, to that port inside.
    pub async fn send(&self, req: Request<Body>) -> Result<Response<Incoming>, legacy::Error> {
        self.0.request(req).await
    }
}

/// How long an idle connection to a server inside stays open.
const IDLE: Duration = Duration::from_secs(30);

/// Connects to a port inside the namespace with a socket the net agent made there.
#[derive(Debug, Clone)]
pub struct Inside(NetAgent);

impl tower::Service<Uri> for Inside {
    type Response = TokioIo<tokio::net::TcpStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let agent = self.0.clone();
        Box::pin(async move {
            let port = uri.port_u16().unwrap_or(80);
            let stream = (agent.socket().await?)
                .connect(([127, 0, 0, 1], port).into())
                .await?;
            stream.set_nodelay(true)?;
            Ok(TokioIo::new(stream))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_server_previews_under_localhost_on_its_own_port() {
        let hosts = PreviewHosts::new("http://127.0.0.1:3000", None).unwrap();
        assert_eq!(
            hosts.url("abc-1", 8000),
            "http://8000-abc-1.localhost:3000/"
        );
        assert_eq!(
            hosts.target("8000-abc-1.localhost:3000"),
            Some(("abc-1".to_owned(), 8000))
        );
        assert_eq!(
            hosts.target("8000-ABC-1.LOCALHOST"),
            Some(("abc-1".to_owned(), 8000))
        );
    }

    #[test]
    fn a_public_server_previews_only_under_a_configured_domain() {
        assert_eq!(PreviewHosts::new("https://pty.example.com", None), None);
        let hosts =
            PreviewHosts::new("https://pty.example.com", Some("preview.example.com.")).unwrap();
        assert_eq!(hosts.url("s", 80), "https://80-s.preview.example.com/");
        assert_eq!(
            hosts.target("80-s.preview.example.com"),
            Some(("s".to_owned(), 80))
        );
    }

    #[test]
    fn other_hosts_are_no_preview() {
        let hosts = PreviewHosts::new("http://localhost:3000", None).unwrap();
        for host in [
            "localhost:3000",
            "127.0.0.1:3000",
            "8000-s.evil.localhost",
            "x-s.localhost",
            "8000-.localhost",
            "70000-s.localhost",
            "8000-s.notlocalhost",
            "8000-s.localhost.example.com",
        ] {
            assert_eq!(hosts.target(host), None, "{host}");
        }
    }
}
