//! Who counts as one client for the per-source caps (tentative flows on a UDP worker, TCP
//! connections on the TCP thread): one IPv4 address, or one IPv6 /64, what a single host or
//! customer is usually given, so that a host cannot spread a flood over its 2^64 addresses.

use std::net::{IpAddr, Ipv6Addr};

/// The unit the per-source caps count: an IPv4 address (IPv4-mapped IPv6 included) or an
/// IPv6 /64.
pub fn client_source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}
