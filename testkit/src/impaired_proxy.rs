//! A UDP proxy between WebRTC clients (a browser) and one media port that loses and delays
//! datagrams on purpose, each direction by its own [`Impairment`], and that a test can cut.
//!
//! Like a NAT, each client address gets an upstream socket of its own: Chromium checks from
//! every address it has, and one shared upstream would hand one candidate's answers to
//! another. The transceiver sees one caller address per client candidate, all of them the
//! proxy's. Tests point the answer's candidates at [`ImpairedProxy::port`].
//!
//! The logic is [`ImpairedPath`]'s (Sans-IO, one per direction); this is the thread, the
//! sockets and the clock. It waits in `mio` until a socket is readable or the next delayed
//! datagram is due, so a delayed datagram leaves within the poll's precision (well under a
//! millisecond on an idle loopback), and it never busy-waits.

use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};

use crate::impaired_path::{ImpairedPath, Impairment};

/// The proxy's client-facing socket; upstream sockets are `Token(1 + flow)`.
const FRONT: Token = Token(0);
/// The longest the thread sleeps before it looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(50);
/// Client addresses (browser candidates) one proxy serves; more are dropped and counted.
const MAX_FLOWS: usize = 64;

/// What the proxy has done so far, per direction ("up": client → server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    /// Datagrams forwarded (released after their delay).
    pub up_forwarded: u64,
    pub down_forwarded: u64,
    /// RTP datagrams seen and dropped on purpose.
    pub up_rtp_seen: u64,
    pub up_rtp_dropped: u64,
    pub down_rtp_seen: u64,
    pub down_rtp_dropped: u64,
    /// Datagrams dropped because the path was cut, or from one client address too many.
    pub cut_dropped: u64,
    pub flows_refused: u64,
    /// Client addresses served.
    pub flows: usize,
}

/// See the module docs. Stops its thread on drop.
pub struct ImpairedProxy {
    /// The port clients send to, on 127.0.0.1.
    pub port: u16,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    counts: Arc<Mutex<ProxyCounts>>,
    thread: Option<JoinHandle<()>>,
}

impl ImpairedProxy {
    /// A proxy to `upstream` that forwards as is.
    pub fn clean(upstream: SocketAddr) -> io::Result<ImpairedProxy> {
        Self::start(upstream, Impairment::default(), Impairment::default(), 0)
    }

    /// A proxy to `upstream` that treats client → server datagrams by `up` and server → client
    /// ones by `down`; `seed` fixes which datagrams are lost.
    pub fn start(
        upstream: SocketAddr,
        up: Impairment,
        down: Impairment,
        seed: u64,
    ) -> io::Result<ImpairedProxy> {
        let front = std::net::UdpSocket::bind("127.0.0.1:0")?;
        front.set_nonblocking(true)?;
        let port = front.local_addr()?.port();
        let (cut, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let counts = Arc::new(Mutex::new(ProxyCounts::default()));
        let mut run = ProxyThread {
            poll: Poll::new()?,
            front: UdpSocket::from_std(front),
            upstream,
            flows: Vec::new(),
            up: ImpairedPath::new(up, seed),
            // A different stream of drops for the other direction.
            down: ImpairedPath::new(down, seed ^ 0x9e37_79b9_7f4a_7c15),
            counts: ProxyCounts::default(),
        };
        run.poll
            .registry()
            .register(&mut run.front, FRONT, Interest::READABLE)?;
        let thread = {
            let (cut, stop, counts) = (cut.clone(), stop.clone(), counts.clone());
            std::thread::Builder::new()
                .name("impaired-proxy".into())
                .spawn(move || {
                    if let Err(e) = run.run(&cut, &stop, &counts) {
                        tracing::warn!("impaired proxy stopped: {e}");
                    }
                })?
        };
        Ok(ImpairedProxy {
            port,
            cut,
            stop,
            counts,
            thread: Some(thread),
        })
    }

    /// Drops everything from now on, both ways (or forwards again, with `false`).
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::Relaxed);
    }

    pub fn counts(&self) -> ProxyCounts {
        *self.counts.lock().expect("counts")
    }
}

impl Drop for ImpairedProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct ProxyThread {
    poll: Poll,
    front: UdpSocket,
    upstream: SocketAddr,
    /// Client address and its upstream socket, by flow index.
    flows: Vec<(SocketAddr, UdpSocket)>,
    up: ImpairedPath,
    down: ImpairedPath,
    counts: ProxyCounts,
}

impl ProxyThread {
    fn run(
        &mut self,
        cut: &AtomicBool,
        stop: &AtomicBool,
        shared: &Mutex<ProxyCounts>,
    ) -> io::Result<()> {
        let mut events = Events::with_capacity(64);
        let mut buf = vec![0u8; 65_536];
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let next = [self.up.poll_timeout(), self.down.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let wait = next.map_or(STOP_CHECK, |at| {
                at.saturating_duration_since(now).min(STOP_CHECK)
            });
            match self.poll.poll(&mut events, Some(wait)) {
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                r => r?,
            }
            let cut = cut.load(Ordering::Relaxed);
            for event in events.iter() {
                match event.token() {
                    FRONT => self.read_front(&mut buf, cut)?,
                    Token(t) => self.read_upstream(t - 1, &mut buf, cut),
                }
            }
            self.release(Instant::now());
            self.counts.up_rtp_seen = self.up.rtp_seen();
            self.counts.up_rtp_dropped = self.up.rtp_dropped();
            self.counts.down_rtp_seen = self.down.rtp_seen();
            self.counts.down_rtp_dropped = self.down.rtp_dropped();
            self.counts.flows = self.flows.len();
            *shared.lock().expect("counts") = self.counts;
        }
        Ok(())
    }

    /// Everything the clients sent, into the upstream path.
    fn read_front(&mut self, buf: &mut [u8], cut: bool) -> io::Result<()> {
        loop {
            let (n, from) = match self.front.recv_from(buf) {
                Ok(r) => r,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                // An ICMP error for an earlier send: nothing to do with this read.
                Err(_) => continue,
            };
            if cut {
                self.counts.cut_dropped += 1;
                continue;
            }
            let flow = match self.flows.iter().position(|(a, _)| *a == from) {
                Some(i) => i,
                None if self.flows.len() >= MAX_FLOWS => {
                    self.counts.flows_refused += 1;
                    continue;
                }
                None => self.open_flow(from)?,
            };
            self.up.push(Instant::now(), flow, &buf[..n]);
        }
    }

    fn open_flow(&mut self, client: SocketAddr) -> io::Result<usize> {
        let std_sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
        std_sock.connect(self.upstream)?;
        std_sock.set_nonblocking(true)?;
        let mut sock = UdpSocket::from_std(std_sock);
        let flow = self.flows.len();
        self.poll
            .registry()
            .register(&mut sock, Token(1 + flow), Interest::READABLE)?;
        self.flows.push((client, sock));
        Ok(flow)
    }

    /// Everything the server sent to one flow, into the downstream path.
    fn read_upstream(&mut self, flow: usize, buf: &mut [u8], cut: bool) {
        let Some((_, sock)) = self.flows.get(flow) else {
            return;
        };
        loop {
            match sock.recv(buf) {
                Ok(n) if cut => {
                    let _ = n;
                    self.counts.cut_dropped += 1;
                }
                Ok(n) => {
                    self.down.push(Instant::now(), flow, &buf[..n]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => return,
            }
        }
    }

    /// Sends whatever has waited out its delay.
    fn release(&mut self, now: Instant) {
        let (flows, front, counts) = (&self.flows, &self.front, &mut self.counts);
        self.up.release_due(now, |flow, d| {
            if flows[flow].1.send(d).is_ok() {
                counts.up_forwarded += 1;
            }
        });
        self.down.release_due(now, |flow, d| {
            if front.send_to(d, flows[flow].0).is_ok() {
                counts.down_forwarded += 1;
            }
        });
    }
}
