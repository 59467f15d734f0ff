//! Who is really asking: the client IP and the steering header of a signaling request, believed
//! only from trusted proxies.
//!
//! Behind a load balancer every request arrives from the balancer's address, so per-IP limits
//! would lump every caller together and ingress rules by client IP would see only the balancer.
//! A proxy listed in `--trusted-proxies` tells the truth in two headers:
//!
//! - `X-Forwarded-For`: the client IP is the **rightmost address that is not itself a trusted
//!   proxy** (each proxy appends the address it saw, so everything left of the first untrusted
//!   hop could have been written by the client). All hops trusted → the leftmost. A list that
//!   does not parse (or is absurdly long) is not guessed at: the peer address is used and the
//!   request counted.
//! - the ingress header (`--ingress-header`, e.g. `CF-IPCountry`), passed on to the ingress
//!   selector.
//!
//! From any other peer both headers are ignored (and counted): a client cannot pick its own
//! ingress or dodge its per-IP limits by writing them itself. Sans-IO: headers and the peer in,
//! a [`ClientOrigin`] out.

use std::net::{IpAddr, SocketAddr};

use axum::http::{HeaderMap, HeaderName};
use ipnet::IpNet;

pub const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// Most `X-Forwarded-For` hops read; a longer chain is treated as malformed.
pub const MAX_FORWARDED_HOPS: usize = 32;

/// The trust policy: which peers are proxies, and which steering header they set.
#[derive(Debug, Clone, Default)]
pub struct ProxyTrust {
    proxies: Vec<IpNet>,
    ingress_header: Option<HeaderName>,
}

/// What [`ProxyTrust::resolve`] decided about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOrigin {
    /// The IP per-IP limits and ingress CIDR rules apply to.
    pub client: IpAddr,
    /// The ingress header's value, only when a trusted proxy sent it.
    pub ingress_value: Option<String>,
    /// Headers present but ignored because the peer is not a trusted proxy (lower-case names).
    pub untrusted_headers: Vec<HeaderName>,
    /// A trusted proxy sent an `X-Forwarded-For` that did not parse; the peer IP was used.
    pub forwarded_for_malformed: bool,
}

impl ProxyTrust {
    pub fn new(proxies: Vec<IpNet>, ingress_header: Option<HeaderName>) -> Self {
        ProxyTrust {
            proxies,
            ingress_header,
        }
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.proxies.iter().any(|n| n.contains(&ip))
    }

    pub fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> ClientOrigin {
        let peer = peer.to_canonical();
        let forwarded: Vec<&axum::http::HeaderValue> =
            headers.get_all(X_FORWARDED_FOR).iter().collect();
        let ingress = self
            .ingress_header
            .as_ref()
            .and_then(|h| headers.get(h).map(|v| (h, v)));
        if !self.is_trusted(peer) {
            let mut untrusted = Vec::new();
            if !forwarded.is_empty() {
                untrusted.push(HeaderName::from_static(X_FORWARDED_FOR));
            }
            if let Some((h, _)) = ingress {
                untrusted.push(h.clone());
            }
            return ClientOrigin {
                client: peer,
                ingress_value: None,
                untrusted_headers: untrusted,
                forwarded_for_malformed: false,
            };
        }
        let (client, malformed) = if forwarded.is_empty() {
            (peer, false)
        } else {
            match self.forwarded_client(&forwarded) {
                Some(ip) => (ip, false),
                None => (peer, true),
            }
        };
        ClientOrigin {
            client,
            ingress_value: ingress
                .and_then(|(_, v)| v.to_str().ok())
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            untrusted_headers: Vec::new(),
            forwarded_for_malformed: malformed,
        }
    }

    /// The rightmost untrusted hop of the (possibly repeated) `X-Forwarded-For` headers, or
    /// `None` when any hop is not an address.
    fn forwarded_client(&self, values: &[&axum::http::HeaderValue]) -> Option<IpAddr> {
        let mut hops = Vec::new();
        for v in values {
            for hop in v.to_str().ok()?.split(',') {
                hops.push(parse_hop(hop.trim())?);
                if hops.len() > MAX_FORWARDED_HOPS {
                    return None;
                }
            }
        }
        hops.iter()
            .rev()
            .find(|ip| !self.is_trusted(**ip))
            .or(hops.first())
            .copied()
    }
}

/// One hop: an IP, `IPv4:port`, `[IPv6]` or `[IPv6]:port` (some proxies append the port).
fn parse_hop(s: &str) -> Option<IpAddr> {
    let ip = s
        .parse::<IpAddr>()
        .ok()
        .or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| {
            s.strip_prefix('[')?
                .strip_suffix(']')?
                .parse::<IpAddr>()
                .ok()
        })?;
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn trust() -> ProxyTrust {
        ProxyTrust::new(
            vec!["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()],
            Some(HeaderName::from_static("cf-ipcountry")),
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_trusted_proxy_gives_the_rightmost_untrusted_hop_and_the_header() {
        let h = headers(&[
            ("x-forwarded-for", "203.0.113.7, 198.51.100.2"),
            ("x-forwarded-for", "10.1.1.1"),
            ("cf-ipcountry", " DE "),
        ]);
        let o = trust().resolve(ip("10.0.0.5"), &h);
        assert_eq!(
            o.client,
            ip("198.51.100.2"),
            "the client wrote 203.0.113.7 itself"
        );
        assert_eq!(o.ingress_value.as_deref(), Some("DE"));
        assert!(o.untrusted_headers.is_empty() && !o.forwarded_for_malformed);
    }

    #[test]
    fn hops_with_ports_brackets_and_mapped_addresses_parse() {
        let h = headers(&[("x-forwarded-for", "[2001:db8::1]:4711, 192.0.2.1:80")]);
        assert_eq!(trust().resolve(ip("10.0.0.5"), &h).client, ip("192.0.2.1"));
        let h = headers(&[("x-forwarded-for", "[2001:db8::1]")]);
        assert_eq!(trust().resolve(ip("fd00::5"), &h).client, ip("2001:db8::1"));
        let h = headers(&[("x-forwarded-for", "::ffff:192.0.2.9")]);
        let peer = ip("::ffff:10.0.0.5");
        assert_eq!(trust().resolve(peer, &h).client, ip("192.0.2.9"));
    }

    #[test]
    fn all_hops_trusted_gives_the_leftmost() {
        let h = headers(&[("x-forwarded-for", "10.9.9.9, 10.1.1.1")]);
        assert_eq!(trust().resolve(ip("10.0.0.5"), &h).client, ip("10.9.9.9"));
    }

    #[test]
    fn malformed_forwarded_for_falls_back_to_the_peer_and_says_so() {
        for bad in [
            "203.0.113.7,,10.1.1.1",
            "unknown",
            "203.0.113.300",
            "_hidden, 1.2.3.4",
        ] {
            let o = trust().resolve(ip("10.0.0.5"), &headers(&[("x-forwarded-for", bad)]));
            assert_eq!(o.client, ip("10.0.0.5"), "{bad}");
            assert!(o.forwarded_for_malformed, "{bad}");
        }
        let long = vec!["192.0.2.1"; MAX_FORWARDED_HOPS + 1].join(",");
        let o = trust().resolve(ip("10.0.0.5"), &headers(&[("x-forwarded-for", &long)]));
        assert!(o.forwarded_for_malformed);
        let o = trust().resolve(ip("10.0.0.5"), &HeaderMap::new());
        assert_eq!(o.client, ip("10.0.0.5"));
        assert!(!o.forwarded_for_malformed);
    }

    #[test]
    fn an_untrusted_peer_is_its_own_client_and_its_headers_are_ignored() {
        let h = headers(&[("x-forwarded-for", "192.0.2.1"), ("cf-ipcountry", "US")]);
        let o = trust().resolve(ip("203.0.113.50"), &h);
        assert_eq!(o.client, ip("203.0.113.50"));
        assert_eq!(o.ingress_value, None);
        assert_eq!(
            o.untrusted_headers,
            vec![
                HeaderName::from_static("x-forwarded-for"),
                HeaderName::from_static("cf-ipcountry")
            ]
        );
        // No proxies configured (the default): nobody is trusted.
        let o = ProxyTrust::default().resolve(ip("10.0.0.5"), &h);
        assert_eq!(o.client, ip("10.0.0.5"));
        assert_eq!(
            o.untrusted_headers.len(),
            1,
            "only X-Forwarded-For is a known header"
        );
    }
}
