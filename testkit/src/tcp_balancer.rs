//! A TCP load balancer in front of several transceivers' signaling ports, for tests where a
//! client must find "whichever transceiver takes it" at one address (a resume after its
//! transceiver died, a rolling deploy).
//!
//! Each new connection goes to the first upstream, in the current preference order, that
//! accepts it (a dead upstream refuses at once, so a killed transceiver is skipped as a real
//! balancer's failed health check would); the bytes are then copied both ways by two threads.
//! [`TcpBalancer::set_upstreams`] is the pool changing (a draining pod leaving the Service's
//! endpoints): later connections follow it, open ones are closed (keep-alive connections would
//! otherwise stay pinned to the old upstream). Threads started here inherit the network
//! namespace of the thread that calls [`TcpBalancer::start`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a connection attempt to one upstream may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A running balancer; it runs until the process ends.
pub struct TcpBalancer {
    addr: SocketAddr,
    upstreams: Arc<Mutex<Vec<SocketAddr>>>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl TcpBalancer {
    /// Listens on `listen` (port 0: any) and forwards to `upstreams`, first one preferred.
    pub fn start(listen: SocketAddr, upstreams: Vec<SocketAddr>) -> io::Result<TcpBalancer> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let upstreams = Arc::new(Mutex::new(upstreams));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (ups, conns) = (upstreams.clone(), open.clone());
        std::thread::spawn(move || {
            for down in listener.incoming().map_while(Result::ok) {
                let order = ups.lock().unwrap().clone();
                let Some(up) = order
                    .iter()
                    .find_map(|to| TcpStream::connect_timeout(to, CONNECT_TIMEOUT).ok())
                else {
                    continue; // nobody takes it: the client sees its connection close
                };
                if let Ok(d) = down.try_clone() {
                    conns.lock().unwrap().push(d);
                }
                splice(down, up);
            }
        });
        Ok(TcpBalancer {
            addr,
            upstreams,
            open,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` + [`TcpBalancer::addr`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// New connections go to `upstreams` (first preferred) from now on; open ones are closed.
    pub fn set_upstreams(&self, upstreams: Vec<SocketAddr>) {
        *self.upstreams.lock().unwrap() = upstreams;
        for c in self.open.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Sends every new connection to `to` alone.
    pub fn switch(&self, to: SocketAddr) {
        self.set_upstreams(vec![to]);
    }
}

/// Copies bytes both ways between `a` and `b` until either side closes.
fn splice(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    for (mut from, mut to) in [(a, b2), (b, a2)] {
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Both);
        });
    }
}
