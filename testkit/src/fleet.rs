//! Many client sessions driven by one thread: the only place in the crate that touches sockets.
//!
//! Each session owns one non-blocking UDP socket registered with a shared `mio::Poll` under
//! `Token(index)`, so a readable event leads straight to its session. Deadlines live in an
//! ordered set of `(instant, index)`; the loop sleeps until the earliest one (or a packet),
//! fires what is due, and never scans all sessions on the packet path. After every input the
//! session's transmits are flushed to its socket and its deadline re-filed.
//!
//! A session offering an ICE-TCP candidate ([`SessionConfig::tcp`]) also gets one TCP connection,
//! opened when str0m first sends to a TCP destination (the server's passive candidate: a media
//! loop's listener, or a relay's), polled under `Token(TCP_TOKEN | index)`, and framed with
//! RFC 4571 (2-byte length prefix) both ways by the servers' own `voxgate_proto::rfc4571`.
//!
//! Signaling (POST, PATCH, DELETE) is blocking HTTP on the calling thread; other sessions are
//! not driven meanwhile, which is harmless for tests and bounded by the HTTP timeout.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use reqwest::Url;
use str0m::net::{Protocol, Transmit};
use voxgate_proto::rfc4571::{FrameDecoder, WriteQueue};

use crate::client_session::ClientSession;
use crate::session_config::SessionConfig;
use crate::session_error::SessionError;
use crate::session_report::SessionReport;
use crate::signaling_client::{SignalingClient, SignalingError};

/// Receive buffer size: larger than any WebRTC datagram.
const RECV_BUF: usize = 2048;
/// Tokens of TCP connections have this bit set; the rest is the session index.
const TCP_TOKEN: usize = 1 << 30;
/// Most bytes a TCP connection buffers for sending before frames are dropped, oldest first
/// (like a full UDP socket buffer).
const TCP_OUT_LIMIT: usize = 256 * 1024;
/// Longest frame accepted from a server: a frame is a datagram, and no WebRTC datagram is
/// longer than a receive buffer. A longer length prefix closes the connection.
const TCP_MAX_FRAME: usize = RECV_BUF;
/// How often `run_until` evaluates its predicate at most.
const PREDICATE_INTERVAL: Duration = Duration::from_millis(1);
/// Longest stretch of timer firing before ready sockets are served.
const INPUT_SLICE: Duration = Duration::from_millis(1);

/// Anything that can go wrong opening or steering a session.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Signaling failed; [`ClientError::status`] has the HTTP status if the server answered.
    #[error(transparent)]
    Signaling(#[from] SignalingError),
    /// The WebRTC side failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A socket could not be bound or registered.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// The session was never signaled (added with [`Fleet::add`] without a resource).
    #[error("session {0} has no signaling resource")]
    NoResource(usize),
}

impl ClientError {
    /// The HTTP status the signaling server answered with, if that is what failed.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Signaling(e) => e.status(),
            _ => None,
        }
    }
}

/// Where a session lives on the server, for PATCH and DELETE.
#[derive(Debug, Clone)]
pub struct SessionResource {
    /// The resolved `Location`.
    pub url: Url,
    /// Bearer token to present.
    pub token: Option<String>,
    /// The resume credential the answer carried.
    pub resume_credential: Option<String>,
}

/// A session's ICE-TCP connection to the server's passive candidate.
struct TcpLink {
    dest: SocketAddr,
    stream: mio::net::TcpStream,
    connected: bool,
    /// Received bytes not yet a whole frame.
    decoder: FrameDecoder,
    /// Frames not yet written.
    queue: WriteQueue,
}

impl TcpLink {
    /// Writes what waits (once connected); false when the connection failed.
    fn flush(&mut self) -> bool {
        !self.connected || self.queue.flush(&mut self.stream).1.is_ok()
    }
}

struct Slot {
    session: ClientSession,
    socket: Option<mio::net::UdpSocket>,
    tcp: Option<TcpLink>,
    /// Drop every UDP datagram both ways (a firewall that blocks UDP).
    udp_blocked: bool,
    /// Leave the TCP connection unread (a client that stops reading).
    tcp_paused: bool,
    tcp_recv_buffer: Option<usize>,
    local_addr: SocketAddr,
    /// The entry this slot has in `Fleet::timers`, if any.
    scheduled: Option<Instant>,
    resource: Option<SessionResource>,
}

/// A set of client sessions sharing one thread, one `mio::Poll` and one HTTP client.
pub struct Fleet {
    poll: Poll,
    events: Events,
    ready: Vec<usize>,
    slots: Vec<Slot>,
    timers: BTreeSet<(Instant, usize)>,
    http: SignalingClient,
    buf: Vec<u8>,
}

impl Fleet {
    /// An empty fleet.
    pub fn new() -> io::Result<Self> {
        let http = SignalingClient::new().map_err(io::Error::other)?;
        Ok(Fleet {
            poll: Poll::new()?,
            events: Events::with_capacity(1024),
            ready: Vec::with_capacity(1024),
            slots: Vec::new(),
            timers: BTreeSet::new(),
            http,
            buf: vec![0; RECV_BUF],
        })
    }

    /// Binds a socket, POSTs the offer (blocking), accepts the answer and adds the session.
    /// Returns its index. Timings of the session start now.
    pub fn open(&mut self, cfg: SessionConfig) -> Result<usize, ClientError> {
        let started = Instant::now();
        let socket = UdpSocket::bind(SocketAddr::new(cfg.bind_ip, 0))?;
        let local_addr = socket.local_addr()?;
        let (mut session, offer) = ClientSession::new(&cfg, local_addr, started)?;
        let tcp_recv_buffer = cfg.tcp_recv_buffer;
        let created = self.http.create_session(
            &cfg.base_url,
            cfg.token.as_deref(),
            cfg.query.as_deref(),
            &offer,
        )?;
        session.accept_created(Instant::now(), &created)?;
        let resource = SessionResource {
            url: created.resource_url,
            token: cfg.token,
            resume_credential: created.resume_credential,
        };
        let index = self.add(session, socket, Some(resource))?;
        self.slots[index].tcp_recv_buffer = tcp_recv_buffer;
        Ok(index)
    }

    /// Adds a session signaled elsewhere (for example by a load generator's own HTTP threads),
    /// with the socket its local candidate was bound to.
    pub fn add(
        &mut self,
        session: ClientSession,
        socket: UdpSocket,
        resource: Option<SessionResource>,
    ) -> io::Result<usize> {
        socket.set_nonblocking(true)?;
        let local_addr = socket.local_addr()?;
        let mut socket = mio::net::UdpSocket::from_std(socket);
        let index = self.slots.len();
        self.poll
            .registry()
            .register(&mut socket, Token(index), Interest::READABLE)?;
        self.slots.push(Slot {
            session,
            socket: Some(socket),
            tcp: None,
            udp_blocked: false,
            tcp_paused: false,
            tcp_recv_buffer: None,
            local_addr,
            scheduled: None,
            resource,
        });
        self.service(index);
        Ok(index)
    }

    /// Drives all sessions until `pred(self)` holds or `deadline` passes; returns whether `pred`
    /// held. `pred` is checked on entry, then after input at most once per millisecond.
    pub fn run_until(&mut self, deadline: Instant, mut pred: impl FnMut(&Fleet) -> bool) -> bool {
        // Sessions mutated through `session_mut` may hold unsent output and stale deadlines.
        for i in 0..self.slots.len() {
            self.service(i);
        }
        // `pred` can only change after input; check it then, at most once per interval.
        let mut check_due = true;
        let mut next_check = Instant::now();
        loop {
            let now = Instant::now();
            check_due |= self.fire_timers(now);
            if check_due && now >= next_check {
                if pred(self) {
                    // Read what already waits before returning. Under load one round of
                    // timers can take longer than the caller takes to make `pred` true
                    // again; returning at once then starves every socket (the setup
                    // benchmark saw 200 ms ICE and DTLS stalls from it at 100 arrivals/s).
                    let _ = self.serve_ready(Duration::ZERO);
                    return true;
                }
                check_due = false;
                next_check = now + PREDICATE_INTERVAL;
            }
            if now >= deadline {
                return false;
            }
            let mut wake = self
                .timers
                .first()
                .map_or(deadline, |&(t, _)| t.min(deadline));
            if check_due {
                wake = wake.min(next_check);
            }
            match self.serve_ready(wake.saturating_duration_since(now)) {
                Ok(any) => check_due |= any,
                Err(()) => return false,
            }
        }
    }

    /// Waits up to `timeout` for socket events and serves every ready socket; returns whether
    /// any was ready, or `Err` when polling failed for good.
    fn serve_ready(&mut self, timeout: Duration) -> Result<bool, ()> {
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::warn!(error = %e, "fleet poll failed");
                return Err(());
            }
        }
        self.ready.clear();
        self.ready.extend(self.events.iter().map(|e| e.token().0));
        for k in 0..self.ready.len() {
            let token = self.ready[k];
            if token & TCP_TOKEN != 0 {
                self.serve_tcp(token & !TCP_TOKEN);
            } else {
                self.read_socket(token);
            }
        }
        Ok(!self.ready.is_empty())
    }

    /// Drives all sessions for `d`.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(Instant::now() + d, |_| false);
    }

    /// The session at `index`. Panics if out of range.
    pub fn session(&self, index: usize) -> &ClientSession {
        &self.slots[index].session
    }

    /// The session at `index`, mutable. Output it produces is sent at the next `run_*`.
    pub fn session_mut(&mut self, index: usize) -> &mut ClientSession {
        &mut self.slots[index].session
    }

    /// Sessions ever added (closed ones keep their index).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no session was ever added.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether every session is connected (false for an empty fleet).
    pub fn all_connected(&self) -> bool {
        !self.slots.is_empty() && self.slots.iter().all(|s| s.session.is_connected())
    }

    /// How many sessions are connected.
    pub fn connected_count(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.session.is_connected())
            .count()
    }

    /// Snapshot of the session at `index`.
    pub fn report(&self, index: usize) -> SessionReport {
        self.slots[index].session.report()
    }

    /// Snapshots of all sessions.
    pub fn reports(&self) -> Vec<SessionReport> {
        self.slots.iter().map(|s| s.session.report()).collect()
    }

    /// Sends a text message on the session's data channel right away.
    pub fn send_channel_text(&mut self, index: usize, text: &str) -> Result<(), ClientError> {
        let r = self.slots[index]
            .session
            .send_channel_text(Instant::now(), text);
        self.service(index);
        Ok(r?)
    }

    /// `DELETE`s the server session, then closes locally (DTLS close_notify) and releases the
    /// socket. The local close happens even if the DELETE fails; the DELETE's error is returned.
    pub fn delete(&mut self, index: usize) -> Result<(), ClientError> {
        let result = match &self.slots[index].resource {
            Some(r) => self
                .http
                .delete_session(&r.url, r.token.as_deref())
                .map_err(ClientError::from),
            None => Err(ClientError::NoResource(index)),
        };
        self.slots[index].session.close(Instant::now());
        self.service(index);
        self.release_socket(index);
        result
    }

    /// Closes locally without signaling (DTLS close_notify only) and releases the socket.
    pub fn close(&mut self, index: usize) {
        self.slots[index].session.close(Instant::now());
        self.service(index);
        self.release_socket(index);
    }

    /// Stops the session dead: nothing more is sent or received and the server is not told,
    /// as if the client's network vanished.
    pub fn abandon(&mut self, index: usize) {
        self.slots[index].session.abandon();
        self.service(index);
        self.release_socket(index);
    }

    /// ICE restart: new local credentials, offer PATCHed to the server, answer applied.
    /// The session keeps its socket, DTLS and audio.
    pub fn ice_restart(&mut self, index: usize) -> Result<(), ClientError> {
        let resource = self.slots[index]
            .resource
            .clone()
            .ok_or(ClientError::NoResource(index))?;
        let offer = self.slots[index]
            .session
            .start_ice_restart(Instant::now())?;
        self.service(index);
        let answer =
            match self
                .http
                .update_session(&resource.url, resource.token.as_deref(), &offer)
            {
                Ok(a) => a,
                Err(e) => {
                    self.slots[index].session.cancel_pending_offer();
                    return Err(e.into());
                }
            };
        let r = self.slots[index]
            .session
            .accept_answer(Instant::now(), &answer);
        self.service(index);
        Ok(r?)
    }

    /// Blocks (or unblocks) UDP for the session both ways, like a firewall that starts (or
    /// stops) dropping UDP mid-call: ICE then moves the call to another pair (TCP) if it can.
    pub fn set_udp_blocked(&mut self, index: usize, blocked: bool) {
        self.slots[index].udp_blocked = blocked;
    }

    /// Stops (or resumes) reading the session's TCP connection, like a client that stops
    /// reading: the server's frames pile up on its side.
    pub fn set_tcp_paused(&mut self, index: usize, paused: bool) {
        self.slots[index].tcp_paused = paused;
        if !paused {
            self.serve_tcp(index);
        }
    }

    /// Whether the session's TCP connection is up.
    pub fn tcp_connected(&self, index: usize) -> bool {
        self.slots[index].tcp.as_ref().is_some_and(|l| l.connected)
    }

    /// `GET`s the server's view of the session as JSON.
    pub fn server_state(&self, index: usize) -> Result<serde_json::Value, ClientError> {
        let r = self.slots[index]
            .resource
            .as_ref()
            .ok_or(ClientError::NoResource(index))?;
        Ok(self.http.get_session(&r.url, r.token.as_deref())?)
    }

    /// The signaling resource of the session at `index`, if it was signaled.
    pub fn resource(&self, index: usize) -> Option<&SessionResource> {
        self.slots[index].resource.as_ref()
    }

    /// The shared HTTP client, for signaling requests a test wants to make itself.
    pub fn signaling(&self) -> &SignalingClient {
        &self.http
    }

    /// Fires every timer due by `now`. A session that is still due after its timeout is filed
    /// just after `now`, so it is served again on the next turn with a fresh clock rather than
    /// spinning here. Returns whether any timer fired.
    fn fire_timers(&mut self, now: Instant) -> bool {
        let mut fired = false;
        let mut served = Instant::now();
        while let Some(&(t, index)) = self.timers.first() {
            if t > now {
                break;
            }
            fired = true;
            self.timers.pop_first();
            self.slots[index].scheduled = None;
            self.slots[index].session.handle_timeout(now);
            self.flush(index);
            let next = self.slots[index]
                .session
                .poll_timeout()
                .map(|d| d.max(now + Duration::from_micros(1)));
            self.file_timer(index, next);
            // A round over hundreds of sending sessions can take longer than a frame on a
            // busy machine: read what arrived meanwhile every millisecond, so handshakes
            // and downlink are not held behind the whole round.
            if served.elapsed() >= INPUT_SLICE {
                let _ = self.serve_ready(Duration::ZERO);
                served = Instant::now();
            }
        }
        fired
    }

    /// Reads every pending datagram of one session's socket (edge-triggered: until WouldBlock).
    fn read_socket(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        loop {
            let Some(socket) = slot.socket.as_ref() else {
                return;
            };
            match socket.recv_from(&mut self.buf) {
                Ok(_) if slot.udp_blocked => {}
                Ok((n, source)) => {
                    slot.session.handle_datagram(
                        Instant::now(),
                        source,
                        slot.local_addr,
                        &self.buf[..n],
                    );
                    send_all(slot, &self.poll, index);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // E.g. ECONNREFUSED surfacing from an ICMP error; the next read is fine.
                    tracing::debug!(index, error = %e, "recv failed");
                    break;
                }
            }
        }
        self.reschedule(index);
    }

    /// Flushes output and re-files the deadline of one session.
    fn service(&mut self, index: usize) {
        self.flush(index);
        self.reschedule(index);
    }

    /// Connects, writes and reads the session's TCP connection after an event on it.
    fn serve_tcp(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let Some(link) = slot.tcp.as_mut() else {
            return;
        };
        if !link.connected && link.stream.peer_addr().is_ok() {
            link.connected = true;
        }
        let mut alive = link.flush();
        while alive && !slot.tcp_paused {
            match link.stream.read(link.decoder.spare()) {
                Ok(0) => alive = false,
                Ok(n) => {
                    link.decoder.filled(n);
                    let now = Instant::now();
                    loop {
                        match link.decoder.next_frame() {
                            Ok(Some(frame)) => slot.session.handle_tcp_frame(now, link.dest, frame),
                            Ok(None) => break,
                            Err(_) => {
                                alive = false;
                                break;
                            }
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => alive = false,
            }
        }
        if !alive {
            tracing::debug!(index, "tcp connection closed");
            if let Some(mut l) = slot.tcp.take() {
                let _ = self.poll.registry().deregister(&mut l.stream);
            }
        }
        send_all(slot, &self.poll, index);
        self.reschedule(index);
    }

    fn flush(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        if slot.socket.is_some() {
            send_all(slot, &self.poll, index);
        } else {
            while slot.session.poll_transmit().is_some() {}
        }
    }

    fn reschedule(&mut self, index: usize) {
        let next = self.slots[index].session.poll_timeout();
        self.file_timer(index, next);
    }

    fn file_timer(&mut self, index: usize, next: Option<Instant>) {
        let slot = &mut self.slots[index];
        if slot.scheduled == next {
            return;
        }
        if let Some(old) = slot.scheduled {
            self.timers.remove(&(old, index));
        }
        if let Some(t) = next {
            self.timers.insert((t, index));
        }
        slot.scheduled = next;
    }

    fn release_socket(&mut self, index: usize) {
        if let Some(mut socket) = self.slots[index].socket.take() {
            if let Err(e) = self.poll.registry().deregister(&mut socket) {
                tracing::debug!(index, error = %e, "deregister failed");
            }
        }
        if let Some(mut link) = self.slots[index].tcp.take() {
            let _ = self.poll.registry().deregister(&mut link.stream);
        }
        self.file_timer(index, None);
    }
}

/// Sends every queued transmit of a session: UDP datagrams on its socket (a full socket buffer
/// drops the datagram, UDP semantics, and counts it), TCP frames on its connection (opened on
/// the first one).
fn send_all(slot: &mut Slot, poll: &Poll, index: usize) {
    while let Some(t) = slot.session.poll_transmit() {
        if t.proto == Protocol::Udp {
            if slot.udp_blocked {
                continue;
            }
            let Some(socket) = slot.socket.as_ref() else {
                continue;
            };
            if let Err(e) = socket.send_to(&t.contents, t.destination) {
                slot.session.record_send_error();
                if e.kind() != io::ErrorKind::WouldBlock {
                    tracing::debug!(to = %t.destination, error = %e, "send failed");
                }
            }
        } else {
            for _ in 0..queue_tcp(slot, poll, index, &t) {
                slot.session.record_send_error();
            }
        }
    }
    if let Some(link) = slot.tcp.as_mut() {
        if !link.flush() {
            slot.session.record_send_error();
        }
    }
}

/// Frames a TCP transmit onto the session's connection, connecting first if there is none.
/// Returns how many frames were lost (this one if it could not be queued, or older ones it
/// pushed out).
fn queue_tcp(slot: &mut Slot, poll: &Poll, index: usize, t: &Transmit) -> u64 {
    if slot.tcp.is_none() {
        let Ok(mut stream) = tcp_connect(t.destination, slot.tcp_recv_buffer) else {
            return 1;
        };
        let interest = Interest::READABLE | Interest::WRITABLE;
        if poll
            .registry()
            .register(&mut stream, Token(TCP_TOKEN | index), interest)
            .is_err()
        {
            return 1;
        }
        let _ = stream.set_nodelay(true);
        slot.tcp = Some(TcpLink {
            dest: t.destination,
            stream,
            connected: false,
            decoder: FrameDecoder::new(TCP_MAX_FRAME),
            queue: WriteQueue::new(TCP_OUT_LIMIT),
        });
    }
    let Some(link) = slot.tcp.as_mut().filter(|l| l.dest == t.destination) else {
        return 1; // one TCP connection per session, to the first TCP destination
    };
    // Written by `send_all` after the whole batch, in one vectored write.
    link.queue.push(&t.contents, 0)
}

/// Starts a non-blocking connect, with `SO_RCVBUF` set first when asked (it sizes the window).
fn tcp_connect(to: SocketAddr, recv_buffer: Option<usize>) -> io::Result<mio::net::TcpStream> {
    use socket2::{Domain, Protocol as SockProto, Socket, Type};
    let socket = Socket::new(Domain::for_address(to), Type::STREAM, Some(SockProto::TCP))?;
    if let Some(bytes) = recv_buffer {
        socket.set_recv_buffer_size(bytes)?;
    }
    socket.set_nonblocking(true)?;
    match socket.connect(&to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(mio::net::TcpStream::from_std(socket.into()))
}
