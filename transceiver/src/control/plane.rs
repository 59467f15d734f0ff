//! The control plane: admission, session creation and the commands sent to media loops.
//!
//! Signaling (HTTP) calls into this; it turns each failure into a typed [`ControlError`] that
//! the HTTP edge maps to a status code. Expensive work (str0m accepting an offer) runs on
//! tokio's blocking pool so neither the async runtime nor a media loop waits on it.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use str0m::config::DtlsCert;
use tokio::sync::{mpsc, oneshot};
use voxgate_proto::hint::{self, FleetKey, MintTime, RoutingHint, NONCE_LEN};

use crate::auth::token_uses::{take_use, TokenUses};
use crate::auth::Credential;
use crate::backend::dispatch::SessionInfo;
use crate::backend::dispatch_handle::{DispatchHandle, DispatchMsg};
use crate::control::call_metadata::CallMetadata;
use crate::control::codec_cost::{CodecCosts, TALKING_OVER_FLOOR};
pub use crate::control::control_error::ControlError;
use crate::control::ingress::{IngressChoice, IngressSelector};
use crate::control::offer::validate_offer;
use crate::control::process_load::{projected, usable_cores, RecentTalkers, YoungSessions};
use crate::control::rate_limit::{RateLimitConfig, RateLimiter};
use crate::control::registry::{CallOf, Refusal, Registry};
use crate::control::resume_gate::{new_call, resume_of, settle, ResumeGate, ResumeUse};
use crate::control::talk_crest::{TalkCrest, TALK_SWING_OVER_FLOOR};
use crate::media::audio_bridge::{EncoderSettings, OwnerEndpoints, StartedTalking, TapSubscriber};
use crate::media::busy_meter::SharedBusy;
use crate::media::command::{Command, LoopEvent, SessionEnded};
use crate::media::event_loop::LoopHandle;
use crate::media::session::AttachError;
use crate::media::session::{
    Candidates, EndReason, Session, SessionId, SessionParams, SessionSnapshot,
};
use crate::metrics::{Metrics, OfferStage};

/// An answered offer.
pub struct Created {
    pub id: SessionId,
    pub answer: String,
    /// The relay ingress the answer advertises (`None` in direct mode).
    pub ingress: Option<IngressChoice>,
    /// The call the session carries (for its resume credential).
    pub call: CallOf,
    /// The worker that took a resumed call (`None` for a new call: none has yet).
    pub worker: Option<String>,
}

/// What the signaling edge learned about who asks for a new session.
#[derive(Debug, Clone, Default)]
pub struct Requester {
    /// The client IP per-IP limits and ingress CIDR rules apply to (the peer's, or the one a
    /// trusted proxy forwarded).
    pub client: Option<IpAddr>,
    /// The ingress header's value, when a trusted proxy sent it.
    pub ingress_value: Option<String>,
    /// What it authenticated with: a new session is controlled by it alone (and the
    /// operator's token), and a per-call token's uses are counted.
    pub credential: Credential,
}

pub struct ControlPlaneConfig {
    pub fleet_key: FleetKey,
    pub cluster_id: u32,
    /// The IP relays reach the loops at (the hint carries it with each loop's port).
    pub internal_ip: std::net::IpAddr,
    /// The relay ingresses and the rule choosing one per request; `None` = each loop
    /// advertises its own socket address (direct mode).
    pub ingress: Option<IngressSelector>,
    /// Whether answers carry passive TCP candidates (`--no-advertise-tcp` clears them).
    pub advertise_tcp: bool,
    pub connect_timeout: Duration,
    pub max_sessions: usize,
    pub encoder: EncoderSettings,
    /// Refuse new sessions (503) while no backend worker has room.
    pub require_backend: bool,
    /// A loop busier than this (share of wall time) takes no new session; 1 = no limit.
    pub max_loop_busy: f64,
    /// No new session while the whole process uses more than this share of its usable cores
    /// (last second); 1 = no limit.
    pub max_process_cpu: f64,
    /// Concurrent sessions per client IP (IPv6 /64); 0 = no cap.
    pub max_sessions_per_ip: usize,
    /// POST token buckets per client IP.
    pub rate_limit: RateLimitConfig,
    /// ICE-restart (PATCH) token buckets per client IP.
    pub restart_rate_limit: RateLimitConfig,
    /// Longest a session may last (`None` = no limit).
    pub max_session: Option<Duration>,
    /// An owner whose uplink queue stays full this long is dropped and the session re-dispatched.
    pub backend_stall: Duration,
}

pub struct ControlPlane {
    loops: Vec<LoopHandle>,
    pub(super) registry: Registry,
    pub metrics: Arc<Metrics>,
    config: ControlPlaneConfig,
    cert: DtlsCert,
    serial: AtomicU64,
    draining: AtomicBool,
    /// Whether the last admission found every loop saturated (logs only the transitions).
    saturated: AtomicBool,
    /// The process's CPU share over the last second (`process_load::run_sampler` writes it).
    process_load: SharedBusy,
    /// Whether the last admission found the process saturated (logs only the transitions).
    process_saturated: AtomicBool,
    /// Sessions admitted too recently for the CPU window to show their cost, and PCM sessions
    /// that started talking too recently for it to show their encoder; each held only for one
    /// update, never across an await.
    young: Mutex<YoungSessions>,
    talkers: Mutex<RecentTalkers>,
    /// The talking PCM sessions' crest: how many talk at once at most, beyond what the window
    /// shows (the CPU sampler feeds it every 100 ms).
    crest: Mutex<TalkCrest>,
    /// What a talking PCM session's codecs cost here, per setting.
    codec_costs: Arc<CodecCosts>,
    /// Cores the process may use (the CPU window's denominator).
    cores: f64,
    dispatch: DispatchHandle,
    /// Held only for one bucket update, never across an await.
    rate_limiter: Mutex<RateLimiter>,
    pub(super) restart_limiter: Mutex<RateLimiter>,
    /// The sessions each per-call token has created (held for one update at a time).
    token_uses: Mutex<TokenUses>,
    /// The (call, generation) pairs resumed here.
    resume_gate: ResumeGate,
}

impl ControlPlane {
    pub fn new(
        loops: Vec<LoopHandle>,
        metrics: Arc<Metrics>,
        config: ControlPlaneConfig,
        dispatch: DispatchHandle,
    ) -> Result<Self, ControlError> {
        // One DTLS certificate for the process: generating one per session would cost
        // milliseconds of setup latency, and the fingerprint in each answer still binds it.
        let cert = str0m::crypto::from_feature_flags()
            .dtls_provider
            .generate_certificate()
            .ok_or_else(|| ControlError::Internal("DTLS certificate generation failed".into()))?;
        Ok(ControlPlane {
            registry: Registry::new(
                loops.len(),
                config.max_sessions,
                config.max_sessions_per_ip,
                metrics.sessions_reserved_gauge(),
            ),
            rate_limiter: Mutex::new(RateLimiter::new(config.rate_limit, Instant::now())),
            restart_limiter: Mutex::new(RateLimiter::new(
                config.restart_rate_limit,
                Instant::now(),
            )),
            token_uses: Mutex::new(TokenUses::default()),
            resume_gate: ResumeGate::default(),
            young: Mutex::new(YoungSessions::new(config.max_sessions)),
            talkers: Mutex::new(RecentTalkers::new(config.max_sessions)),
            crest: Mutex::new(TalkCrest::new(config.max_sessions)),
            codec_costs: CodecCosts::new(config.encoder, Arc::clone(&metrics)),
            cores: usable_cores(),
            loops,
            metrics,
            config,
            cert,
            serial: AtomicU64::new(1),
            draining: AtomicBool::new(false),
            saturated: AtomicBool::new(false),
            process_load: SharedBusy::default(),
            process_saturated: AtomicBool::new(false),
            dispatch,
        })
    }

    /// Measures what a PCM session's codecs cost with the transceiver's default encoder, on
    /// this thread (start-up: before the CPU sampler and signaling start; see `codec_cost`).
    pub fn measure_default_codec_cost(&self) {
        self.codec_costs.measure_default_now();
    }

    /// CPU the process spent measuring codec costs: calibration, which the process CPU window
    /// leaves out (see `codec_cost`).
    pub fn calibration_cpu(&self) -> Duration {
        self.codec_costs.calibration_cpu()
    }

    /// Where the process's CPU share is published for admission (the sampler writes it).
    pub fn process_load(&self) -> SharedBusy {
        self.process_load.clone()
    }

    /// Refuses while the whole process is past `--max-process-cpu`: its loops may have room
    /// while the gRPC side they feed is short of CPU (see `process_load`).
    fn check_process_cpu(&self) -> Result<(), ControlError> {
        let limit = self.config.max_process_cpu;
        if limit >= 1.0 {
            return Ok(());
        }
        let now = Instant::now();
        let young = self
            .young
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .count(now);
        let crest = self
            .crest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .headroom();
        let (ratio, talkers) = {
            let mut talkers = self.talkers.lock().unwrap_or_else(|p| p.into_inner());
            let sessions = self.registry.len();
            let ratio = projected(
                self.process_load.ratio(),
                sessions,
                young,
                &mut talkers,
                now,
            ) + crest;
            (ratio, talkers.len())
        };
        let saturated = ratio >= limit;
        if self.process_saturated.swap(saturated, Ordering::Relaxed) != saturated {
            if saturated {
                tracing::warn!(
                    cpu_percent = (ratio * 100.0).round() as u32,
                    young_sessions = young,
                    new_talkers = talkers,
                    talk_crest_percent = (crest * 100.0).round() as u32,
                    limit = limit,
                    "the process's CPU is saturated: refusing new sessions"
                );
            } else {
                tracing::info!("the process's CPU has room again: admitting new sessions");
            }
        }
        if saturated {
            return Err(ControlError::ProcessSaturated(
                (ratio * 100.0).round() as u32
            ));
        }
        Ok(())
    }

    pub fn dispatch(&self) -> &DispatchHandle {
        &self.dispatch
    }

    pub fn loops(&self) -> &[LoopHandle] {
        &self.loops
    }

    pub fn session_count(&self) -> usize {
        self.registry.len()
    }

    /// How long a backend may leave its uplink queue full before it counts as lost.
    pub fn backend_stall(&self) -> Duration {
        self.config.backend_stall
    }

    /// Takes a POST token from `client`'s bucket.
    fn check_rate(&self, client: IpAddr) -> Result<(), ControlError> {
        let mut limiter = self.rate_limiter.lock().unwrap_or_else(|p| p.into_inner());
        limiter
            .check(Instant::now(), client)
            .map_err(ControlError::RateLimited)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// The answer's candidates: the steered ingress's relay addresses, or in direct mode the
    /// loop's own UDP socket and ICE-TCP listener.
    fn candidates_for(
        &self,
        loop_index: usize,
        requester: &Requester,
    ) -> (Candidates, Option<IngressChoice>) {
        let Some(selector) = &self.config.ingress else {
            let own = &self.loops[loop_index];
            let candidates = Candidates {
                udp: vec![own.local_addr],
                tcp: own.tcp_addr.into_iter().collect(),
            };
            return (self.with_tcp_policy(candidates), None);
        };
        let selection = selector.select(requester.ingress_value.as_deref(), requester.client);
        if selection.header_unmatched {
            self.metrics.ingress_header_unmatched();
        }
        let ingress = selector.ingress(selection.index);
        let candidates = self.with_tcp_policy(Candidates {
            udp: ingress.udp.clone(),
            tcp: ingress.tcp.clone(),
        });
        let choice = IngressChoice {
            name: ingress.name.clone(),
            reason: selection.reason,
        };
        (candidates, Some(choice))
    }

    /// Drops the TCP candidates when `--no-advertise-tcp` says so.
    fn with_tcp_policy(&self, mut candidates: Candidates) -> Candidates {
        if !self.config.advertise_tcp {
            candidates.tcp.clear();
        }
        candidates
    }

    /// The ingress session `id`'s answer advertised, if it is live and one was chosen.
    pub fn ingress_of(&self, id: SessionId) -> Option<IngressChoice> {
        self.registry.ingress_of(id)
    }

    /// Mints fresh ICE credentials whose ufrag routes to `loop_index`.
    pub(super) fn mint_credentials(&self, loop_index: usize) -> (String, String) {
        let hint = RoutingHint {
            cluster_id: self.config.cluster_id,
            loop_addr: SocketAddr::new(
                self.config.internal_ip,
                self.loops[loop_index].local_addr.port(),
            ),
        };
        let nonce: [u8; NONCE_LEN] = rand::random();
        // Relays stop routing ufrags older than their --hint-max-age-secs; an ICE restart
        // mints afresh, so a long call can always move to a new client address.
        let minted = MintTime::from_system_time(SystemTime::now());
        let ufrag = hint::mint(&self.config.fleet_key, &hint, minted, nonce);
        (ufrag, random_ice_password())
    }

    /// Reserves a slot for `client`'s new session on the least-loaded media loop among those
    /// below `--max-loop-busy`, or says why there is none. Warns once when every loop becomes
    /// saturated, and tells when one has room again.
    fn reserve_loop(
        &self,
        client: Option<IpAddr>,
    ) -> Result<crate::control::registry::Reservation<'_>, ControlError> {
        let busy: Vec<f64> = self.loops.iter().map(LoopHandle::busy_ratio).collect();
        let limit = self.config.max_loop_busy;
        let reservation = self
            .registry
            .reserve(client, |i| limit >= 1.0 || busy[i] < limit)
            .map_err(|r| match r {
                Refusal::AtCapacity => ControlError::AtCapacity(self.config.max_sessions),
                Refusal::ClientCap => ControlError::ClientCap(self.config.max_sessions_per_ip),
                Refusal::LoopsSaturated => {
                    let least = (busy.iter().copied().fold(1.0, f64::min) * 100.0).round() as u32;
                    if !self.saturated.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            least_busy_percent = least,
                            limit = self.config.max_loop_busy,
                            "every media loop is saturated: refusing new sessions"
                        );
                    }
                    ControlError::LoopsSaturated(least)
                }
            })?;
        if self.saturated.swap(false, Ordering::Relaxed) {
            tracing::info!("a media loop has room again: admitting new sessions");
        }
        Ok(reservation)
    }

    /// Admits and answers a new session. `requester.client` is the client's IP (per-IP limits
    /// apply when given); with the ingress header's value it steers the relay ingress. Every
    /// await point may be the last (hyper drops the future of a request whose client left):
    /// the reservation guard then gives the slot back.
    pub async fn create(
        &self,
        body: &[u8],
        metadata: CallMetadata,
        requester: &Requester,
    ) -> Result<Created, ControlError> {
        let client = requester.client;
        if self.is_draining() {
            return Err(ControlError::Draining);
        }
        if let Some(ip) = client {
            self.check_rate(ip)?;
        }
        // A per-call token creates as many sessions as it may; the use comes back unless this
        // POST creates one.
        let claims = match &requester.credential {
            Credential::Call(c) => Some(c),
            _ => None,
        };
        let token_use = take_use(&self.token_uses, claims, unix_now())?;
        // A resume continues the credential's call, once: a second resume with it here is
        // refused before any work (across transceivers, the backend refuses it).
        let (resume, resume_use) = self.resume_gate.take(&requester.credential)?;
        let (offer, summary) = validate_offer(body)?;
        let started = Instant::now();
        if self.config.require_backend && !self.dispatch.has_room().await {
            return Err(ControlError::NoBackend);
        }
        self.check_process_cpu()?;
        let reservation = self.reserve_loop(client)?;
        let loop_index = reservation.loop_index;
        let id = SessionId::random();
        let call = new_call(id, &requester.credential);
        let (ufrag, pass) = self.mint_credentials(loop_index);
        let (candidates, ingress) = self.candidates_for(loop_index, requester);
        let params = SessionParams {
            id,
            ufrag,
            pass,
            cert: self.cert.clone(),
            candidates,
            connect_timeout: self.config.connect_timeout,
            max_duration: self.config.max_session,
            audio_mid: summary.audio_mid,
            encoder: self.config.encoder,
            metadata: metadata.merged(),
            call_id: call.call_id,
            generation: call.generation,
        };
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        // Inline on this worker: an accept is cheap (the `setup/accept` bench measures it, with
        // the shared DTLS configuration of `voxgate_dtls`). A hop to the blocking pool and back
        // cost more than that at the tail: two wakeups of threads that wait for a core the
        // media loops also want.
        let accepting = Instant::now();
        let accepted = Session::accept(accepting, serial, params, offer);
        self.metrics
            .offer_stage(OfferStage::Accept, accepting.elapsed());
        // On every early return below, dropping `reservation` gives the slot back.
        let (session, answer) = accepted.map_err(|e| ControlError::Rejected(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        let inserting = Instant::now();
        let cmd = Command::Insert {
            session: Box::new(session),
            reply: tx,
        };
        if let Err(e) = self.loops[loop_index].send(cmd) {
            return Err(ControlError::LoopBusy(e.0));
        }
        // Commit before awaiting: the loop may end the session (and report it) at any time
        // after inserting it.
        self.registry.commit(reservation, id, ingress.clone(), call);
        token_use.keep();
        self.young
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admitted(Instant::now());
        if rx.await.is_err() {
            self.registry.remove(id);
            return Err(ControlError::Internal("media loop stopped".into()));
        }
        self.metrics
            .offer_stage(OfferStage::Insert, inserting.elapsed());
        self.metrics.session_created();
        let (ingress_name, ingress_reason) = match &ingress {
            Some(c) => {
                self.metrics.ingress_selected(&c.name, c.reason.as_str());
                (c.name.to_string(), c.reason.as_str())
            }
            None => (String::new(), ""),
        };
        tracing::info!(
            session = %id,
            loop_index,
            client = ?client,
            ingress = %ingress_name,
            ingress_reason,
            "session created"
        );
        let info = SessionInfo {
            metadata: metadata.merged(),
            signed_metadata: metadata.signed,
            caller_metadata: metadata.caller,
            ingress: ingress_name,
            ingress_reason: ingress_reason.to_string(),
            call_id: Some(call.call_id),
            resume: resume.map(|r| resume_of(call, r)),
        };
        let worker = self.hand_off(id, call, info, resume_use).await?;
        self.metrics
            .offer_stage(OfferStage::Answer, started.elapsed());
        Ok(Created {
            id,
            answer,
            ingress,
            call,
            worker,
        })
    }

    /// Hands new session `id` (of `call`) to the dispatcher. A resume (`taken`: its credential's
    /// (call, generation)) waits for the backend's verdict and returns the worker that took the
    /// call; a refused resume ends the session.
    async fn hand_off(
        &self,
        id: SessionId,
        call: CallOf,
        info: SessionInfo,
        taken: Option<ResumeUse<'_>>,
    ) -> Result<Option<String>, ControlError> {
        let (verdict_tx, verdict_rx) = oneshot::channel();
        let verdict = taken.is_some().then_some(verdict_tx);
        let info = Box::new(info);
        self.dispatch
            .send(DispatchMsg::NewSession { id, info, verdict })
            .await;
        let Some(taken) = taken else {
            return Ok(None);
        };
        if let Err(failure) = settle(verdict_rx, taken).await {
            tracing::info!(session = %id, outcome = failure.outcome(), "resume refused; ending the new session");
            self.end_session(id, EndReason::ResumeRefused);
            self.registry.remove(id);
            return Err(failure.into());
        }
        tracing::info!(session = %id, call = %call.call_id, generation = call.generation, "call resumed");
        Ok(self.dispatch.holder(id).await)
    }

    /// The loop of session `id`, if `caller` controls it; `NotFound` otherwise, whether it
    /// exists or not.
    pub fn loop_for(&self, id: SessionId, caller: &Credential) -> Result<usize, ControlError> {
        self.registry
            .loop_for(id, caller)
            .ok_or(ControlError::NotFound)
    }

    pub async fn delete(&self, id: SessionId, caller: &Credential) -> Result<(), ControlError> {
        let loop_index = self.loop_for(id, caller)?;
        let (tx, rx) = oneshot::channel();
        self.loops[loop_index]
            .send(Command::Delete { id, reply: tx })
            .map_err(|e| ControlError::LoopBusy(e.0))?;
        let found = rx.await.unwrap_or(false);
        // The loop reports the end too; removing here makes DELETE's effect visible at once.
        self.registry.remove(id);
        if found {
            Ok(())
        } else {
            Err(ControlError::NotFound)
        }
    }

    pub async fn snapshot(
        &self,
        id: SessionId,
        caller: &Credential,
    ) -> Result<SessionSnapshot, ControlError> {
        let loop_index = self.loop_for(id, caller)?;
        let (tx, rx) = oneshot::channel();
        self.loops[loop_index]
            .send(Command::Snapshot { id, reply: tx })
            .map_err(|e| ControlError::LoopBusy(e.0))?;
        rx.await.ok().flatten().ok_or(ControlError::NotFound)
    }

    /// Makes a backend stream the owner of session `id`.
    pub async fn attach(
        &self,
        id: SessionId,
        endpoints: OwnerEndpoints,
    ) -> Result<(), AttachError> {
        let loop_index = self.registry.loop_of(id).ok_or(AttachError::NotFound)?;
        let (reply, rx) = oneshot::channel();
        self.loops[loop_index]
            .send(Command::Attach {
                id,
                endpoints,
                reply,
            })
            .map_err(|_| AttachError::NotFound)?;
        rx.await.unwrap_or(Err(AttachError::NotFound))
    }

    /// Adds a listen-only subscriber to session `id`.
    pub async fn tap(&self, id: SessionId, tap: TapSubscriber) -> Result<(), AttachError> {
        let loop_index = self.registry.loop_of(id).ok_or(AttachError::NotFound)?;
        let (reply, rx) = oneshot::channel();
        self.loops[loop_index]
            .send(Command::Tap { id, tap, reply })
            .map_err(|_| AttachError::NotFound)?;
        rx.await.unwrap_or(Err(AttachError::NotFound))
    }

    /// Ends a session for a control-plane reason (e.g. no backend took it).
    pub fn end_session(&self, id: SessionId, reason: EndReason) {
        if let Some(loop_index) = self.registry.loop_of(id) {
            if self.loops[loop_index]
                .send(Command::End { id, reason })
                .is_err()
            {
                tracing::warn!(session = %id, "could not end session: loop queue full");
            }
        }
    }

    /// Applies loop events until every loop has stopped. Ends come on their own channel (one
    /// message per session, so it needs no bound of its own and never drops one): a burst of
    /// other events can never cost a registry slot.
    pub async fn run_events(
        self: Arc<Self>,
        mut events: mpsc::Receiver<LoopEvent>,
        mut ended: mpsc::UnboundedReceiver<SessionEnded>,
    ) {
        let mut events_open = true;
        loop {
            tokio::select! {
                // Ends first: they give slots back.
                biased;
                e = ended.recv() => match e {
                    Some(SessionEnded { id, reason }) => {
                        self.registry.remove(id);
                        self.talkers.lock().unwrap_or_else(|p| p.into_inner()).ended(id);
                        self.crest.lock().unwrap_or_else(|p| p.into_inner()).ended(id);
                        self.metrics.session_ended(reason.as_str());
                        self.dispatch.send(DispatchMsg::Ended { id }).await;
                    }
                    None => return,
                },
                ev = events.recv(), if events_open => match ev {
                    Some(LoopEvent::OwnerLost { id, owner, stalled }) => {
                        if stalled {
                            self.metrics.backend_stalled();
                        }
                        self.dispatch.send(DispatchMsg::OwnerLost { id, owner }).await;
                    }
                    Some(LoopEvent::StartedTalking { id, talking }) => {
                        self.started_talking(id, talking);
                    }
                    None => events_open = false,
                },
            }
        }
    }

    /// Session `id`'s backend played its first PCM frame: admission counts it at its encoder's
    /// cost from now on, before the CPU window shows it.
    fn started_talking(&self, id: SessionId, talking: StartedTalking) {
        let floor = self.codec_costs.per_session_second(talking) / self.cores;
        self.talkers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .started_talking(Instant::now(), id, TALKING_OVER_FLOOR * floor);
        self.crest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .talked(id, TALK_SWING_OVER_FLOOR * floor);
        self.metrics.talking_counted();
    }

    /// Samples the loops' count of PCM frames encoded for the talking sessions' crest (the
    /// process CPU sampler calls it at each of its samples).
    pub fn sample_talking(&self, now: Instant) {
        let mut crest = self.crest.lock().unwrap_or_else(|p| p.into_inner());
        crest.sample(now, self.metrics.pcm_frames_encoded());
        self.metrics
            .talk_crest(crest.talking(), crest.share(), crest.headroom());
    }

    /// Ends every session and stops the loops (graceful shutdown).
    pub fn shutdown_loops(&self) {
        for l in &self.loops {
            if l.send(Command::Shutdown).is_err() {
                tracing::warn!(loop_index = l.index, "could not signal media loop shutdown");
            }
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A random ICE password: 24 chars of the ICE alphabet (RFC 8839 asks for at least 22).
fn random_ice_password() -> String {
    const ICE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: [u8; 24] = rand::random();
    bytes
        .iter()
        .map(|b| ICE[(*b & 63) as usize] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ice_password_uses_ice_chars_and_is_long_enough() {
        let p = random_ice_password();
        assert_eq!(p.len(), 24);
        assert!(p
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/'));
        assert_ne!(p, random_ice_password());
    }
}
