//! A session's egress allowlist: `host:port`, `*.domain:port`, `IP:port` or `CIDR:port`,
//! the port a number or `*`.
//!
//! An address is allowed when an address rule (IP or CIDR) with its port holds it, or when
//! the name it was reached by matches a name rule with its port and the address is a
//! public one. So a DNS answer cannot turn an allowed name into a private or loopback
//! address that no address rule names.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// One name, lowercase.
    Name(String),
    /// Every name under a domain: `*.example.com` holds `.example.com`.
    Under(String),
    Net(IpNet),
}

/// One rule of an allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: Host,
    /// `None`: any port.
    port: Option<u16>,
}

impl FromStr for Rule {
    type Err = String;

    fn from_str(text: &str) -> Result<Rule, String> {
        let bad = |why: &str| {
            format!(
                "{text:?} is no egress rule ({why}; give host:port, *.domain:port, IP:port or CIDR:port, with a port number or *)"
            )
        };
        let (host, port) = text.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let port = match port {
            "*" => None,
            p => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| bad("the port is no number from 1 to 65535"))?,
            ),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = if let Ok(net) = host.parse::<IpNet>() {
            Host::Net(net.trunc())
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            Host::Net(IpNet::from(ip))
        } else if let Some(domain) = host.strip_prefix("*.") {
            Host::Under(format!(
                ".{}",
                name(domain).ok_or_else(|| bad("not a domain"))?
            ))
        } else {
            Host::Name(name(host).ok_or_else(|| bad("not a host name"))?)
        };
        Ok(Rule { host, port })
    }
}

/// A DNS name, lowercase, or `None` when `text` is none.
fn name(text: &str) -> Option<String> {
    let ok = !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    ok.then(|| text.to_ascii_lowercase())
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(n) => write!(f, "{n}")?,
            Host::Under(d) => write!(f, "*{d}")?,
            Host::Net(IpNet::V6(n)) if n.prefix_len() == 128 => write!(f, "[{}]", n.addr())?,
            Host::Net(n) if n.prefix_len() == n.max_prefix_len() => write!(f, "{}", n.addr())?,
            Host::Net(n) => write!(f, "{n}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => write!(f, ":*"),
        }
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rule, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Rule {
    fn port_holds(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }

    /// Whether every target this rule allows, `wider` allows too.
    fn within(&self, wider: &Rule) -> bool {
        let port = wider.port.is_none() || wider.port == self.port;
        let host = match (&self.host, &wider.host) {
            (Host::Name(n), Host::Name(w)) => n == w,
            (Host::Name(n), Host::Under(d)) => n.ends_with(d.as_str()),
            (Host::Under(d), Host::Under(w)) => d.ends_with(w.as_str()),
            (Host::Net(n), Host::Net(w)) => w.contains(n),
            _ => false,
        };
        port && host
    }
}

/// A session's allowlist, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rules(pub Vec<Rule>);

impl Rules {
    /// Whether a connection to `addr`, reached by the name or address `host`, is allowed.
    pub fn allows(&self, host: &str, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        let by_address = self.0.iter().any(|r| {
            r.port_holds(addr.port()) && matches!(&r.host, Host::Net(n) if n.contains(&ip))
        });
        let host = host.to_ascii_lowercase();
        let by_name = || {
            public(ip)
                && self.0.iter().any(|r| {
                    r.port_holds(addr.port())
                        && match &r.host {
                            Host::Name(n) => *n == host,
                            Host::Under(d) => host.ends_with(d.as_str()),
                            Host::Net(_) => false,
                        }
                })
        };
        by_address || by_name()
    }

    /// Each rule as it is written.
    pub fn texts(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }

    /// Whether `self` allows nothing that `wider` does not (each rule lies within one of
    /// `wider`'s): what a caller who may only narrow may set.
    pub fn within(&self, wider: &Rules) -> bool {
        self.0.iter().all(|r| wider.0.iter().any(|w| r.within(w)))
    }
}

impl fmt::Display for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "nothing");
        }
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Whether `ip` is an address of the public internet (not loopback, private, link-local,
/// shared, unique-local, multicast, documentation or unspecified).
fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str]) -> Rules {
        Rules(list.iter().map(|r| r.parse().unwrap()).collect())
    }

    fn at(addr: &str) -> SocketAddr {
        addr.parse().unwrap()
    }

    #[test]
    fn rules_read_back_as_written() {
        for text in [
            "example.com:443",
            "*.pypi.org:*",
            "127.0.0.1:8000",
            "10.0.0.0/8:5432",
            "[::1]:80",
            "2001:4860::/32:443",
        ] {
            assert_eq!(text.parse::<Rule>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn bad_rules_say_what_to_give() {
        for bad in [
            "example.com",
            "example.com:0",
            "exa mple.com:80",
            ":80",
            "*.:80",
            "1.2.3.4/40:80",
        ] {
            let e = bad.parse::<Rule>().unwrap_err();
            assert!(e.contains("host:port"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_address_rule_holds_its_addresses_and_port_only() {
        let r = rules(&["127.0.0.1:8000", "10.1.0.0/16:*"]);
        assert!(r.allows("127.0.0.1", at("127.0.0.1:8000")));
        assert!(r.allows("localhost", at("127.0.0.1:8000")));
        assert!(!r.allows("127.0.0.1", at("127.0.0.1:8001")));
        assert!(r.allows("db", at("10.1.200.3:5432")));
        assert!(!r.allows("db", at("10.2.0.1:5432")));
    }

    #[test]
    fn a_name_rule_never_reaches_a_private_address() {
        let r = rules(&["localhost:8000", "*.example.com:443"]);
        assert!(!r.allows("localhost", at("127.0.0.1:8000")));
        assert!(r.allows("api.example.com", at("93.184.215.14:443")));
        assert!(r.allows("API.Example.COM", at("93.184.215.14:443")));
        assert!(!r.allows("api.example.com", at("10.0.0.5:443")));
        assert!(!r.allows("api.example.com", at("[::ffff:127.0.0.1]:443")));
        assert!(
            !r.allows("example.com", at("93.184.215.14:443")),
            "the domain itself is not under it"
        );
        assert!(!r.allows("evil-example.com", at("93.184.215.14:443")));
    }

    #[test]
    fn narrowing_keeps_within_the_rules_it_had() {
        let wide = rules(&["*.example.com:*", "10.0.0.0/8:*"]);
        assert!(rules(&["api.example.com:443", "10.1.0.0/16:5432"]).within(&wide));
        assert!(Rules::default().within(&wide));
        assert!(!rules(&["example.org:443"]).within(&wide));
        assert!(!rules(&["11.0.0.1:80"]).within(&wide));
        assert!(!wide.within(&rules(&["*.example.com:443"])));
    }
}
