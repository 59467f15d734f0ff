//! Hand-made ICE-TCP connections to a loop's own listener: from a chosen local address, with
//! RFC 4571 frames written byte by byte, and reads that tell an answer from a close. Tests of
//! hostile TCP input use them where a real client would never go.

use std::io::{ErrorKind, Read};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A TCP connection to `to` from `from_ip` (any port).
pub fn connect_from(to: SocketAddr, from_ip: impl Into<IpAddr>) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let from = SocketAddr::new(from_ip.into(), 0);
    let sock = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
    sock.bind(&from.into())?;
    sock.connect_timeout(&to.into(), Duration::from_secs(5))?;
    Ok(sock.into())
}

/// Reads until EOF/reset or `within`; returns (bytes read, whether the peer closed).
pub fn read_until_closed(s: &mut TcpStream, within: Duration) -> (usize, bool) {
    let deadline = Instant::now() + within;
    let mut got = 0;
    let mut buf = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return (got, true),
        }
    }
    (got, false)
}
