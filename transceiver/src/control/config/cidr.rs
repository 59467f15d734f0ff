//! The value parser of the flags that take networks (`--relays`, `--trusted-proxies`).

use std::net::IpAddr;

/// A CIDR, or a bare IP for just that address.
pub fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{s:?} is neither a CIDR (10.0.0.0/8) nor an IP"))
}
