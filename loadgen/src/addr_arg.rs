//! The address arguments of the `loadgen` subcommands.

use std::net::SocketAddr;

/// Parses a `host:port` or `port` argument on 127.0.0.1.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_on_loopback() {
        assert_eq!(parse_addr("3478"), Ok("127.0.0.1:3478".parse().unwrap()));
        assert_eq!(parse_addr("10.0.0.1:9"), Ok("10.0.0.1:9".parse().unwrap()));
        assert!(parse_addr("nowhere").is_err());
    }
}
