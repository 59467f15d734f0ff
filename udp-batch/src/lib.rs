//! Batched UDP I/O: a safe wrapper around Linux `recvmmsg(2)` / `sendmmsg(2)`.
//!
//! One system call moves up to a whole batch of datagrams. Every buffer, `iovec`,
//! `mmsghdr` and `sockaddr_storage` is allocated once, when the batch is built; receiving
//! and sending allocate nothing. All `unsafe` of the crate lives in this module: the two
//! system calls and the `sockaddr` conversions, each with the invariant it relies on.
//!
//! Addresses are normalised: an IPv4-mapped IPv6 source (`::ffff:a.b.c.d`, seen on a dual
//! stack socket) is reported as IPv4, and an IPv4 destination is mapped back when the
//! socket is IPv6, so the flow table sees one spelling per client.
//!
//! The batches hold raw pointers into their own heap buffers, which makes them `!Send`:
//! build them on the thread that uses them.
//!
//! A receive batch built [`with_arrival_times`](RecvBatch::with_arrival_times) also reads
//! each datagram's kernel receive timestamp (`SO_TIMESTAMPNS`, turned on with
//! [`stamp_arrivals`]): when it reached the socket, not when the reader got to it. A reader
//! that lets datagrams queue on purpose (to read them in fewer batches) needs it to know how
//! long they waited.
//!
//! A forwarder sends what it received on with [`RecvBatch::forward`]: each datagram leaves
//! from the slot it arrived in, without a copy. A sender that writes each datagram as it
//! queues it (a timestamp, a sequence number) fills the slot in place with
//! [`SendBatch::push_with`].

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::ptr;
use std::time::{Duration, SystemTime};

/// Largest datagram a slot holds by default: above any path MTU WebRTC uses.
pub const DEFAULT_SLOT: usize = 2048;

/// Datagrams received by one [`RecvBatch::recv`] call, read in place.
pub struct RecvBatch {
    slot: usize,
    bufs: Box<[u8]>,
    iovecs: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// One control buffer per slot for the kernel's timestamp, empty unless the batch was
    /// built to read arrival times. `u64` elements keep it aligned for `cmsghdr`.
    controls: Box<[[u64; CONTROL_WORDS]]>,
    filled: usize,
}

/// Room for one `SCM_TIMESTAMPNS` control message (`CMSG_SPACE` of a `timespec`, 32 bytes on
/// 64-bit Linux) with margin, in `u64` words.
const CONTROL_WORDS: usize = 8;

/// One received datagram.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// Source address (IPv4-mapped IPv6 reported as IPv4).
    pub from: SocketAddr,
    /// The bytes, possibly cut short if `truncated`.
    pub bytes: &'a [u8],
    /// The datagram was larger than a slot; `bytes` holds only its start.
    pub truncated: bool,
    /// When the kernel queued it on the socket (wall clock), if the batch reads arrival times
    /// and the socket stamps them.
    pub arrived: Option<SystemTime>,
}

impl RecvBatch {
    /// A batch of `capacity` slots of `slot` bytes each.
    pub fn new(capacity: usize, slot: usize) -> Self {
        assert!(capacity > 0 && slot > 0, "empty batch");
        Self {
            slot,
            bufs: vec![0u8; capacity * slot].into_boxed_slice(),
            iovecs: vec![empty_iovec(); capacity].into_boxed_slice(),
            addrs: vec![empty_storage(); capacity].into_boxed_slice(),
            hdrs: vec![empty_mmsghdr(); capacity].into_boxed_slice(),
            controls: Box::default(),
            filled: 0,
        }
    }

    /// As [`new`](Self::new), and every datagram also carries its kernel receive timestamp
    /// ([`Received::arrived`]) once the socket stamps them ([`stamp_arrivals`]).
    pub fn with_arrival_times(capacity: usize, slot: usize) -> Self {
        Self {
            controls: vec![[0u64; CONTROL_WORDS]; capacity].into_boxed_slice(),
            ..Self::new(capacity, slot)
        }
    }

    /// Receives up to a batch of datagrams without blocking. Returns how many arrived;
    /// `Err(WouldBlock)` when none are queued.
    pub fn recv(&mut self, socket: &impl AsRawFd) -> io::Result<usize> {
        self.filled = 0;
        let base = self.bufs.as_mut_ptr();
        for (i, ((iov, hdr), addr)) in self
            .iovecs
            .iter_mut()
            .zip(self.hdrs.iter_mut())
            .zip(self.addrs.iter_mut())
            .enumerate()
        {
            // In bounds: `bufs` holds `capacity * slot` bytes and `i < capacity`.
            iov.iov_base = base.wrapping_add(i * self.slot).cast();
            iov.iov_len = self.slot;
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_name = ptr::from_mut(addr).cast();
            hdr.msg_hdr.msg_namelen = socklen_of::<libc::sockaddr_storage>();
            match self.controls.get_mut(i) {
                Some(control) => {
                    hdr.msg_hdr.msg_control = control.as_mut_ptr().cast();
                    hdr.msg_hdr.msg_controllen = mem::size_of_val(control) as _;
                }
                None => {
                    hdr.msg_hdr.msg_control = ptr::null_mut();
                    hdr.msg_hdr.msg_controllen = 0;
                }
            }
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        let vlen = u32::try_from(self.hdrs.len()).unwrap_or(u32::MAX);
        loop {
            // SAFETY: every header points at its own iovec and sockaddr_storage (and control
            // buffer, if any), and every iovec at its own `slot` bytes of `bufs`; all live in
            // `self` (heap, not moved during the call) and are exclusively borrowed by
            // `&mut self`. The kernel writes at most `iov_len` bytes per buffer, `msg_namelen`
            // bytes per address and `msg_controllen` bytes per control buffer.
            let rc = unsafe {
                libc::recvmmsg(
                    socket.as_raw_fd(),
                    self.hdrs.as_mut_ptr(),
                    vlen,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            };
            match usize::try_from(rc) {
                Ok(n) => {
                    self.filled = n;
                    return Ok(n);
                }
                Err(_) => {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
            }
        }
    }

    /// Datagrams of the last [`recv`](Self::recv), in arrival order. A datagram whose source
    /// is not an IP address (impossible on a UDP socket) is skipped.
    pub fn iter(&self) -> impl Iterator<Item = Received<'_>> {
        (0..self.filled).filter_map(move |i| {
            let hdr = &self.hdrs[i];
            let len = (hdr.msg_len as usize).min(self.slot);
            let from = from_storage(&self.addrs[i], hdr.msg_hdr.msg_namelen)?;
            Some(Received {
                from,
                bytes: &self.bufs[i * self.slot..i * self.slot + len],
                truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                arrived: if self.controls.is_empty() {
                    None
                } else {
                    arrival_stamp(&hdr.msg_hdr)
                },
            })
        })
    }

    /// Sends every datagram of the last [`recv`](Self::recv) on to `to`, unchanged and
    /// without copying it (each one leaves from the slot it arrived in), through `socket`,
    /// bound to IPv6 iff `v6_socket`. The batch is empty afterwards: its address slots now
    /// hold `to`. Losses as for [`SendBatch::flush`]; a destination of the wrong family
    /// sends nothing.
    pub fn forward(
        &mut self,
        socket: &impl AsRawFd,
        to: SocketAddr,
        v6_socket: bool,
    ) -> Result<FlushLosses, PushError> {
        let filled = mem::take(&mut self.filled);
        for i in 0..filled {
            let namelen = to_storage(to, v6_socket, &mut self.addrs[i]).ok_or(PushError::Family)?;
            let hdr = &mut self.hdrs[i];
            // `recv` pointed `iovecs[i]` at slot i and the header at `iovecs[i]` and
            // `addrs[i]`; only the lengths change: the bytes that arrived, the new address.
            self.iovecs[i].iov_len = (hdr.msg_len as usize).min(self.slot);
            hdr.msg_hdr.msg_namelen = namelen;
            hdr.msg_hdr.msg_control = ptr::null_mut();
            hdr.msg_hdr.msg_controllen = 0;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        // SAFETY: headers `..filled` point (since `recv`) at their own iovec and address
        // inside `self`, each iovec at its own slot of `bufs` with a length within the slot;
        // `&mut self` borrows all of it exclusively for the call.
        Ok(unsafe { send_all(socket, &mut self.hdrs[..filled], |_, _| {}) })
    }
}

/// The `SCM_TIMESTAMPNS` the kernel put in a received message's control buffer, if any.
fn arrival_stamp(msg: &libc::msghdr) -> Option<SystemTime> {
    // SAFETY: `msg` is a header `recvmmsg` filled: its control pointer and the length the
    // kernel wrote back describe this batch's own control buffer (or are null and 0). The
    // libc CMSG macros stay inside `msg_controllen`, and the timestamp is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = libc::CMSG_DATA(c).cast::<libc::timespec>().read_unaligned();
                let since_epoch = Duration::new(
                    u64::try_from(ts.tv_sec).ok()?,
                    u32::try_from(ts.tv_nsec).ok()?,
                );
                return SystemTime::UNIX_EPOCH.checked_add(since_epoch);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// Asks the kernel to stamp each datagram the socket receives with its arrival time
/// (`SO_TIMESTAMPNS`, the wall clock), for a batch built
/// [`with_arrival_times`](RecvBatch::with_arrival_times) to read.
pub fn stamp_arrivals(socket: &impl AsRawFd) -> io::Result<()> {
    setsockopt_int(socket, libc::SO_TIMESTAMPNS, 1)
}

/// Datagrams queued for one [`SendBatch::flush`] call.
pub struct SendBatch {
    slot: usize,
    v6_socket: bool,
    bufs: Box<[u8]>,
    iovecs: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    hdrs: Box<[libc::mmsghdr]>,
    tags: Box<[u8]>,
    queued: usize,
}

/// Why [`SendBatch::push`] refused a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The batch is full: flush first.
    #[error("send batch full")]
    Full,
    /// Prefix and payload together exceed a slot.
    #[error("datagram larger than a send slot")]
    TooLarge,
    /// An IPv6 destination on an IPv4 socket.
    #[error("address family does not match the socket")]
    Family,
}

/// What a [`SendBatch::flush`] could not send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushLosses {
    /// Dropped because the socket's send buffer was full.
    pub buffer_full: u64,
    /// Refused by the kernel for another reason.
    pub failed: u64,
}

impl SendBatch {
    /// A batch of `capacity` slots of `slot` bytes, for a socket bound to IPv6 iff
    /// `v6_socket`.
    pub fn new(capacity: usize, slot: usize, v6_socket: bool) -> Self {
        assert!(capacity > 0 && slot > 0, "empty batch");
        Self {
            slot,
            v6_socket,
            bufs: vec![0u8; capacity * slot].into_boxed_slice(),
            iovecs: vec![empty_iovec(); capacity].into_boxed_slice(),
            addrs: vec![empty_storage(); capacity].into_boxed_slice(),
            hdrs: vec![empty_mmsghdr(); capacity].into_boxed_slice(),
            tags: vec![0u8; capacity].into_boxed_slice(),
            queued: 0,
        }
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.queued
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// No room for another datagram.
    pub fn is_full(&self) -> bool {
        self.queued == self.hdrs.len()
    }

    /// Queues `prefix ++ payload` for `to`, copied into the next slot. `tag` comes back in
    /// `flush`'s callback for each datagram sent (the caller's accounting bucket).
    pub fn push(
        &mut self,
        to: SocketAddr,
        prefix: &[u8],
        payload: &[u8],
        tag: u8,
    ) -> Result<(), PushError> {
        self.push_with(to, prefix.len() + payload.len(), tag, |buf| {
            let (head, body) = buf.split_at_mut(prefix.len());
            head.copy_from_slice(prefix);
            body.copy_from_slice(payload);
        })
    }

    /// Queues a datagram of `len` bytes for `to` that `fill` writes straight into the next
    /// slot (a sender that stamps each datagram as it queues it needs no buffer of its own).
    /// `tag` as for [`push`](Self::push).
    pub fn push_with(
        &mut self,
        to: SocketAddr,
        len: usize,
        tag: u8,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), PushError> {
        let i = self.queued;
        if i == self.hdrs.len() {
            return Err(PushError::Full);
        }
        if len > self.slot {
            return Err(PushError::TooLarge);
        }
        let namelen =
            to_storage(to, self.v6_socket, &mut self.addrs[i]).ok_or(PushError::Family)?;
        fill(&mut self.bufs[i * self.slot..i * self.slot + len]);
        self.iovecs[i].iov_len = len;
        self.hdrs[i].msg_hdr.msg_namelen = namelen;
        self.tags[i] = tag;
        self.queued += 1;
        Ok(())
    }

    /// Sends everything queued without blocking, then empties the batch. `on_sent(tag,
    /// bytes)` runs for each datagram the kernel accepted. A full send buffer drops the rest
    /// of the batch (never waits); any other error drops only the datagram it concerns.
    pub fn flush(
        &mut self,
        socket: &impl AsRawFd,
        mut on_sent: impl FnMut(u8, usize),
    ) -> FlushLosses {
        let queued = mem::take(&mut self.queued);
        let base = self.bufs.as_mut_ptr();
        for (i, ((iov, hdr), addr)) in self
            .iovecs
            .iter_mut()
            .zip(self.hdrs.iter_mut())
            .zip(self.addrs.iter_mut())
            .enumerate()
            .take(queued)
        {
            // In bounds: `bufs` holds `capacity * slot` bytes and `i < capacity`.
            iov.iov_base = base.wrapping_add(i * self.slot).cast();
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_name = ptr::from_mut(addr).cast();
            hdr.msg_hdr.msg_control = ptr::null_mut();
            hdr.msg_hdr.msg_controllen = 0;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        // SAFETY: headers `..queued` were filled by `push_with` (address length, iovec length
        // within the slot) and re-pointed above at their own iovec, slot and address inside
        // `self`, which `&mut self` borrows exclusively for the call.
        let tags = &self.tags;
        unsafe {
            send_all(socket, &mut self.hdrs[..queued], |i, bytes| {
                on_sent(tags[i], bytes)
            })
        }
    }
}

/// Sends `hdrs` with `sendmmsg(2)` without blocking, calling `on_sent(index, bytes)` for each
/// datagram the kernel accepted. A full send buffer drops the rest (never waits); any other
/// error drops only the datagram it concerns.
///
/// # Safety
/// Every header's `msg_name`, `msg_iov` and the buffers those iovecs point at must be valid
/// for reads of the lengths the header and iovecs state, for the whole call.
unsafe fn send_all(
    socket: &impl AsRawFd,
    hdrs: &mut [libc::mmsghdr],
    mut on_sent: impl FnMut(usize, usize),
) -> FlushLosses {
    let mut losses = FlushLosses::default();
    let queued = hdrs.len();
    let mut next = 0;
    while next < queued {
        let rest = &mut hdrs[next..];
        let vlen = u32::try_from(rest.len()).unwrap_or(u32::MAX);
        // SAFETY: the caller vouches for every header of `hdrs` (this function's contract);
        // `rest` is a tail of them, and `vlen` its length.
        let rc = unsafe {
            libc::sendmmsg(
                socket.as_raw_fd(),
                rest.as_mut_ptr(),
                vlen,
                libc::MSG_DONTWAIT,
            )
        };
        match usize::try_from(rc) {
            Ok(0) => {
                losses.failed += (queued - next) as u64;
                break;
            }
            Ok(n) => {
                for (j, hdr) in hdrs.iter().enumerate().skip(next).take(n) {
                    on_sent(j, hdr.msg_len as usize);
                }
                next += n;
            }
            Err(_) => {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock => {
                        losses.buffer_full += (queued - next) as u64;
                        break;
                    }
                    _ => {
                        losses.failed += 1;
                        next += 1;
                    }
                }
            }
        }
    }
    losses
}

/// Raises a socket's receive and send buffers to `bytes`, past the `rmem_max` / `wmem_max`
/// caps when the process may (`SO_RCVBUFFORCE` / `SO_SNDBUFFORCE` need CAP_NET_ADMIN),
/// else as far as the caps allow. Deep buffers absorb bursts while a worker is busy with a
/// batch. Returns the receive buffer size the kernel granted.
pub fn grow_buffers(socket: &impl AsRawFd, bytes: usize) -> io::Result<usize> {
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for (forced, capped) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if setsockopt_int(socket, forced, want).is_err() {
            setsockopt_int(socket, capped, want)?;
        }
    }
    let mut granted: libc::c_int = 0;
    let mut len = socklen_of::<libc::c_int>();
    // SAFETY: getsockopt writes at most `len` bytes (the size of `granted`) into `granted`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            ptr::from_mut(&mut granted).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(granted).unwrap_or(0))
}

fn setsockopt_int(socket: &impl AsRawFd, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the option value is a c_int read by the kernel from a valid pointer of the
    // stated length.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            ptr::from_ref(&value).cast(),
            socklen_of::<libc::c_int>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: ptr::null_mut(),
        iov_len: 0,
    }
}

fn empty_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (AF_UNSPEC) value.
    unsafe { mem::zeroed() }
}

fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain old data (integers and raw pointers); all-zero is valid and
    // means "no buffers", which `recv`/`flush` replace before every system call.
    unsafe { mem::zeroed() }
}

fn socklen_of<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(mem::size_of::<T>()).unwrap_or(libc::socklen_t::MAX)
}

/// Reads the address the kernel wrote into `storage`.
fn from_storage(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET if len >= socklen_of::<libc::sockaddr_in>() => {
            // SAFETY: ss_family says the storage holds a sockaddr_in, which is smaller than
            // and no more aligned than sockaddr_storage.
            let sin = unsafe { &*ptr::from_ref(storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= socklen_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*ptr::from_ref(storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            Some(match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                None => SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    port,
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )),
            })
        }
        _ => None,
    }
}

/// Writes `addr` into `storage` in the socket's family; returns the address length, or
/// `None` for an IPv6 destination (not IPv4-mapped) on an IPv4 socket.
fn to_storage(
    addr: SocketAddr,
    v6_socket: bool,
    storage: &mut libc::sockaddr_storage,
) -> Option<libc::socklen_t> {
    let v6 = match (addr, v6_socket) {
        (SocketAddr::V4(v4), false) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger and at least as aligned as sockaddr_in.
            unsafe {
                ptr::from_mut(storage)
                    .cast::<libc::sockaddr_in>()
                    .write(sin)
            };
            return Some(socklen_of::<libc::sockaddr_in>());
        }
        (SocketAddr::V4(v4), true) => SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0),
        (SocketAddr::V6(v6), true) => v6,
        (SocketAddr::V6(v6), false) => {
            let v4 = v6.ip().to_ipv4_mapped()?;
            return to_storage(SocketAddr::from((v4, v6.port())), false, storage);
        }
    };
    let sin6 = libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as libc::sa_family_t,
        sin6_port: v6.port().to_be(),
        sin6_flowinfo: v6.flowinfo(),
        sin6_addr: libc::in6_addr {
            s6_addr: v6.ip().octets(),
        },
        sin6_scope_id: v6.scope_id(),
    };
    // SAFETY: sockaddr_storage is larger and at least as aligned as sockaddr_in6.
    unsafe {
        ptr::from_mut(storage)
            .cast::<libc::sockaddr_in6>()
            .write(sin6)
    };
    Some(socklen_of::<libc::sockaddr_in6>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Instant;

    fn recv_all(
        batch: &mut RecvBatch,
        sock: &UdpSocket,
        want: usize,
    ) -> Vec<(SocketAddr, Vec<u8>, bool)> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while got.len() < want && Instant::now() < deadline {
            match batch.recv(sock) {
                Ok(_) => got.extend(
                    batch
                        .iter()
                        .map(|r| (r.from, r.bytes.to_vec(), r.truncated)),
                ),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
        got
    }

    #[test]
    fn sendmmsg_batch_arrives_whole_and_in_order_via_recvmmsg() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let mut out = SendBatch::new(8, 64, false);
        for i in 0..8u8 {
            out.push(to, &[0xD1, i], &[i; 10], i % 2).unwrap();
        }
        assert!(out.is_full());
        assert_eq!(out.push(to, &[], &[1], 0), Err(PushError::Full));
        let mut sent = [0usize; 2];
        let losses = out.flush(&tx, |tag, bytes| sent[usize::from(tag)] += bytes);
        assert_eq!(losses, FlushLosses::default());
        assert_eq!(sent, [48, 48]);
        assert!(out.is_empty());

        let mut batch = RecvBatch::new(4, 64);
        let got = recv_all(&mut batch, &rx, 8);
        assert_eq!(got.len(), 8);
        for (i, (from, bytes, truncated)) in got.into_iter().enumerate() {
            assert_eq!(from, tx.local_addr().unwrap());
            let mut want = vec![0xD1, i as u8];
            want.extend_from_slice(&[i as u8; 10]);
            assert_eq!(bytes, want);
            assert!(!truncated);
        }
        assert_eq!(
            batch.recv(&rx).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    #[test]
    fn a_stamping_socket_reports_when_each_datagram_arrived_not_when_it_was_read() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        stamp_arrivals(&rx).unwrap();
        let to = rx.local_addr().unwrap();
        let sent = SystemTime::now();
        tx.send_to(b"first", to).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        tx.send_to(b"second", to).unwrap();
        std::thread::sleep(Duration::from_millis(30));

        let mut batch = RecvBatch::with_arrival_times(4, 64);
        let read = SystemTime::now();
        assert_eq!(batch.recv(&rx).unwrap(), 2);
        let arrived: Vec<SystemTime> = batch.iter().map(|r| r.arrived.unwrap()).collect();
        // Each stamp lies between the send and the read, the first one 30 ms before the
        // second: the time a datagram queued is in the stamp (1 ms of slack for the clock's
        // and the kernel's granularity).
        let slack = Duration::from_millis(1);
        assert!(arrived[0] + slack >= sent, "{arrived:?} sent {sent:?}");
        let waited = read.duration_since(arrived[1]).unwrap();
        assert!(waited >= Duration::from_millis(29), "{waited:?}");
        let apart = arrived[1].duration_since(arrived[0]).unwrap();
        assert!(apart >= Duration::from_millis(29), "{apart:?}");
    }

    #[test]
    fn arrival_times_are_absent_unless_both_the_batch_and_the_socket_ask() {
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        let stamping = UdpSocket::bind("127.0.0.1:0").unwrap();
        stamp_arrivals(&stamping).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for (socket, mut batch, stamped) in [
            (&plain, RecvBatch::with_arrival_times(2, 32), false),
            (&stamping, RecvBatch::new(2, 32), false),
            (&stamping, RecvBatch::with_arrival_times(2, 32), true),
        ] {
            tx.send_to(b"x", socket.local_addr().unwrap()).unwrap();
            assert_eq!(recv_all(&mut batch, socket, 1).len(), 1);
            batch.recv(socket).unwrap_err(); // drained
            tx.send_to(b"y", socket.local_addr().unwrap()).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            batch.recv(socket).unwrap();
            let r = batch.iter().next().unwrap();
            assert_eq!(r.bytes, b"y");
            assert_eq!(r.arrived.is_some(), stamped);
        }
    }

    #[test]
    fn oversized_datagram_is_flagged_truncated() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[7u8; 100], rx.local_addr().unwrap()).unwrap();
        let mut batch = RecvBatch::new(2, 32);
        let got = recv_all(&mut batch, &rx, 1);
        assert_eq!(got.len(), 1);
        assert!(got[0].2);
        assert_eq!(got[0].1.len(), 32);
    }

    #[test]
    fn push_with_sends_what_the_fill_wrote_and_refuses_what_push_refuses() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let mut out = SendBatch::new(2, 16, false);
        out.push_with(to, 5, 1, |b| b.copy_from_slice(b"hello"))
            .unwrap();
        let mut called = false;
        assert_eq!(
            out.push_with(to, 17, 0, |_| called = true),
            Err(PushError::TooLarge)
        );
        let v6: SocketAddr = "[2001:db8::1]:9".parse().unwrap();
        assert_eq!(
            out.push_with(v6, 1, 0, |_| called = true),
            Err(PushError::Family)
        );
        assert!(!called, "a refused datagram is not filled");
        out.push_with(to, 0, 2, |b| assert!(b.is_empty())).unwrap();
        assert_eq!(out.push_with(to, 1, 0, |_| {}), Err(PushError::Full));
        let mut sent = Vec::new();
        assert_eq!(
            out.flush(&tx, |tag, bytes| sent.push((tag, bytes))),
            FlushLosses::default()
        );
        assert_eq!(sent, [(1, 5), (2, 0)]);
        let mut batch = RecvBatch::new(4, 16);
        let got = recv_all(&mut batch, &rx, 2);
        assert_eq!(got[0].1, b"hello");
        assert_eq!(got[1].1, b"");
    }

    #[test]
    fn forward_sends_each_received_datagram_on_unchanged_and_empties_the_batch() {
        let ingress = UdpSocket::bind("127.0.0.1:0").unwrap();
        let egress = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let datagrams: [&[u8]; 3] = [b"one", &[9u8; 40], b""];
        for d in datagrams {
            client.send_to(d, ingress.local_addr().unwrap()).unwrap();
        }
        let mut batch = RecvBatch::with_arrival_times(4, 64);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut forwarded = 0;
        while forwarded < datagrams.len() && Instant::now() < deadline {
            match batch.recv(&ingress) {
                Ok(n) => {
                    forwarded += n;
                    let to = sink.local_addr().unwrap();
                    let losses = batch.forward(&egress, to, false).unwrap();
                    assert_eq!(losses, FlushLosses::default());
                    assert_eq!(batch.iter().count(), 0);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
        let mut got = RecvBatch::new(4, 64);
        let got = recv_all(&mut got, &sink, datagrams.len());
        let want: Vec<(SocketAddr, Vec<u8>, bool)> = datagrams
            .iter()
            .map(|d| (egress.local_addr().unwrap(), d.to_vec(), false))
            .collect();
        assert_eq!(got, want);
        // The batch receives as before after a forward.
        client
            .send_to(b"again", ingress.local_addr().unwrap())
            .unwrap();
        let again = recv_all(&mut batch, &ingress, 1);
        assert_eq!(again[0].0, client.local_addr().unwrap());
        assert_eq!(again[0].1, b"again");
    }

    #[test]
    fn forward_to_the_wrong_family_sends_nothing() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        let mut batch = RecvBatch::new(2, 16);
        assert_eq!(recv_all(&mut batch, &rx, 1).len(), 1);
        let v6: SocketAddr = "[2001:db8::1]:9".parse().unwrap();
        assert_eq!(batch.forward(&tx, v6, false), Err(PushError::Family));
        assert_eq!(batch.iter().count(), 0);
    }

    #[test]
    fn push_refuses_oversized_and_wrong_family() {
        let mut out = SendBatch::new(2, 16, false);
        let v4: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(out.push(v4, &[0; 8], &[0; 9], 0), Err(PushError::TooLarge));
        let v6: SocketAddr = "[2001:db8::1]:9".parse().unwrap();
        assert_eq!(out.push(v6, &[], &[0], 0), Err(PushError::Family));
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9".parse().unwrap();
        assert_eq!(out.push(mapped, &[], &[0], 0), Ok(()));
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn buffers_grow_at_least_to_the_default() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let granted = grow_buffers(&s, 1 << 20).unwrap();
        assert!(granted >= 64 << 10, "{granted}");
    }

    #[test]
    fn addresses_round_trip_and_mapped_v6_reads_as_v4() {
        let mut ss = empty_storage();
        for (addr, v6) in [
            ("10.1.2.3:4000", false),
            ("[2001:db8::7]:5000", true),
            ("10.1.2.3:4000", true),
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            let len = to_storage(addr, v6, &mut ss).unwrap();
            assert_eq!(from_storage(&ss, len), Some(addr));
        }
    }

    #[test]
    fn dual_stack_socket_reports_ipv4_clients_as_ipv4() {
        let Ok(rx) = UdpSocket::bind("[::]:0") else {
            return; // no IPv6 on this host
        };
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = rx.local_addr().unwrap().port();
        tx.send_to(b"hi", ("127.0.0.1", port)).unwrap();
        let mut batch = RecvBatch::new(2, 32);
        let got = recv_all(&mut batch, &rx, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, tx.local_addr().unwrap());
        // And a reply through a v6 socket to a v4 address reaches it.
        let mut out = SendBatch::new(1, 32, true);
        out.push(got[0].0, &[], b"yo", 0).unwrap();
        assert_eq!(out.flush(&rx, |_, _| {}), FlushLosses::default());
        let mut buf = [0u8; 8];
        tx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let (n, _) = tx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"yo");
    }
}
