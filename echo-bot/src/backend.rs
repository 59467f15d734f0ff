//! The gRPC side of the echo bot: one worker subscription per transceiver, one task per
//! session, the sessions on one `Multiplex` stream per subscription (see `mux`). All decisions
//! are made by [`Utterances`]; this module moves messages and time.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{sleep, sleep_until, Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status, Streaming};
use tracing::{debug, info, info_span, warn, Instrument};
use voxgate_echo_bot::{Action, Utterances, VadConfig};
use voxgate_proto::bridge::bridge_client::BridgeClient;
use voxgate_proto::bridge::{
    data_message, downlink, session_event, uplink, worker_command, worker_message, Attach,
    AudioChunk, AudioMode, Clear, DataMessage, Dispatch, Load, Register, Reject, Uplink,
    WorkerCommand, WorkerMessage,
};

use crate::mux::{ChannelEvent, ChannelHandle, Mux};

/// Reconnect delays of the worker subscription: doubling from the first to the second.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(10));
/// Reply audio is sent in chunks of this length (the transceiver paces it, so all at once).
const CHUNK: Duration = Duration::from_millis(100);
/// PlaybackProgress period asked for at attach (finer than the default 200 ms, for barge-in).
const PROGRESS_INTERVAL_MS: u32 = 100;
/// At shutdown: time between reporting the worker full and letting go of its sessions (so the
/// transceiver re-dispatches them elsewhere, not back here), and the most a drain may take.
const RELEASE_DELAY: Duration = Duration::from_millis(100);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// What every worker subscription and session of this process shares.
#[derive(Debug)]
pub struct Bot {
    pub worker_id: String,
    /// `Bearer <token>`, ready to be sent as `authorization` metadata.
    pub authorization: Option<MetadataValue<Ascii>>,
    pub sample_rate_hz: u32,
    pub vad: VadConfig,
    pub slots: Arc<Slots>,
}

impl Bot {
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(value) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        request
    }
}

/// Sessions owned at once, across all transceivers, against one capacity. Every worker
/// subscription watches the count and reports it as `Load`.
#[derive(Debug)]
pub struct Slots {
    capacity: u32,
    active: watch::Sender<u32>,
}

impl Slots {
    pub fn new(capacity: u32) -> Self {
        Slots {
            capacity,
            active: watch::Sender::new(0),
        }
    }

    /// Takes a slot if there is room; it is given back when the guard drops.
    fn try_acquire(self: &Arc<Self>) -> Option<Slot> {
        let capacity = self.capacity;
        self.active
            .send_if_modified(|n| {
                let room = *n < capacity;
                if room {
                    *n += 1;
                }
                room
            })
            .then(|| Slot(Arc::clone(self)))
    }
}

/// One owned session's share of the capacity.
struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[derive(Debug, thiserror::Error)]
enum WorkError {
    #[error("connect: {}", error_chain(.0))]
    Connect(#[from] tonic::transport::Error),
    #[error("{:?}: {}", .0.code(), .0.message())]
    Status(#[from] Status),
    #[error("the transceiver closed the worker stream")]
    Closed,
}

/// Keeps a worker subscription to `endpoint` (an `http://host:port` URL) alive until
/// `shutdown` turns true, reconnecting with backoff; then lets go of its sessions (see
/// [`WorkerLink::drain`]) and returns.
pub async fn run_worker(endpoint: Endpoint, bot: Arc<Bot>, mut shutdown: watch::Receiver<bool>) {
    let mut sessions = JoinSet::new();
    // Sessions that could not attach; the live subscription reports them as Reject.
    let (reject_tx, mut reject_rx) = mpsc::channel::<Reject>(64);
    // Turned true to make every session task drop its stream.
    let (release, _) = watch::channel(false);
    let mut backoff = BACKOFF.0;
    loop {
        let mut link = WorkerLink {
            endpoint: &endpoint,
            bot: &bot,
            sessions: &mut sessions,
            reject_tx: &reject_tx,
            reject_rx: &mut reject_rx,
            shutdown: shutdown.clone(),
            release: &release,
            registered: false,
            mux: None,
        };
        let result = link.run().await;
        if *shutdown.borrow() {
            break;
        }
        if link.registered {
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
        while sessions.join_next().await.is_some() {}
    })
    .await;
}

/// One life of the worker subscription: connect, register, serve dispatches until it breaks.
struct WorkerLink<'a> {
    endpoint: &'a Endpoint,
    bot: &'a Arc<Bot>,
    sessions: &'a mut JoinSet<()>,
    reject_tx: &'a mpsc::Sender<Reject>,
    reject_rx: &'a mut mpsc::Receiver<Reject>,
    shutdown: watch::Receiver<bool>,
    release: &'a watch::Sender<bool>,
    registered: bool,
    /// This life's `Multiplex` stream, opened with its first session (sessions of an earlier
    /// life keep theirs until they end).
    mux: Option<Mux>,
}

impl WorkerLink<'_> {
    /// Returns `Ok` when shutdown was asked for, an error when the subscription broke.
    async fn run(&mut self) -> Result<(), WorkError> {
        let channel = tokio::select! {
            c = self.endpoint.connect() => c?,
            _ = stopped(&mut self.shutdown) => return Ok(()),
        };
        let (tx, rx) = mpsc::channel::<WorkerMessage>(64);
        let mut load = self.bot.slots.active.subscribe();
        let active = *load.borrow_and_update();
        send_work(
            &tx,
            worker_message::Kind::Register(Register {
                worker_id: self.bot.worker_id.clone(),
                capacity: self.bot.slots.capacity,
            }),
        )
        .await;
        if active > 0 {
            // Sessions that outlived the previous subscription still count.
            report_load(&tx, active).await;
        }
        let mut client = BridgeClient::new(channel.clone());
        let mut commands = tokio::select! {
            call = client.work(self.bot.request(ReceiverStream::new(rx))) => call?.into_inner(),
            _ = stopped(&mut self.shutdown) => return Ok(()),
        };
        self.registered = true;
        info!(
            worker_id = %self.bot.worker_id,
            capacity = self.bot.slots.capacity,
            "registered"
        );
        loop {
            tokio::select! {
                command = commands.message() => {
                    let Some(command) = command? else { return Err(WorkError::Closed) };
                    if let Some(worker_command::Kind::Dispatch(d)) = command.kind {
                        self.dispatch(&channel, &tx, d).await;
                    }
                }
                Ok(()) = load.changed() => {
                    let active = *load.borrow_and_update();
                    debug!(active, "load");
                    report_load(&tx, active).await;
                }
                Some(reject) = self.reject_rx.recv() => {
                    send_work(&tx, worker_message::Kind::Reject(reject)).await;
                }
                Some(_) = self.sessions.join_next(), if !self.sessions.is_empty() => {}
                _ = stopped(&mut self.shutdown) => return self.drain(&tx, &mut commands).await,
            }
        }
    }

    /// Graceful exit: report the worker full, then let go of its sessions without hanging up,
    /// so that the transceiver hands those callers to other workers, and leave once they are
    /// gone. Dispatches that still arrive are rejected.
    async fn drain(
        &mut self,
        tx: &mpsc::Sender<WorkerMessage>,
        commands: &mut Streaming<WorkerCommand>,
    ) -> Result<(), WorkError> {
        let active = self.bot.slots.capacity.max(*self.bot.slots.active.borrow());
        report_load(tx, active).await;
        info!(
            sessions = self.sessions.len(),
            "shutting down: handing sessions back"
        );
        let release_at = Instant::now() + RELEASE_DELAY;
        let give_up = Instant::now() + DRAIN_TIMEOUT;
        loop {
            if *self.release.borrow() && self.sessions.is_empty() {
                // Stay a moment, so the transceiver sees the session streams go before the
                // worker and re-dispatches them to others, not to this (full) worker.
                sleep(RELEASE_DELAY).await;
                return Ok(());
            }
            tokio::select! {
                _ = sleep_until(release_at), if !*self.release.borrow() => {
                    self.release.send_replace(true);
                }
                Some(_) = self.sessions.join_next(), if !self.sessions.is_empty() => {}
                command = commands.message() => match command {
                    Ok(Some(WorkerCommand { kind: Some(worker_command::Kind::Dispatch(d)) })) => {
                        reject(tx, &d, "shutting_down".into()).await;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => return Ok(()),
                },
                _ = sleep_until(give_up) => return Ok(()),
            }
        }
    }

    async fn dispatch(&mut self, channel: &Channel, tx: &mpsc::Sender<WorkerMessage>, d: Dispatch) {
        let Some(slot) = self.bot.slots.try_acquire() else {
            // Another transceiver's session took the last slot, and this transceiver has not
            // heard yet. Report the load first, on the same ordered stream: the transceiver
            // then knows there is no room when the reject makes it queue the session again,
            // instead of offering it straight back and spending its dispatch attempts here.
            let active = *self.bot.slots.active.borrow();
            report_load(tx, active).await;
            info!(session_id = %d.session_id, active, "at capacity: rejecting dispatch");
            return reject(tx, &d, "at_capacity".to_owned()).await;
        };
        if self.mux.as_ref().is_none_or(Mux::is_closed) {
            match Mux::open(channel.clone(), self.bot).await {
                Ok(mux) => {
                    info!("multiplex stream open");
                    self.mux = Some(mux);
                }
                Err(status) => {
                    warn!(code = ?status.code(), message = status.message(), "cannot open the multiplex stream");
                    let reason = format!("attach failed: {:?}", status.code());
                    return reject(tx, &d, reason).await;
                }
            }
        }
        let Some(mux) = self.mux.as_mut() else { return };
        let span = info_span!("session", id = %d.session_id);
        let session = Session {
            channel: mux.open_channel(),
            bot: Arc::clone(self.bot),
            dispatch: d,
            reject_tx: self.reject_tx.clone(),
            release: self.release.subscribe(),
            _slot: slot,
        };
        self.sessions.spawn(session.run().instrument(span));
    }
}

/// Tells the transceiver how many sessions this worker holds (across all transceivers).
async fn report_load(tx: &mpsc::Sender<WorkerMessage>, active: u32) {
    send_work(
        tx,
        worker_message::Kind::Load(Load {
            active,
            capacity: 0,
        }),
    )
    .await;
}

async fn send_work(tx: &mpsc::Sender<WorkerMessage>, kind: worker_message::Kind) {
    // Fails only when the stream is gone, which the command loop notices by itself.
    let _ = tx.send(WorkerMessage { kind: Some(kind) }).await;
}

/// Tells the transceiver to offer `session_id` to another worker.
async fn reject(tx: &mpsc::Sender<WorkerMessage>, d: &Dispatch, reason: String) {
    send_work(
        tx,
        worker_message::Kind::Reject(Reject {
            session_id: d.session_id.clone(),
            reason,
            attempt: d.attempt,
        }),
    )
    .await;
}

/// One dispatched session, from attach to ENDED, on its channel of the `Multiplex` stream.
struct Session {
    channel: ChannelHandle,
    bot: Arc<Bot>,
    dispatch: Dispatch,
    reject_tx: mpsc::Sender<Reject>,
    /// Turns true when the bot shuts down (see [`WorkerLink::drain`]).
    release: watch::Receiver<bool>,
    _slot: Slot,
}

impl Session {
    async fn run(mut self) {
        let session_id = std::mem::take(&mut self.dispatch.session_id);
        let attach = Attach {
            session_id: session_id.clone(),
            worker_id: self.bot.worker_id.clone(),
            sample_rate_hz: self.bot.sample_rate_hz,
            mode: AudioMode::Pcm as i32,
            progress_interval_ms: PROGRESS_INTERVAL_MS,
            encoder: None,
        };
        self.channel.send(downlink::Kind::Attach(attach)).await;
        let mut out = Downstream::new(self.bot.sample_rate_hz);
        let mut machine = Utterances::new(self.bot.vad.clone());
        let mut attached = false;
        loop {
            let deadline = machine.poll_timeout();
            let event = tokio::select! {
                _ = stopped(&mut self.release) => {
                    // Let go without a hangup (dropping the channel releases it): the
                    // transceiver hands the caller to another worker.
                    info!("shutting down: releasing session");
                    return;
                }
                _ = sleep_until_opt(deadline) => {
                    if let Some(action) = machine.handle_timeout(std::time::Instant::now()) {
                        out.perform(&self.channel, action).await;
                    }
                    continue;
                }
                event = self.channel.recv() => event,
            };
            let up = match event {
                Some(ChannelEvent::Uplink(Uplink { kind: Some(kind) })) => kind,
                Some(ChannelEvent::Uplink(Uplink { kind: None })) => continue,
                Some(ChannelEvent::Closed(status)) if status.code() == Code::Ok => {
                    info!("session channel closed");
                    return;
                }
                Some(ChannelEvent::Closed(status)) if !attached => {
                    return self.decline(session_id, &status).await
                }
                Some(ChannelEvent::Closed(status)) => {
                    warn!(code = ?status.code(), message = status.message(), "session channel closed");
                    return;
                }
                None if !attached => {
                    // The stream broke with the attach unanswered. The transceiver re-offers the
                    // sessions of a stream it lost at once, so this offer can have come after
                    // it saw the break and before this bot did: the attach then went into a
                    // dead stream, and the caller would wait out the attach timeout. Declining
                    // has it offered again now, on a new stream. It names the offer's attempt,
                    // so it cannot decline a newer offer of the same session.
                    warn!("multiplex stream broke before the attach was answered: declining");
                    let reason = "attach failed: the multiplex stream broke".to_owned();
                    return self.reject(session_id, reason).await;
                }
                None => {
                    warn!("multiplex stream broke");
                    return;
                }
            };
            match up {
                uplink::Kind::Event(event) => match event.kind() {
                    session_event::Kind::Attached => {
                        attached = true;
                        info!(attempt = self.dispatch.attempt, metadata = ?self.dispatch.metadata, "session attached");
                    }
                    session_event::Kind::Ended => {
                        info!(reason = %event.reason, utterances = out.utterances, "session ended");
                        return;
                    }
                    other => debug!(event = other.as_str_name(), "session event"),
                },
                uplink::Kind::Audio(frame) => {
                    let pcm = out.decode(&frame.pcm);
                    if let Some(action) = machine.handle_frame(std::time::Instant::now(), pcm) {
                        out.perform(&self.channel, action).await;
                    }
                }
                uplink::Kind::Data(DataMessage {
                    label,
                    payload: Some(data_message::Payload::Text(text)),
                }) => {
                    let echo = json!({ "type": "echo", "text": text }).to_string();
                    let payload = Some(data_message::Payload::Text(echo));
                    self.channel
                        .send(downlink::Kind::Data(DataMessage { label, payload }))
                        .await;
                }
                uplink::Kind::Progress(p) => {
                    machine.handle_progress(std::time::Instant::now(), p.queued_ms);
                }
                uplink::Kind::Cleared(c) => info!(
                    item_id = %c.item_id,
                    item_played_ms = c.item_played_ms,
                    dropped_ms = c.dropped_ms,
                    "barge-in: reply cut"
                ),
                uplink::Kind::Data(_) | uplink::Kind::Opus(_) => {}
            }
        }
    }

    /// The session could not be attached: tell the transceiver to offer it elsewhere.
    async fn decline(self, session_id: String, status: &Status) {
        warn!(code = ?status.code(), message = status.message(), "attach failed");
        let reason = format!("attach failed: {:?}", status.code());
        self.reject(session_id, reason).await;
    }

    /// Declines this session's offer, by its attempt (a late decline never refuses a newer one).
    async fn reject(self, session_id: String, reason: String) {
        let reject = Reject {
            session_id,
            reason,
            attempt: self.dispatch.attempt,
        };
        let _ = self.reject_tx.send(reject).await;
    }
}

/// The session's downlink: turns actions into messages, and counts replies.
struct Downstream {
    sample_rate_hz: u32,
    chunk_samples: usize,
    utterances: u64,
    /// Scratch buffer for decoding uplink frames.
    frame: Vec<i16>,
}

impl Downstream {
    fn new(sample_rate_hz: u32) -> Self {
        let chunk_samples = (u128::from(sample_rate_hz) * CHUNK.as_millis() / 1000) as usize;
        Downstream {
            sample_rate_hz,
            chunk_samples: chunk_samples.max(1),
            utterances: 0,
            frame: Vec::with_capacity(sample_rate_hz as usize / 50),
        }
    }

    /// PCM16 little-endian bytes into samples (a stray odd byte is ignored).
    fn decode(&mut self, bytes: &[u8]) -> &[i16] {
        self.frame.clear();
        let samples = bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]));
        self.frame.extend(samples);
        &self.frame
    }

    async fn perform(&mut self, channel: &ChannelHandle, action: Action) {
        match action {
            Action::PlayUtterance(pcm) => {
                self.utterances += 1;
                let item_id = format!("utt-{}", self.utterances);
                for chunk in pcm.chunks(self.chunk_samples) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
                    let pcm = Bytes::from(bytes);
                    let item_id = item_id.clone();
                    channel
                        .send(downlink::Kind::Audio(AudioChunk { pcm, item_id }))
                        .await;
                }
                let ms = pcm.len() as u64 * 1000 / u64::from(self.sample_rate_hz.max(1));
                info!(item_id, ms, "utterance played");
            }
            Action::Clear => {
                channel.send(downlink::Kind::Clear(Clear {})).await;
                info!("barge-in: clear sent");
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(d) => sleep_until(Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

/// `e` and its sources, colon-separated (tonic's transport errors say little by themselves).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Resolves once shutdown is asked for (or the sender is gone, which means the same).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|&stop| stop).await;
}
