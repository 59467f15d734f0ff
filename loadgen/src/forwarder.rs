//! The ceiling the relay is measured against: a UDP forwarder with the relay's batched I/O
//! (the same `udp-batch` crate; edge-triggered `mio` readiness, `recvmmsg` / `sendmmsg` of
//! [`BATCH`] datagrams, preallocated buffers) and nothing else: no parsing, no flow table, no
//! header, every datagram goes unchanged to one fixed address, zero-copy from the receive
//! buffers ([`RecvBatch::forward`]).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::Context as _;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use voxgate_udp_batch::{RecvBatch, DEFAULT_SLOT};

use crate::addr_arg::parse_addr;
use crate::socket_buffers::set_buffers;

/// Datagrams per system call, as in the relay's workers.
pub const BATCH: usize = 32;

#[derive(clap::Args, Debug, Clone)]
pub struct ForwarderArgs {
    /// Where datagrams come in (`IP:PORT`, or a port on 127.0.0.1).
    #[arg(long, value_parser = parse_addr)]
    pub listen: SocketAddr,
    /// Where every datagram goes.
    #[arg(long, value_parser = parse_addr)]
    pub to: SocketAddr,
    /// Pin the forwarding thread to this core.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Socket buffer size to ask for (the relay's default).
    #[arg(long, default_value_t = 4 << 20)]
    pub socket_buffer_bytes: usize,
}

/// Forwards until the process is killed.
pub fn run(a: &ForwarderArgs) -> anyhow::Result<()> {
    if let Some(core) = a.cpu {
        crate::proc_stat::pin_current_thread(core);
    }
    let rx = UdpSocket::bind(a.listen).with_context(|| format!("bind {}", a.listen))?;
    let unspecified: SocketAddr = if a.to.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let tx = UdpSocket::bind(unspecified)?;
    rx.set_nonblocking(true)?;
    tx.set_nonblocking(true)?;
    set_buffers(&rx, a.socket_buffer_bytes);
    set_buffers(&tx, a.socket_buffer_bytes);
    let mut poll = Poll::new()?;
    let fd = rx.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), Token(0), Interest::READABLE)?;
    let mut events = Events::with_capacity(8);
    let mut batch = RecvBatch::new(BATCH, DEFAULT_SLOT);
    eprintln!("forwarder: {} -> {}", rx.local_addr()?, a.to);
    loop {
        if let Err(e) = poll.poll(&mut events, Some(Duration::from_secs(1))) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        // Edge-triggered: drain until the socket is empty.
        loop {
            let n = match batch.recv(&rx) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e.into()),
            };
            if n > 0 {
                batch.forward(&tx, a.to, a.to.is_ipv6())?;
            }
            if n < BATCH {
                break;
            }
        }
    }
}
