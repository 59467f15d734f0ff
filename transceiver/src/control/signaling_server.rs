//! The signaling listener: accepts TCP connections and serves the [`super::signaling`] router
//! over HTTP/1.1 or HTTP/2 (cleartext, detected per connection), with the slow-client limits
//! that `axum::serve` lacks.
//!
//! - A connection must deliver the headers of its first request within the header timeout,
//!   whichever protocol it speaks (a client that connects and sends nothing, or dribbles a
//!   request line, is closed). Later HTTP/1.1 requests on a kept-alive connection get the
//!   same limit from hyper's `header_read_timeout`.
//! - Each request carries its peer address (`ConnectInfo<SocketAddr>`), for per-IP limits.
//! - On shutdown, the listener stops accepting and open connections finish their requests.
//!
//! Bodies are timed by the router (`signaling::read_body_in_time`), since only it knows when
//! a handler wants one.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;

use crate::metrics::Metrics;

/// Longest the listener waits for open connections after shutdown was asked for.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves `app` on `listener` until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(64);
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before accept: back off
                    // a moment rather than spin.
                    tracing::debug!(error = %e, "signaling accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let first_request = Arc::new(AtomicBool::new(false));
        let service = {
            let app = app.clone();
            let first_request = first_request.clone();
            tower::service_fn(move |mut req: hyper::Request<Incoming>| {
                first_request.store(true, Ordering::Relaxed);
                req.extensions_mut().insert(ConnectInfo(peer));
                app.clone().oneshot(req)
            })
        };
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service))
            .into_owned();
        let conn = graceful.watch(conn);
        let metrics = metrics.clone();
        tokio::spawn(async move {
            tokio::pin!(conn);
            let result = tokio::select! {
                r = &mut conn => r,
                _ = tokio::time::sleep(header_timeout) => {
                    if first_request.load(Ordering::Relaxed) {
                        conn.await
                    } else {
                        // Dropping the connection closes the socket.
                        metrics.signaling_rejected("header_timeout");
                        tracing::debug!(%peer, "signaling connection sent no complete request in time");
                        return;
                    }
                }
            };
            if let Err(e) = result {
                if is_header_timeout(e.as_ref()) {
                    metrics.signaling_rejected("header_timeout");
                }
                tracing::debug!(%peer, error = %e, "signaling connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("signaling connections still open after the shutdown grace; closing them");
    }
}

fn is_header_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_timeout)
}

/// The peer of a request, as recorded by [`serve`].
pub fn peer_addr(extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| *a)
}
