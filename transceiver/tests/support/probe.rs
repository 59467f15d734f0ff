//! What a caller experiences, measured at the caller: a direct str0m client on its own socket
//! that records the kernel's arrival time of every RTP packet it receives, the gaps between
//! them, and the server's resident memory. Tests of hostile input use it to measure the
//! neighbours of an attack, not only the refusal.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use voxgate_proto::stun_username::{looks_like_stun, server_ufrag};
use voxgate_testkit::client_session::ClientSession;
use voxgate_testkit::SessionConfig;

use super::backend::{tone, TestWorker};
use super::ServerProcess;

/// The neighbour of an attack: a caller of `server` whose call `worker` (a 48 kHz worker with
/// no other call) has attached, and to which it plays a 30 s reply; returns it and its
/// session id.
pub fn playing_neighbour(
    server: &ServerProcess,
    worker: &TestWorker,
) -> (TimestampedClient, String) {
    let mut neighbour = TimestampedClient::open(server);
    let id = neighbour.session.session_id().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(neighbour.session.is_connected() && worker.attached().len() == 1) {
        assert!(Instant::now() < deadline, "the neighbour did not connect");
        neighbour.drive_for(Duration::from_millis(20));
    }
    worker.play(&id, &tone(700.0, 30.0, 48_000), "reply");
    (neighbour, id)
}

/// A caller of `server` that sends a 500 Hz tone for two minutes and offers a data channel.
pub fn caller_config(server: &ServerProcess) -> SessionConfig {
    SessionConfig {
        base_url: server.signal_url.clone(),
        tone_hz: 500.0,
        amplitude: 0.3,
        send_for: Duration::from_secs(120),
        data_channel: true,
        keep_arrivals: 100_000,
        ..Default::default()
    }
}

/// A direct str0m client on its own socket that records the kernel's arrival time of every
/// RTP packet (`SO_TIMESTAMPNS`): what the transceiver's pacing looks like on the wire,
/// whatever the scheduler does to this test's threads.
pub struct TimestampedClient {
    pub session: ClientSession,
    pub sock: UdpSocket,
    pub media: SocketAddr,
    /// Kernel receive time of every RTP packet (wall clock).
    pub rtp_arrivals: Vec<Duration>,
}

impl TimestampedClient {
    pub fn open(server: &ServerProcess) -> Self {
        use std::os::fd::AsRawFd;
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let on: libc::c_int = 1;
        // SAFETY: setsockopt on our own socket with a valid int option.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                &on as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "SO_TIMESTAMPNS");
        sock.set_read_timeout(Some(Duration::from_millis(2)))
            .unwrap();
        let cfg = caller_config(server);
        let (mut session, offer) =
            ClientSession::new(&cfg, sock.local_addr().unwrap(), Instant::now()).unwrap();
        let created = voxgate_testkit::signaling_client::SignalingClient::new()
            .unwrap()
            .create_session(&cfg.base_url, None, None, &offer)
            .unwrap();
        session.accept_created(Instant::now(), &created).unwrap();
        TimestampedClient {
            session,
            sock,
            media: ([127, 0, 0, 1], server.media_base_port).into(),
            rtp_arrivals: Vec::new(),
        }
    }

    /// One `recvmsg`: the datagram's length and its kernel receive time.
    fn recv(&self, buf: &mut [u8]) -> Option<(usize, Duration)> {
        use std::os::fd::AsRawFd;
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut control = [0u64; 16];
        // SAFETY: zeroed msghdr, then pointed at live buffers.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: recvmsg with the buffers above, which outlive the call.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return None;
        }
        // SAFETY: walking the control messages the kernel just wrote into `control`.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !cmsg.is_null() {
            let c = unsafe { &*cmsg };
            if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = unsafe {
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec)
                };
                let at = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
                return Some((n as usize, at));
            }
            cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
        }
        Some((n as usize, Duration::ZERO))
    }

    /// Drives the client until it has sent a binding request for its session (it checks its
    /// candidate pair while ICE runs, then for consent every few seconds); returns a copy. The
    /// check carries the caller's real credentials: replayed, str0m answers it.
    pub fn capture_check(&mut self, limit: Duration) -> Vec<u8> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(check) = self.send_due() {
                return check;
            }
            self.receive_one();
        }
        panic!("the client sent no check");
    }

    pub fn drive_for(&mut self, d: Duration) {
        let deadline = Instant::now() + d;
        while Instant::now() < deadline {
            self.send_due();
            self.receive_one();
        }
    }

    /// Runs the client's timer if it is due and sends what the client has; returns the last
    /// binding request for its session among what it sent.
    fn send_due(&mut self) -> Option<Vec<u8>> {
        let now = Instant::now();
        if self.session.poll_timeout().is_some_and(|t| t <= now) {
            self.session.handle_timeout(now);
        }
        let mut check = None;
        while let Some(t) = self.session.poll_transmit() {
            if looks_like_stun(&t.contents) && server_ufrag(&t.contents).is_ok() {
                check = Some(t.contents.to_vec());
            }
            let _ = self.sock.send_to(&t.contents, self.media);
        }
        check
    }

    /// Hands the client the next datagram, if one comes within the socket's read timeout, and
    /// records an RTP packet's kernel arrival.
    fn receive_one(&mut self) {
        let mut buf = [0u8; 2048];
        let Some((n, at)) = self.recv(&mut buf) else {
            return;
        };
        let b = &buf[..n];
        // RTP (not RTCP: payload types 200-206 put 192..=223 in byte 1).
        if n > 12 && (128..192).contains(&b[0]) && !(192..224).contains(&b[1]) {
            self.rtp_arrivals.push(at);
        }
        let local = self.sock.local_addr().unwrap();
        self.session
            .handle_datagram(Instant::now(), self.media, local, b);
    }
}

/// Asserts that a new caller of `server` connects (ICE + DTLS) within 10 s.
pub fn a_new_caller_connects(server: &ServerProcess) {
    let mut fresh = TimestampedClient::open(server);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fresh.session.is_connected() {
        assert!(Instant::now() < deadline, "a new caller could not connect");
        fresh.drive_for(Duration::from_millis(20));
    }
}

/// Resident memory of process `pid`, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// Median, p99 and largest of `gaps` (ms).
pub fn gap_stats(mut gaps: Vec<f64>) -> (f64, f64, f64) {
    assert!(!gaps.is_empty(), "no downlink packets");
    gaps.sort_by(|a, b| a.total_cmp(b));
    (
        gaps[gaps.len() / 2],
        gaps[gaps.len() * 99 / 100],
        gaps[gaps.len() - 1],
    )
}

/// CPU time process `pid` has used so far (user + system), from `/proc/PID/stat`.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces, inside parentheses).
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}
