//! A worker process's side of the bridge, as the Python SDK's `Worker` is: one subscription
//! per transceiver, kept up with backoff; one capacity ([`Slots`]) shared by all of them and
//! reported to each as `Load`; every offer it has room for attached and handed to the backend
//! as a [`Call`], on one `Multiplex` stream per subscription (or a `Session` stream each).
//!
//! ```text
//!  transceiver ──Dispatch──► Subscription ──slot free?──► attach ──► serve(Call) task
//!              ◄──Load, Reject (at_capacity, shutting_down, a failed attach's decline)
//! ```
//!
//! Shutting down (the `shutdown` watch turns true): each subscription reports the worker full,
//! then lets go of its calls without hanging up (each [`Call::released`] resolves; dropping
//! the call releases it), so the transceiver hands those callers to other workers, not back
//! here; then it closes its `Work` stream. Offers that still arrive are declined.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{sleep, sleep_until, Instant};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Endpoint;
use tonic::Status;
use tracing::{debug, info, info_span, warn, Instrument};
use voxgate_proto::bridge::Reject;

use crate::attach_attempt::{AttachAttempt, AttachFailure, AttachOutcome};
use crate::bridge::{Bridge, ConnectError};
use crate::call_event::CallEvent;
use crate::call_sender::CallSender;
use crate::multiplex::MultiplexClient;
use crate::offer::{AttachSettings, Offer};
use crate::session_call::attach_session;
use crate::slots::{Slot, Slots};
use crate::transport::Transport;
use crate::work_stream::{Registration, WorkSender, WorkStream};

/// Reconnect delays of a subscription: doubling from the first to the second.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(10));
/// At shutdown: time between reporting the worker full and letting go of its calls (so the
/// transceiver re-dispatches them elsewhere, not back here), and the most a drain may take.
const RELEASE_DELAY: Duration = Duration::from_millis(100);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);
/// Events waiting for a call's task: a slow task holds up its stream's reader, as a slow
/// reader holds up its own `Session` stream.
const CALL_QUEUE: usize = 256;
/// Downlink messages waiting for a stream (a `Multiplex` stream's are all its calls').
const DOWNLINK_QUEUE: usize = 256;
/// Declines waiting for the live subscription.
const DECLINE_QUEUE: usize = 64;

/// A worker: what it registers as, how it attaches, and its capacity.
#[derive(Debug)]
pub struct Worker {
    /// Its `worker_id` is the one registered.
    pub settings: AttachSettings,
    /// `Bearer <token>` ([`crate::bearer`]), sent with every call.
    pub authorization: Option<MetadataValue<Ascii>>,
    pub transport: Transport,
    pub slots: Arc<Slots>,
}

#[derive(Debug, thiserror::Error)]
enum WorkError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("{:?}: {}", .0.code(), .0.message())]
    Status(#[from] Status),
    #[error("the transceiver closed the worker stream")]
    Closed,
}

impl Worker {
    /// Keeps a subscription to `endpoint` alive until `shutdown` turns true, reconnecting with
    /// backoff, and runs `serve` on each call it accepts; then lets go of its calls (see the
    /// module doc) and returns. Calls of a broken subscription live on until they end.
    pub async fn serve<S, F>(
        self: Arc<Self>,
        endpoint: Endpoint,
        mut shutdown: watch::Receiver<bool>,
        serve: S,
    ) where
        S: Fn(Call) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let mut calls = JoinSet::new();
        // Declines of calls whose attach failed; the live subscription sends them.
        let (declines, mut declined) = mpsc::channel::<Reject>(DECLINE_QUEUE);
        // Turned true to make every call let go.
        let (release, _) = watch::channel(false);
        let mut backoff = BACKOFF.0;
        loop {
            let mut subscription = Subscription {
                worker: &self,
                endpoint: &endpoint,
                serve: &serve,
                calls: &mut calls,
                declines: &declines,
                declined: &mut declined,
                shutdown: shutdown.clone(),
                release: &release,
                registered: false,
                mux: None,
            };
            let result = subscription.run().await;
            if *shutdown.borrow() {
                break;
            }
            if subscription.registered {
                // Only failures to get registered back off further.
                backoff = BACKOFF.0;
            }
            if let Err(e) = result {
                warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "worker stream down");
            }
            tokio::select! {
                _ = sleep(backoff) => {}
                _ = stopped(&mut shutdown) => break,
            }
            backoff = (backoff * 2).min(BACKOFF.1);
        }
        release.send_replace(true);
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while calls.join_next().await.is_some() {}
        })
        .await;
    }
}

/// One life of a subscription: connect, register, serve offers until it breaks.
struct Subscription<'a, S> {
    worker: &'a Arc<Worker>,
    endpoint: &'a Endpoint,
    serve: &'a S,
    calls: &'a mut JoinSet<()>,
    declines: &'a mpsc::Sender<Reject>,
    declined: &'a mut mpsc::Receiver<Reject>,
    shutdown: watch::Receiver<bool>,
    release: &'a watch::Sender<bool>,
    registered: bool,
    /// This life's `Multiplex` stream, opened with its first call (calls of an earlier life
    /// keep theirs until they end).
    mux: Option<MultiplexClient<mpsc::Sender<CallEvent>>>,
}

impl<S, F> Subscription<'_, S>
where
    S: Fn(Call) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    /// `Ok` when shutdown was asked for, an error when the subscription broke.
    async fn run(&mut self) -> Result<(), WorkError> {
        let worker = self.worker;
        let authorization = worker.authorization.clone();
        let bridge = tokio::select! {
            b = Bridge::connect(self.endpoint, authorization) => b?,
            _ = stopped(&mut self.shutdown) => return Ok(()),
        };
        let mut load = worker.slots.watch();
        let registration = Registration {
            worker_id: worker.settings.worker_id.clone(),
            capacity: worker.slots.capacity(),
            active: *load.borrow_and_update(),
        };
        let mut work = tokio::select! {
            w = WorkStream::open(&bridge, &registration) => w?,
            _ = stopped(&mut self.shutdown) => return Ok(()),
        };
        self.registered = true;
        info!(
            worker_id = %registration.worker_id,
            capacity = registration.capacity,
            "registered"
        );
        let up = work.sender().clone();
        loop {
            tokio::select! {
                offer = work.next_offer() => {
                    let Some(offer) = offer? else { return Err(WorkError::Closed) };
                    self.dispatch(&bridge, &up, offer).await;
                }
                Ok(()) = load.changed() => {
                    let active = *load.borrow_and_update();
                    debug!(active, "load");
                    up.report_load(active).await;
                }
                Some(reject) = self.declined.recv() => up.reject(reject).await,
                Some(_) = self.calls.join_next(), if !self.calls.is_empty() => {}
                _ = stopped(&mut self.shutdown) => return self.drain(&up, &mut work).await,
            }
        }
    }

    /// Graceful exit: report the worker full, then let go of its calls without hanging up, so
    /// that the transceiver hands those callers to other workers, and leave once they are gone.
    /// Offers that still arrive are declined.
    async fn drain(&mut self, up: &WorkSender, work: &mut WorkStream) -> Result<(), WorkError> {
        let slots = &self.worker.slots;
        up.report_load(slots.capacity().max(slots.active())).await;
        info!(
            sessions = self.calls.len(),
            "shutting down: handing sessions back"
        );
        let release_at = Instant::now() + RELEASE_DELAY;
        let give_up = Instant::now() + DRAIN_TIMEOUT;
        loop {
            if *self.release.borrow() && self.calls.is_empty() {
                // Stay a moment, so the transceiver sees the calls go before the worker and
                // re-dispatches them to others, not to this (full) worker.
                sleep(RELEASE_DELAY).await;
                return Ok(());
            }
            tokio::select! {
                _ = sleep_until(release_at), if !*self.release.borrow() => {
                    self.release.send_replace(true);
                }
                Some(_) = self.calls.join_next(), if !self.calls.is_empty() => {}
                offer = work.next_offer() => match offer {
                    Ok(Some(offer)) => up.reject(offer.decline("shutting_down")).await,
                    Ok(None) | Err(_) => return Ok(()),
                },
                _ = sleep_until(give_up) => return Ok(()),
            }
        }
    }

    async fn dispatch(&mut self, bridge: &Bridge, up: &WorkSender, offer: Offer) {
        let worker = self.worker;
        let Some(slot) = worker.slots.try_acquire() else {
            // Another transceiver's call took the last slot, and this transceiver has not
            // heard yet. Report the load first, on the same ordered stream: the transceiver
            // then knows there is no room when the decline makes it queue the session again,
            // instead of offering it straight back and spending its dispatch attempts here.
            let active = worker.slots.active();
            up.report_load(active).await;
            info!(session_id = %offer.session_id(), active, "at capacity: rejecting dispatch");
            return up.reject(offer.decline("at_capacity")).await;
        };
        let (events_tx, events) = mpsc::channel(CALL_QUEUE);
        let attach = offer.attach(&worker.settings);
        let sender = match worker.transport {
            Transport::Session => attach_session(bridge, attach, events_tx, DOWNLINK_QUEUE),
            Transport::Multiplex => match self.multiplex(bridge).await {
                Ok(mux) => mux.attach(attach, events_tx).await,
                Err(status) => {
                    warn!(code = ?status.code(), message = status.message(), "cannot open the multiplex stream");
                    let reason = format!("attach failed: {:?}", status.code());
                    return up.reject(offer.decline(reason)).await;
                }
            },
        };
        let span = info_span!("session", id = %offer.session_id());
        let call = Call {
            attempt: AttachAttempt::new(offer, worker.transport),
            sender,
            events,
            declines: self.declines.clone(),
            released: self.release.subscribe(),
            over: false,
            _slot: slot,
        };
        self.calls.spawn((self.serve)(call).instrument(span));
    }

    /// This life's `Multiplex` stream, opened (again) if it has none that is open.
    async fn multiplex(
        &mut self,
        bridge: &Bridge,
    ) -> Result<&MultiplexClient<mpsc::Sender<CallEvent>>, Status> {
        if self.mux.as_ref().is_none_or(MultiplexClient::is_closed) {
            let mux = MultiplexClient::open(bridge, DOWNLINK_QUEUE).await?;
            info!("multiplex stream open");
            self.mux = Some(mux);
        }
        Ok(self.mux.as_ref().expect("opened above"))
    }
}

/// Why [`Call::attached`] did not attach.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("the session ended or was released before the attach was answered")]
    Ended,
    #[error("attach refused: {:?}: {}", .0.code(), .0.message())]
    Refused(Status),
    #[error("the stream broke before the attach was answered")]
    StreamBroke,
}

/// One accepted offer, from its attach to its end: what the backend serves. Its events come in
/// order through [`Call::next_event`], its downlink goes through [`Call::sender`]. Dropping a
/// call the transceiver has not closed releases it (as dropping a `Session` stream does): the
/// transceiver dispatches the caller again. The call holds its worker slot until dropped.
#[derive(Debug)]
pub struct Call {
    attempt: AttachAttempt,
    sender: CallSender,
    events: mpsc::Receiver<CallEvent>,
    declines: mpsc::Sender<Reject>,
    released: watch::Receiver<bool>,
    /// The transceiver closed the call, or its stream went: nothing to release.
    over: bool,
    _slot: Slot,
}

impl Call {
    pub fn offer(&self) -> &Offer {
        self.attempt.offer()
    }

    pub fn sender(&self) -> &CallSender {
        &self.sender
    }

    /// Waits for the answer to the attach. When the attach was refused or its stream went
    /// first, declines the offer (naming its attempt; see [`AttachAttempt`]) and says why.
    pub async fn attached(&mut self) -> Result<(), AttachError> {
        let outcome = loop {
            let Some(event) = self.events.recv().await else {
                break self.attempt.stream_broke();
            };
            self.over |= event.is_last();
            if let Some(outcome) = self.attempt.on_event(&event) {
                break outcome;
            }
        };
        let (failure, decline) = match outcome {
            AttachOutcome::Attached => {
                let offer = self.offer();
                info!(attempt = offer.attempt(), metadata = ?offer.metadata(), "session attached");
                return Ok(());
            }
            AttachOutcome::Ended => {
                self.over = true;
                info!("session channel closed");
                return Err(AttachError::Ended);
            }
            AttachOutcome::Failed { failure, decline } => (failure, decline),
        };
        self.over = true;
        let error = match failure {
            AttachFailure::Refused(status) => {
                warn!(code = ?status.code(), message = status.message(), "attach failed");
                AttachError::Refused(status)
            }
            AttachFailure::StreamBroke => {
                let stream = self.attempt.transport().stream_name();
                warn!("{stream} stream broke before the attach was answered: declining");
                AttachError::StreamBroke
            }
        };
        let _ = self.declines.send(decline).await;
        Err(error)
    }

    /// The call's next event; `None` once nothing more can come (after `Closed`, `StreamGone`).
    pub async fn next_event(&mut self) -> Option<CallEvent> {
        if self.over {
            return None;
        }
        let event = self.events.recv().await;
        self.over = event.as_ref().is_none_or(CallEvent::is_last);
        event
    }

    /// Resolves once the worker shuts down and lets go of its calls: the backend then returns
    /// (dropping the call releases it).
    pub fn released(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut released = self.released.clone();
        async move { stopped(&mut released).await }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.over {
            self.sender.release_now();
        }
    }
}

/// Resolves once shutdown is asked for (or the sender is gone, which means the same).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|&stop| stop).await;
}
