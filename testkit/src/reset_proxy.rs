//! An HTTP/2 proxy between a bot and its transceiver that can reset chosen streams on demand,
//! as an L7 proxy or load balancer in front of a transceiver does when it times a long-lived
//! stream out (Envoy's stream idle timeout, a gateway's maximum stream duration): the stream
//! dies with an `RST_STREAM`, while the connection and its other streams live on.
//!
//! It forwards every stream of every connection as is (headers, data, trailers), each bot
//! connection on a connection of its own to the transceiver. Streams whose path ends with the
//! proxy's suffix are reset in both directions (`CANCEL`) when the test calls
//! [`ResetProxy::reset_streams`]; streams opened after that call are not, until the next.
//! The bot's side of such a stream can be reset a while after the transceiver's, so that a
//! test can hold open the window in which the transceiver knows of the break and the bot not.
//!
//! Tests in other languages run it as the `h2-reset-proxy` binary.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::{Reason, RecvStream, SendStream};
use http::{Request, Response};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct ResetProxy {
    /// Where bots connect instead of the transceiver.
    pub addr: SocketAddr,
    /// Bumped by [`ResetProxy::reset_streams`]: a matching stream opened at an older
    /// generation is reset.
    generation: watch::Sender<u64>,
    /// Matching streams reset so far (each counted once, whichever direction saw it first).
    resets: Arc<AtomicUsize>,
    /// Runs the proxy; dropping it stops every connection.
    _runtime: tokio::runtime::Runtime,
}

impl ResetProxy {
    /// A proxy in front of `upstream` whose streams with a path ending in `suffix` can be reset,
    /// the bot's side of each `bot_side_after` after the transceiver's.
    pub fn start(
        upstream: SocketAddr,
        suffix: &'static str,
        bot_side_after: Duration,
    ) -> ResetProxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("proxy runtime");
        let listener = runtime
            .block_on(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .expect("proxy listener");
        let addr = listener.local_addr().expect("proxy address");
        let (generation, watch) = watch::channel(0u64);
        let resets = Arc::new(AtomicUsize::new(0));
        let route = Route {
            upstream,
            suffix,
            bot_side_after,
            generation: watch,
            resets: Arc::clone(&resets),
        };
        runtime.spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let route = route.clone();
                tokio::spawn(async move {
                    if let Err(e) = route.serve(down).await {
                        eprintln!("reset proxy: connection ended: {e}");
                    }
                });
            }
        });
        ResetProxy {
            addr,
            generation,
            resets,
            _runtime: runtime,
        }
    }

    /// Resets every matching stream open now.
    pub fn reset_streams(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    /// Matching streams reset so far.
    pub fn resets(&self) -> usize {
        self.resets.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct Route {
    upstream: SocketAddr,
    suffix: &'static str,
    bot_side_after: Duration,
    generation: watch::Receiver<u64>,
    resets: Arc<AtomicUsize>,
}

/// Why a proxied connection ended.
type Failure = Box<dyn std::error::Error + Send + Sync>;

impl Route {
    /// Proxies one bot connection over a connection of its own to the transceiver.
    async fn serve(&self, down: TcpStream) -> Result<(), Failure> {
        let up = TcpStream::connect(self.upstream).await?;
        let (client, connection) = h2::client::handshake(up).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut server = h2::server::handshake(down).await?;
        while let Some(accepted) = server.accept().await {
            let (request, respond) = accepted?;
            let (parts, body) = request.into_parts();
            let matches = parts.uri.path().ends_with(self.suffix);
            let reset =
                matches.then(|| Reset::armed(self.generation.clone(), Arc::clone(&self.resets)));
            let bot_side_after = if matches {
                self.bot_side_after
            } else {
                Duration::ZERO
            };
            let mut client = client.clone().ready().await?;
            let (response, up_send) =
                client.send_request(Request::from_parts(parts, ()), body.is_end_stream())?;
            tokio::spawn(pump(body, up_send, reset.clone(), Duration::ZERO));
            tokio::spawn(respond_with(response, respond, reset, bot_side_after));
        }
        Ok(())
    }
}

/// Forwards the transceiver's response to the bot.
async fn respond_with(
    response: h2::client::ResponseFuture,
    mut respond: h2::server::SendResponse<Bytes>,
    reset: Option<Reset>,
    hold: Duration,
) {
    let response = match response.await {
        Ok(r) => r,
        Err(e) => {
            respond.send_reset(e.reason().unwrap_or(Reason::CANCEL));
            return;
        }
    };
    let (parts, body) = response.into_parts();
    let ends = body.is_end_stream();
    let Ok(send) = respond.send_response(Response::from_parts(parts, ()), ends) else {
        return;
    };
    if !ends {
        pump(body, send, reset, hold).await;
    }
}

/// Copies one direction of a stream, data then trailers, until it ends, breaks or is reset;
/// a break or a reset reaches `to` after `hold`.
async fn pump(
    mut from: RecvStream,
    mut to: SendStream<Bytes>,
    mut reset: Option<Reset>,
    hold: Duration,
) {
    let reason = loop {
        tokio::select! {
            data = from.data() => match data {
                Some(Ok(chunk)) => {
                    // No backpressure: h2 buffers what the peer's window cannot take yet,
                    // which is fine for a test's few calls, not for a real proxy.
                    let _ = from.flow_control().release_capacity(chunk.len());
                    if to.send_data(chunk, false).is_err() {
                        return;
                    }
                }
                Some(Err(e)) => break e.reason().unwrap_or(Reason::CANCEL),
                None => return finish(from, to).await,
            },
            () = Reset::fired(&mut reset) => break Reason::CANCEL,
        }
    };
    tokio::time::sleep(hold).await;
    to.send_reset(reason);
}

/// The end of one direction of a stream: its trailers, or an empty last frame.
async fn finish(mut from: RecvStream, mut to: SendStream<Bytes>) {
    match from.trailers().await {
        Ok(Some(trailers)) => {
            let _ = to.send_trailers(trailers);
        }
        Ok(None) => {
            let _ = to.send_data(Bytes::new(), true);
        }
        Err(e) => to.send_reset(e.reason().unwrap_or(Reason::CANCEL)),
    }
}

/// A matching stream's trigger: the generation it was opened at.
#[derive(Clone)]
struct Reset {
    opened_at: u64,
    generation: watch::Receiver<u64>,
    counted: Arc<std::sync::atomic::AtomicBool>,
    resets: Arc<AtomicUsize>,
}

impl Reset {
    fn armed(generation: watch::Receiver<u64>, resets: Arc<AtomicUsize>) -> Reset {
        let opened_at = *generation.borrow();
        Reset {
            opened_at,
            generation,
            counted: Arc::default(),
            resets,
        }
    }

    /// Resolves when the test resets the streams this one belongs to; never without a trigger.
    async fn fired(reset: &mut Option<Reset>) {
        let Some(r) = reset else {
            return std::future::pending().await;
        };
        let opened_at = r.opened_at;
        if r.generation.wait_for(|g| *g > opened_at).await.is_err() {
            return std::future::pending().await; // the proxy is going away
        }
        if !r.counted.swap(true, Ordering::SeqCst) {
            r.resets.fetch_add(1, Ordering::SeqCst);
        }
    }
}
