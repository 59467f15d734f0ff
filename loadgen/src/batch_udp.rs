//! Batched UDP I/O (`recvmmsg` / `sendmmsg`) with preallocated buffers and, on receive,
//! optional kernel receive timestamps (`SO_TIMESTAMPNS`), for the bare forwarder, the flow
//! generator and the sink. No allocation per datagram.
//!
//! Buffers, address slots and control slots are allocated once; the `mmsghdr` array points
//! into them (boxed slices never move), and every call only resets lengths.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Room per datagram: larger than any RTP-sized packet plus a relay header.
pub const SLOT: usize = 2048;
const CTRL: usize = 64;

/// Converts a socket address into a `sockaddr_storage` and its length.
pub fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Reads a `sockaddr_storage` filled in by the kernel.
pub fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Asks the kernel to stamp every received datagram (`SO_TIMESTAMPNS`, CLOCK_REALTIME).
pub fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: valid fd, pointer to a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const _ as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets SO_RCVBUF and SO_SNDBUF (capped by the kernel's rmem_max / wmem_max).
pub fn set_buffers(fd: RawFd, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: valid fd, pointer to a c_int of the size given. Failure only leaves the
        // default size, which is acceptable.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &v as *const _ as *const libc::c_void,
                size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// CLOCK_REALTIME now, in nanoseconds (the clock SO_TIMESTAMPNS uses).
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A batch of receive slots.
pub struct RecvBatch {
    bufs: Box<[[u8; SLOT]]>,
    addrs: Box<[libc::sockaddr_storage]>,
    ctrl: Box<[[u8; CTRL]]>,
    iovs: Box<[libc::iovec]>,
    msgs: Box<[libc::mmsghdr]>,
    filled: usize,
}

// SAFETY: the raw pointers inside point into the batch's own boxed slices.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    pub fn new(n: usize) -> RecvBatch {
        let n = n.max(1);
        let mut bufs = vec![[0u8; SLOT]; n].into_boxed_slice();
        // SAFETY: plain old data; zero is valid.
        let mut addrs = vec![unsafe { zeroed::<libc::sockaddr_storage>() }; n].into_boxed_slice();
        let mut ctrl = vec![[0u8; CTRL]; n].into_boxed_slice();
        let mut iovs: Box<[libc::iovec]> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: SLOT,
            })
            .collect();
        let msgs: Box<[libc::mmsghdr]> = (0..n)
            .map(|i| {
                // SAFETY: plain old data; zero is valid.
                let mut h: libc::mmsghdr = unsafe { zeroed() };
                h.msg_hdr.msg_name = &mut addrs[i] as *mut _ as *mut libc::c_void;
                h.msg_hdr.msg_iov = &mut iovs[i];
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = ctrl[i].as_mut_ptr() as *mut libc::c_void;
                h
            })
            .collect();
        RecvBatch {
            bufs,
            addrs,
            ctrl,
            iovs,
            msgs,
            filled: 0,
        }
    }

    /// Receives up to the batch size without blocking; `Ok(0)` when nothing is queued.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for h in self.msgs.iter_mut() {
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = CTRL as _;
            h.msg_len = 0;
        }
        let _ = (&self.addrs, &self.ctrl, &self.iovs);
        // SAFETY: every header points into this batch's live buffers with correct lengths.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            self.filled = 0;
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(0),
                _ => Err(e),
            };
        }
        self.filled = n as usize;
        Ok(self.filled)
    }

    /// Datagrams of the last receive.
    pub fn len(&self) -> usize {
        self.filled
    }

    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// The bytes of datagram `i`.
    pub fn payload(&self, i: usize) -> &[u8] {
        let n = (self.msgs[i].msg_len as usize).min(SLOT);
        &self.bufs[i][..n]
    }

    /// The sender of datagram `i`.
    pub fn source(&self, i: usize) -> Option<SocketAddr> {
        from_sockaddr(&self.addrs[i])
    }

    /// The kernel receive timestamp of datagram `i` (CLOCK_REALTIME ns), if stamping is on.
    pub fn rx_timestamp_ns(&self, i: usize) -> Option<u64> {
        let h = &self.msgs[i].msg_hdr;
        // SAFETY: walking the control buffer the kernel filled, with the libc CMSG helpers.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    /// Raw pointer and length of datagram `i`'s bytes, for zero-copy forwarding.
    fn slot(&self, i: usize) -> (*const u8, usize) {
        (
            self.bufs[i].as_ptr(),
            (self.msgs[i].msg_len as usize).min(SLOT),
        )
    }
}

/// A batch of datagrams to send, each from its own buffer (copied in) or pointing at a
/// [`RecvBatch`] slot (zero copy).
pub struct SendBatch {
    bufs: Box<[[u8; SLOT]]>,
    addrs: Box<[libc::sockaddr_storage]>,
    iovs: Box<[libc::iovec]>,
    msgs: Box<[libc::mmsghdr]>,
    queued: usize,
}

// SAFETY: the raw pointers inside point into the batch's own boxed slices, or into a
// RecvBatch only between `push_slot` and the `flush` that follows on the same thread.
unsafe impl Send for SendBatch {}

impl SendBatch {
    pub fn new(n: usize) -> SendBatch {
        let n = n.max(1);
        let bufs = vec![[0u8; SLOT]; n].into_boxed_slice();
        // SAFETY: plain old data; zero is valid.
        let addrs = vec![unsafe { zeroed::<libc::sockaddr_storage>() }; n].into_boxed_slice();
        let iovs = vec![
            libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0
            };
            n
        ]
        .into_boxed_slice();
        // SAFETY: plain old data; zero is valid.
        let msgs = vec![unsafe { zeroed::<libc::mmsghdr>() }; n].into_boxed_slice();
        SendBatch {
            bufs,
            addrs,
            iovs,
            msgs,
            queued: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.msgs.len()
    }

    pub fn is_full(&self) -> bool {
        self.queued == self.msgs.len()
    }

    pub fn len(&self) -> usize {
        self.queued
    }

    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    fn address(&mut self, i: usize, to: SocketAddr) {
        let (ss, len) = to_sockaddr(to);
        self.addrs[i] = ss;
        let h = &mut self.msgs[i].msg_hdr;
        h.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
        h.msg_namelen = len;
        h.msg_iov = &mut self.iovs[i];
        h.msg_iovlen = 1;
        h.msg_control = std::ptr::null_mut();
        h.msg_controllen = 0;
    }

    /// Queues a copy of `bytes` for `to`, written by `fill` into the slot. Returns false when
    /// the batch is full.
    pub fn push_with(&mut self, to: SocketAddr, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        if self.is_full() {
            return false;
        }
        let i = self.queued;
        let len = len.min(SLOT);
        fill(&mut self.bufs[i][..len]);
        self.iovs[i] = libc::iovec {
            iov_base: self.bufs[i].as_mut_ptr() as *mut libc::c_void,
            iov_len: len,
        };
        self.address(i, to);
        self.queued += 1;
        true
    }

    /// Queues datagram `i` of `from` for `to` without copying. The batch must be flushed
    /// before `from` receives again.
    pub fn push_slot(&mut self, from: &RecvBatch, i: usize, to: SocketAddr) -> bool {
        if self.is_full() {
            return false;
        }
        let k = self.queued;
        let (ptr, len) = from.slot(i);
        self.iovs[k] = libc::iovec {
            iov_base: ptr as *mut libc::c_void,
            iov_len: len,
        };
        self.address(k, to);
        self.queued += 1;
        true
    }

    /// Sends everything queued (retrying the rest after a partial send); datagrams the socket
    /// refuses (buffer full) are dropped and counted. Returns (sent, dropped).
    pub fn flush(&mut self, fd: RawFd) -> (usize, usize) {
        let mut done = 0;
        let mut dropped = 0;
        while done < self.queued {
            // SAFETY: headers [done, queued) point at live buffers and addresses.
            let n = unsafe {
                libc::sendmmsg(
                    fd,
                    self.msgs[done..].as_mut_ptr(),
                    (self.queued - done) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                done += n as usize;
            } else {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // Full buffer or an ICMP error for this datagram: drop it and go on.
                done += 1;
                dropped += 1;
            }
        }
        self.queued = 0;
        (done - dropped, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_batch_round_trips_with_timestamps() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(rx.as_raw_fd()).unwrap();
        let to = rx.local_addr().unwrap();
        let mut out = SendBatch::new(8);
        for k in 0..5u8 {
            assert!(out.push_with(to, 100, |b| b.fill(k)));
        }
        let before = realtime_ns();
        assert_eq!(out.flush(tx.as_raw_fd()), (5, 0));
        let mut batch = RecvBatch::new(8);
        let mut got = 0;
        for _ in 0..100 {
            got += batch.recv(rx.as_raw_fd()).unwrap();
            if got > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(got >= 1);
        assert_eq!(batch.payload(0), &[0u8; 100][..]);
        assert_eq!(batch.source(0), Some(tx.local_addr().unwrap()));
        let ts = batch.rx_timestamp_ns(0).expect("timestamp");
        assert!(ts + 1_000_000 >= before, "{ts} vs {before}");
    }

    #[test]
    fn addresses_convert_both_ways() {
        for a in ["10.1.2.3:4000", "[2001:db8::1]:5000"] {
            let a: SocketAddr = a.parse().unwrap();
            let (ss, _) = to_sockaddr(a);
            assert_eq!(from_sockaddr(&ss), Some(a));
        }
    }
}
