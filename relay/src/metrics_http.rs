//! The `/metrics` HTTP endpoint: one thread, one mio poll, many connections at once.
//!
//! A scrape is a tiny request and a response of a few kilobytes, so one non-blocking loop
//! serves any number of scrapers concurrently; nothing a client does can hold it. Every
//! connection has [`CONNECTION_DEADLINE`] to send its request and take its response, then it
//! is closed (`reason="timeout"`). At most [`MAX_CONNECTIONS`] are open: a new one past that
//! closes the *oldest* (`reason="evicted"`), so a crowd of slow or idle clients cannot lock a
//! prompt scraper out: a scrape that sends its request at once is answered within one turn
//! of the loop, long before it would become the oldest. A request that does not fit
//! [`MAX_REQUEST_BYTES`] is refused (`reason="bad_request"`). Refusals are counted in
//! `voxgate_relay_scrapes_refused_total{reason}`.
//!
//! No authentication, on purpose: the endpoint exposes only counters and gauges labelled by
//! worker, direction, socket, reason, state, queue and result; no client or transceiver
//! address, no ufrag, no key, no Redis URL. That is what a public Prometheus target may show,
//! so a public bind (as in deploy/k8s, scraped on the pod IP) needs no token. A test in
//! `relay/tests/metrics_endpoint.rs` checks that no client address leaks into it.
//!
//! The body is classic Prometheus text unless the `Accept` header prefers OpenMetrics (as
//! Prometheus does), with the standard `process_*` metrics (`voxgate-metrics-exposition`).

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener as MioListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use voxgate_metrics_exposition::Format;

use crate::metrics::{Metrics, ScrapeRefusal};

/// Time a connection has, from accept, to send its request and read the response.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);
/// Connections open at once; a new one past this closes the oldest.
pub const MAX_CONNECTIONS: usize = 256;
/// Longest request accepted (request line and headers).
pub const MAX_REQUEST_BYTES: usize = 2048;

const LISTENER: Token = Token(usize::MAX);

struct Conn {
    stream: TcpStream,
    deadline: Instant,
    request: Vec<u8>,
    /// The response, once the request is complete; `written` bytes of it are sent.
    response: Option<Vec<u8>>,
    written: usize,
}

/// What to do with a connection after an event.
enum Next {
    Keep,
    Close,
    Refuse(ScrapeRefusal),
}

/// Serves `GET /metrics` on `listener` forever (the thread dies with the process).
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    if let Err(e) = run(listener, &metrics) {
        tracing::error!(error = %e, "metrics endpoint stopped");
    }
}

fn run(listener: TcpListener, metrics: &Metrics) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let mut listener = MioListener::from_std(listener);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(128);
    let mut conns: HashMap<Token, Conn> = HashMap::with_capacity(MAX_CONNECTIONS);
    // Accept order, for eviction (entries of closed connections are skipped).
    let mut order: VecDeque<Token> = VecDeque::with_capacity(MAX_CONNECTIONS);
    let mut next_token = 0usize;
    loop {
        let timeout = conns
            .values()
            .map(|c| c.deadline)
            .min()
            .map(|d| d.saturating_duration_since(Instant::now()));
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        for event in events.iter() {
            if event.token() == LISTENER {
                accept_all(
                    &mut listener,
                    &poll,
                    &mut conns,
                    &mut order,
                    &mut next_token,
                    metrics,
                );
                continue;
            }
            let token = event.token();
            let Some(conn) = conns.get_mut(&token) else {
                continue;
            };
            match conn.advance(metrics) {
                Next::Keep => {}
                Next::Close => close(&poll, &mut conns, token),
                Next::Refuse(reason) => {
                    metrics.scrape_refused(reason);
                    close(&poll, &mut conns, token);
                }
            }
        }
        let now = Instant::now();
        let late: Vec<Token> = conns
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for token in late {
            metrics.scrape_refused(ScrapeRefusal::Timeout);
            close(&poll, &mut conns, token);
        }
        order.retain(|t| conns.contains_key(t));
    }
}

fn accept_all(
    listener: &mut MioListener,
    poll: &Poll,
    conns: &mut HashMap<Token, Conn>,
    order: &mut VecDeque<Token>,
    next_token: &mut usize,
    metrics: &Metrics,
) {
    loop {
        let mut stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                // EMFILE and friends: try again on the next readiness event.
                tracing::debug!(error = %e, "metrics accept failed");
                return;
            }
        };
        while conns.len() >= MAX_CONNECTIONS {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            if conns.contains_key(&oldest) {
                metrics.scrape_refused(ScrapeRefusal::Evicted);
                close(poll, conns, oldest);
            }
        }
        let token = Token(*next_token);
        *next_token = (*next_token + 1) % (usize::MAX - 1);
        if poll
            .registry()
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            .is_err()
        {
            continue;
        }
        conns.insert(
            token,
            Conn {
                stream,
                deadline: Instant::now() + CONNECTION_DEADLINE,
                request: Vec::with_capacity(256),
                response: None,
                written: 0,
            },
        );
        order.push_back(token);
    }
}

fn close(poll: &Poll, conns: &mut HashMap<Token, Conn>, token: Token) {
    if let Some(mut conn) = conns.remove(&token) {
        let _ = poll.registry().deregister(&mut conn.stream);
    }
}

impl Conn {
    /// Reads what arrived, answers once the request is complete, writes what fits.
    fn advance(&mut self, metrics: &Metrics) -> Next {
        if self.response.is_none() {
            let mut buf = [0u8; 512];
            loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => return Next::Close,
                    Ok(n) => {
                        if self.request.len() + n > MAX_REQUEST_BYTES {
                            return Next::Refuse(ScrapeRefusal::BadRequest);
                        }
                        self.request.extend_from_slice(&buf[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
            }
            if !self.request.windows(4).any(|w| w == b"\r\n\r\n") {
                return Next::Keep;
            }
            self.response = Some(respond(&self.request, metrics));
        }
        let Some(response) = &self.response else {
            return Next::Keep;
        };
        while self.written < response.len() {
            match self.stream.write(&response[self.written..]) {
                Ok(0) => return Next::Close,
                Ok(n) => self.written += n,
                // Mio reports writability edge-triggered; the socket is registered for both.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        Next::Close
    }
}

fn respond(request: &[u8], metrics: &Metrics) -> Vec<u8> {
    let path_ok = request.starts_with(b"GET /metrics ") || request.starts_with(b"GET /metrics?");
    let (status, content_type, body) = if path_ok {
        let format = Format::negotiate(header(request, "accept"));
        (
            "200 OK",
            format.content_type(),
            voxgate_metrics_exposition::render(&metrics.encode(), format),
        )
    } else {
        ("404 Not Found", "text/plain", "try /metrics\n".to_owned())
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The value of header `name` (lower case) in a complete request head, if present and UTF-8.
fn header<'a>(request: &'a [u8], name: &str) -> Option<&'a str> {
    let head = std::str::from_utf8(request).ok()?;
    head.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_is_found_in_any_case_and_only_in_the_head() {
        let req =
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nACCEPT: application/openmetrics-text\r\n\r\n";
        assert_eq!(header(req, "accept"), Some("application/openmetrics-text"));
        assert_eq!(header(b"GET /metrics HTTP/1.1\r\n\r\n", "accept"), None);
        assert_eq!(header(b"GET /accept: x HTTP/1.1\r\n\r\n", "accept"), None);
        assert_eq!(
            header(b"GET / HTTP/1.1\r\nAccept: \xff\r\n\r\n", "accept"),
            None
        );
    }

    #[test]
    fn scrape_without_accept_is_classic_text_with_process_metrics() {
        let metrics = Metrics::new();
        let resp = respond(b"GET /metrics HTTP/1.1\r\n\r\n", &metrics);
        let text = String::from_utf8(resp).unwrap();
        assert!(
            text.contains("Content-Type: text/plain; version=0.0.4"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE voxgate_relay_scrapes_refused_total counter"),
            "{text}"
        );
        assert!(text.contains("\nprocess_resident_memory_bytes "), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
    }
}
