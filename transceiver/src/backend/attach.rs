//! Attaching a backend stream to a session, shared by both stream kinds (a `Session` stream
//! of its own, or a channel of a `Multiplex` stream): an `Attach` checked before anything is set
//! up ([`AttachRequest`]), the dispatcher's approval and the loop's taking the owner's queues
//! ([`attach_owner`]), the gRPC edge's end of the session's downlink ([`DownlinkTx`]), and how
//! long each uplink frame waited in its queue.

use std::time::Duration;

use tokio::sync::mpsc;
use tonic::Status;
use voxgate_proto::bridge::{
    downlink, uplink, Attach, AudioMode, Downlink, OpusApplication as ProtoApplication,
    OpusEncoder, Uplink,
};

use crate::backend::dispatch::DispatchError;
use crate::backend::dispatch_handle::DispatchMsg;
use crate::control::plane::ControlPlane;
use crate::media::audio_bridge::{
    valid_sample_rate, EncoderChoice, OpusApplication, OwnerEndpoints, OwnerUplink, PendingClears,
    QueuedDownlink,
};
use crate::media::session::{AttachError, SessionId};

/// Uplink messages buffered per subscriber (see `audio_bridge::owner_uplink`). Public so the
/// `session` benchmark gives its `Session` the queues a real backend gets.
pub use crate::media::audio_bridge::UPLINK_QUEUE;
/// Downlink messages buffered per session before the backend's stream is back-pressured.
/// Public for the `session` benchmark, like [`UPLINK_QUEUE`].
pub const DOWNLINK_QUEUE: usize = 64;
/// Numbers each `Session` attachment (see `OwnerEndpoints::owner_id`); 0 is never used.
static NEXT_OWNER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// How long an audio frame took from its datagram's arrival (the loop's stamp, wall clock) to
/// leaving its uplink queue at `now` (wall clock, µs). Events carry no arrival and are not
/// counted.
pub(crate) fn observe_queue_wait(
    h: &prometheus_client::metrics::histogram::Histogram,
    u: &Uplink,
    now: i64,
) {
    let arrival = match &u.kind {
        Some(uplink::Kind::Audio(f)) => f.arrival_unix_micros,
        Some(uplink::Kind::Opus(p)) => p.arrival_unix_micros,
        _ => return,
    };
    h.observe((now - arrival).max(0) as f64 / 1e6);
}

/// The wall clock in microseconds since the Unix epoch.
pub(crate) fn unix_micros_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

pub(crate) fn parse_session_id(s: &str) -> Result<SessionId, Status> {
    // Never echo a long id: the message travels in a header, and the client chose its size.
    s.parse().map_err(|_| match s.len() {
        0..=64 => Status::not_found(format!("no session {s:?}")),
        n => Status::not_found(format!("no session (a {n}-byte id)")),
    })
}

/// An attach's `encoder` field, checked: an unknown application or a complexity past 10 is the
/// backend's error, answered before anything is set up.
fn encoder_choice(e: Option<&OpusEncoder>) -> Result<EncoderChoice, Status> {
    let Some(e) = e else {
        return Ok(EncoderChoice::default());
    };
    let application = match ProtoApplication::try_from(e.application) {
        Ok(ProtoApplication::Default) => None,
        Ok(ProtoApplication::Voip) => Some(OpusApplication::Voip),
        Ok(ProtoApplication::Audio) => Some(OpusApplication::Audio),
        Ok(ProtoApplication::Lowdelay) => Some(OpusApplication::Lowdelay),
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "unknown encoder application {}",
                e.application
            )))
        }
    };
    let complexity = match e.complexity {
        None => None,
        Some(c @ 0..=10) => Some(c as i32),
        Some(c) => {
            return Err(Status::invalid_argument(format!(
                "encoder complexity {c} is out of range (0 to 10)"
            )))
        }
    };
    Ok(EncoderChoice {
        application,
        complexity,
    })
}

pub(crate) fn attach_status(e: AttachError) -> Status {
    match e {
        AttachError::NotFound => Status::not_found("no such session"),
        AttachError::TooManyTaps(_) => Status::resource_exhausted(e.to_string()),
        AttachError::Bridge(e) => Status::invalid_argument(e.to_string()),
    }
}

/// An attach, checked: what a backend asked for, before anything is set up.
pub(crate) struct AttachRequest {
    id: SessionId,
    sample_rate: u32,
    mode: AudioMode,
    encoder: EncoderChoice,
    worker: Option<String>,
    progress_interval: Duration,
}

impl AttachRequest {
    /// Checks an `Attach`: a bad id, rate, mode or encoder is the backend's error.
    pub(crate) fn parse(attach: &Attach) -> Result<AttachRequest, Status> {
        let id = parse_session_id(&attach.session_id)?;
        let sample_rate = valid_sample_rate(attach.sample_rate_hz)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mode = AudioMode::try_from(attach.mode)
            .map_err(|_| Status::invalid_argument("unknown audio mode"))?;
        let encoder = encoder_choice(attach.encoder.as_ref())?;
        let worker = (!attach.worker_id.is_empty()).then(|| attach.worker_id.clone());
        let progress_ms = if attach.progress_interval_ms == 0 {
            200
        } else {
            attach.progress_interval_ms
        };
        Ok(AttachRequest {
            id,
            sample_rate,
            mode,
            encoder,
            worker,
            progress_interval: Duration::from_millis(u64::from(progress_ms)),
        })
    }
}

/// The gRPC edge's end of a session's downlink: its bounded queue, and the clears on their way
/// down it (see `PendingClears`).
pub(crate) struct DownlinkTx {
    pub tx: mpsc::Sender<QueuedDownlink>,
    pub clears: PendingClears,
}

impl DownlinkTx {
    /// Queues `msg`, waiting for room (a `Session` stream's flow control). Err: the session's
    /// side is gone.
    pub async fn send(&self, msg: Downlink) -> Result<(), ()> {
        let clear = is_clear(&msg);
        if clear {
            self.clears.announce();
        }
        let sent = self.tx.send(msg.into()).await.map_err(|_| ());
        if clear && sent.is_err() {
            self.clears.withdraw();
        }
        sent
    }

    /// Queues `msg` if there is room now.
    pub fn try_send(&self, msg: Downlink) -> Result<(), ()> {
        let clear = is_clear(&msg);
        if clear {
            self.clears.announce();
        }
        let sent = self.tx.try_send(msg.into()).map_err(|_| ());
        if clear && sent.is_err() {
            self.clears.withdraw();
        }
        sent
    }
}

fn is_clear(msg: &Downlink) -> bool {
    matches!(msg.kind, Some(downlink::Kind::Clear(_)))
}

/// Makes `uplink` the owner of the session `ask` names: the dispatcher approves (it refuses a
/// second owner), then the session's loop takes the owner's queues. Returns the session's
/// downlink queue (`down_capacity` messages).
pub(crate) async fn attach_owner(
    control: &ControlPlane,
    ask: AttachRequest,
    uplink: OwnerUplink,
    down_capacity: usize,
) -> Result<DownlinkTx, Status> {
    let AttachRequest { id, worker, .. } = ask;
    let dispatch = control.dispatch();
    let owner = NEXT_OWNER_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dispatch
        .ask(|reply| DispatchMsg::Attached {
            id,
            worker: worker.clone(),
            owner,
            reply,
        })
        .await
        .map_err(|e| match e {
            DispatchError::AlreadyOwned => Status::failed_precondition(e.to_string()),
            e => Status::not_found(e.to_string()),
        })?;
    let (down_tx, down_rx) = mpsc::channel(down_capacity);
    let clears = PendingClears::default();
    let endpoints = OwnerEndpoints {
        clears: clears.clone(),
        uplink,
        downlink: down_rx,
        sample_rate: ask.sample_rate,
        mode: ask.mode,
        progress_interval: ask.progress_interval,
        stall_after: control.backend_stall(),
        owner_id: owner,
        encoder: ask.encoder,
    };
    if let Err(e) = control.attach(id, endpoints).await {
        // The dispatcher thinks this stream owns the session: undo that.
        dispatch.send(DispatchMsg::OwnerLost { id, owner }).await;
        return Err(attach_status(e));
    }
    // Only now has the session a working owner: its dispatch attempts start afresh.
    dispatch.send(DispatchMsg::AttachHeld { id, owner }).await;
    tracing::info!(session = %id, worker = worker.as_deref().unwrap_or("-"), sample_rate = ask.sample_rate, mode = ?ask.mode, application = ?ask.encoder.application, complexity = ?ask.encoder.complexity, "backend attached");
    Ok(DownlinkTx {
        tx: down_tx,
        clears,
    })
}
