//! One WebRTC session: str0m's `Rtc` plus the bookkeeping voxgate needs around it.
//!
//! Sans-IO like str0m itself: datagrams and time go in ([`Session::handle_datagram`],
//! [`Session::handle_timeout`]), transmits come out through a sink in [`Session::poll`], which
//! also returns the next deadline. The media loop owns the socket and the clock.
//!
//! The session also owns its audio bridge: the loop attaches owners and taps through the
//! session ([`Session::attach_owner`], [`Session::add_tap`]) and collects what the bridge
//! counted since its last look with [`Session::take_report`].
//!
//! Beside it: where the client is and how replies reach it ([`path`]), who the session is and
//! why it ended ([`state`]), what the control plane is shown of it ([`snapshot`]), and how
//! str0m is configured for it ([`rtc_config`]).

mod data_channel;
mod path;
mod report;
mod rtc_config;
mod snapshot;
mod state;
mod turns;

pub use path::{is_binding_success, Candidates, ClientPath, ClientPaths, Route, MAX_CLIENT_ADDRS};
pub use report::SessionReport;
pub use snapshot::{PathSnapshot, PathsShown, SessionCounters, SessionSnapshot};
pub use state::{EndReason, OwnerLoss, SessionError, SessionId, SessionState};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::media::arrival::RtpArrivals;
use crate::media::audio_bridge::{
    AudioBridge, BridgeAction, BridgeError, CloseReason, CoarseTicks, EncoderSettings,
    OwnerEndpoints, TapSubscriber,
};
use crate::media::check_budget::CheckBudget;
use crate::media::demux::PeerKey;
use crate::media::quality::{QualitySample, QualityTracker};
use crate::media::turn_timing::TurnTimer;
use crate::metrics::{BridgeCounters, DropReason};
use str0m::change::SdpOffer;
use str0m::channel::ChannelId;
use str0m::config::DtlsCert;
use str0m::format::Codec;
use str0m::media::{Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive, Transmit};
use str0m::{Event, IceConnectionState, IceCreds, Input, Output, Rtc};
pub use voxgate_proto::relay_header::Transport;

/// How long a graceful end waits for the `session.ended` data-channel message to go out
/// before closing DTLS.
const CLOSE_GRACE: Duration = Duration::from_millis(100);

/// Why a backend stream could not attach to (or tap) a session.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no such session")]
    NotFound,
    #[error("session already has {0} taps (--max-taps)")]
    TooManyTaps(usize),
    #[error("{0}")]
    Bridge(#[from] BridgeError),
}

/// What the loop a session lives on tells it when an owner attaches: how many sessions the
/// loop holds and its coarse-tick setting, which pick the grid the owner's ticks fall on.
#[derive(Debug, Clone, Copy)]
pub struct LoopTicks {
    pub sessions: usize,
    pub coarse: CoarseTicks,
}

/// Everything needed to build a session's `Rtc`, decided by the control plane.
pub struct SessionParams {
    pub id: SessionId,
    pub ufrag: String,
    pub pass: String,
    pub cert: DtlsCert,
    /// ICE candidates to advertise (the loop's sockets, or relay addresses).
    pub candidates: Candidates,
    pub connect_timeout: Duration,
    /// Longest the session may last (`--max-session-secs`), `None` = no limit.
    pub max_duration: Option<Duration>,
    /// The `a=mid` of the offer's audio section.
    pub audio_mid: String,
    pub encoder: EncoderSettings,
    /// Signaling metadata, handed to the backend in the ATTACHED event.
    pub metadata: HashMap<String, String>,
    /// The call the session carries (`id` for a new call) and its generation in it (1 for a
    /// call's first session, +1 per resume).
    pub call_id: SessionId,
    pub generation: u32,
}

pub struct Session {
    pub id: SessionId,
    /// Unique per process; guards timer entries against slab key reuse.
    pub serial: u64,
    rtc: Rtc,
    ufrag: String,
    candidates: Candidates,
    audio_mid: Option<Mid>,
    opus_pt: Option<Pt>,
    channel: Option<ChannelId>,
    channel_labels: Vec<(ChannelId, String)>,
    bridge: AudioBridge,
    metadata: HashMap<String, String>,
    /// Set when the owning backend was lost (how, and which owner), until the loop takes the
    /// session's report.
    owner_lost: Option<(OwnerLoss, u64)>,
    /// A graceful end: when to start str0m's close (after the goodbye message went out).
    close_at: Option<Instant>,
    /// Bridge counters already added to the loop's metrics.
    published_bridge: BridgeCounters,
    /// Where the client is: the paths str0m authenticated, and the check being answered.
    paths: ClientPaths,
    /// How many of the caller's binding requests may reach str0m (see `check_budget`).
    checks: CheckBudget,
    state: SessionState,
    end_reason: Option<EndReason>,
    created: Instant,
    connected_at: Option<Instant>,
    connect_deadline: Instant,
    /// When the session ends with `max_duration`, if it is limited.
    end_deadline: Option<Instant>,
    counters: SessionCounters,
    /// The timer entry the loop has for this session, if any.
    pub scheduled: Option<Instant>,
    /// str0m's own next deadline, from its last `Output::Timeout`: before it, a timeout
    /// input is work str0m would only find nothing to do in (see `handle_timeout`).
    rtc_due: Instant,
    /// Socket arrival of the caller's last few RTP packets, for the bridge's hand-off timing.
    arrivals: RtpArrivals,
    /// The caller's network (str0m's RTCP statistics), and a sample the loop has yet to take.
    quality: QualityTracker,
    quality_sample: Option<QualitySample>,
    /// The caller's turns: end of speech → reply heard (see `media::turn_timing`).
    turns: TurnTimer,
    span: tracing::Span,
}

impl Session {
    /// Builds the ICE-lite `Rtc` and accepts the offer. Returns the session and the answer SDP.
    /// Runs on the control plane, never on a media loop (whose sessions would wait for it).
    pub fn accept(
        now: Instant,
        serial: u64,
        params: SessionParams,
        offer: SdpOffer,
    ) -> Result<(Session, String), SessionError> {
        let creds = IceCreds {
            ufrag: params.ufrag.clone(),
            pass: params.pass,
        };
        let mut rtc = rtc_config::new_rtc(now, creds, params.cert, &params.candidates)?;
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| SessionError::Offer(e.to_string()))?;
        // str0m announces remote media (MediaAdded) only later; the offer already names the mid.
        let audio_mid = Mid::from(params.audio_mid.as_str());
        let answer_sdp = answer.to_sdp_string();
        if rtc.media(audio_mid).is_none() || !answer_sdp.contains("opus/48000") {
            return Err(SessionError::Offer(
                "no audio m-line could be negotiated (Opus required)".into(),
            ));
        }
        let span = tracing::info_span!("session", id = %params.id);
        let mut bridge = AudioBridge::new(params.id.to_string(), params.encoder);
        bridge.set_call(params.call_id.to_string(), params.generation);
        let session = Session {
            id: params.id,
            serial,
            rtc,
            ufrag: params.ufrag,
            candidates: params.candidates,
            audio_mid: Some(audio_mid),
            opus_pt: None,
            channel: None,
            channel_labels: Vec::new(),
            bridge,
            metadata: params.metadata,
            owner_lost: None,
            close_at: None,
            published_bridge: BridgeCounters::default(),
            paths: ClientPaths::default(),
            checks: CheckBudget::new(now),
            state: SessionState::Connecting,
            end_reason: None,
            created: now,
            connected_at: None,
            connect_deadline: now + params.connect_timeout,
            end_deadline: params.max_duration.map(|d| now + d),
            counters: SessionCounters::default(),
            scheduled: None,
            rtc_due: now,
            arrivals: RtpArrivals::default(),
            quality: QualityTracker::new(now),
            quality_sample: None,
            turns: TurnTimer::default(),
            span,
        };
        Ok((session, answer_sdp))
    }

    pub fn ufrag(&self) -> &str {
        &self.ufrag
    }

    pub fn state(&self) -> SessionState {
        self.state
    }

    pub fn end_reason(&self) -> Option<EndReason> {
        self.end_reason
    }

    pub fn is_ended(&self) -> bool {
        self.state == SessionState::Ended
    }

    /// The demux keys of the session's authenticated paths.
    pub fn client_peers(&self) -> impl Iterator<Item = PeerKey> + '_ {
        self.paths.iter().map(ClientPath::peer)
    }

    pub fn counters(&self) -> &SessionCounters {
        &self.counters
    }

    /// The local candidate address str0m must see as the datagram's destination: the one of
    /// the same transport and IP family as the client (ICE checks only arrive on advertised
    /// candidates).
    pub fn destination_for(&self, source: SocketAddr, tcp: bool) -> SocketAddr {
        let candidates = if tcp {
            &self.candidates.tcp
        } else {
            &self.candidates.udp
        };
        candidates
            .iter()
            .find(|c| c.is_ipv4() == source.is_ipv4())
            .or(candidates.first())
            .copied()
            .unwrap_or(source)
    }

    /// Whether a binding request from `from` may reach str0m now (see `check_budget`);
    /// `authenticated`: the session already holds `from`. Refused: the drop's reason.
    pub fn admit_check(
        &mut self,
        now: Instant,
        from: SocketAddr,
        authenticated: bool,
    ) -> Result<(), DropReason> {
        self.checks.admit(now, from, authenticated)
    }

    /// Feeds one received datagram to str0m. Returns false if str0m rejected it. Nothing here
    /// changes where replies go: a `binding_request` only lets str0m's answer to it return on
    /// its path (see [`Session::add_client_addr`] for what an answered check changes).
    /// `arrived` is when it reached the socket (at or before `now`, when it was read): str0m
    /// runs on `now`, the bridge times its audio from `arrived`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        arrived: Instant,
        from: ClientPath,
        bytes: &[u8],
        binding_request: bool,
    ) -> bool {
        let source = from.addr;
        if binding_request {
            self.paths.begin_check(from);
        }
        let (proto, tcp) = match from.transport {
            Transport::Udp => (Protocol::Udp, false),
            Transport::Tcp { .. } => (Protocol::Tcp, true),
        };
        let destination = self.destination_for(source, tcp);
        let Ok(receive) = Receive::new(proto, source, destination, bytes) else {
            return false;
        };
        self.counters.datagrams_in += 1;
        self.counters.bytes_in += bytes.len() as u64;
        self.arrivals.note(bytes, arrived);
        if let Err(e) = self.rtc.handle_input(Input::Receive(now, receive)) {
            tracing::debug!(parent: &self.span, error = %e, "str0m rejected input");
            return false;
        }
        true
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        // str0m gets a timeout only when its own deadline is due or this call gave it work.
        // Most timeouts of a connected session are 20 ms bridge ticks with nothing to play,
        // and handing each to str0m walked its timers for nothing (`downlink/idle` in
        // benches/session.rs; docs/SESSION_COST.md, "Since then: idle ticks, the tick grid").
        let mut rtc_work = now >= self.rtc_due;
        if self.close_at.is_some_and(|t| t <= now) {
            self.close_at = None;
            rtc_work = true;
            if self.rtc.close().is_err() {
                self.rtc.disconnect();
            }
        }
        if self.state == SessionState::Connecting && now >= self.connect_deadline {
            self.end(now, EndReason::ConnectTimeout);
            return;
        }
        if self.end_deadline.is_some_and(|t| now >= t) {
            self.end(now, EndReason::MaxDuration);
            return;
        }
        if self.bridge.next_tick().is_some_and(|t| t <= now) {
            rtc_work |= self.audio_tick(now);
        }
        if !rtc_work {
            return;
        }
        if let Err(e) = self.rtc.handle_input(Input::Timeout(now)) {
            tracing::info!(parent: &self.span, error = %e, "session failed on timeout");
            self.end(now, EndReason::RtcError);
        }
    }

    /// Drains str0m's output: transmits go to `send`, events update state and counters.
    /// Returns the next deadline, or `None` once the session has ended.
    pub fn poll(
        &mut self,
        now: Instant,
        send: &mut dyn FnMut(&Transmit, Route),
    ) -> Option<Instant> {
        let next = self.drain_output(now, send);
        self.paths.end_check();
        next
    }

    fn drain_output(
        &mut self,
        now: Instant,
        send: &mut dyn FnMut(&Transmit, Route),
    ) -> Option<Instant> {
        loop {
            if self.is_ended() && !self.rtc.is_alive() {
                return None;
            }
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.rtc_due = t;
                    self.publish_quality_sample(); // this round's stats are all in
                    if let Some(close_at) = self.close_at {
                        return Some(t.min(close_at));
                    }
                    if self.is_ended() {
                        // Goodbyes (RTCP BYE, DTLS close_notify) are out; nothing waits on
                        // replies, so the session is done.
                        self.rtc.disconnect();
                        return None;
                    }
                    let mut next = t;
                    if self.state == SessionState::Connecting {
                        next = next.min(self.connect_deadline);
                    }
                    if let Some(tick) = self.bridge.next_tick() {
                        next = next.min(tick);
                    }
                    if let Some(end) = self.end_deadline {
                        next = next.min(end);
                    }
                    return Some(next);
                }
                Ok(Output::Transmit(t)) => {
                    self.counters.datagrams_out += 1;
                    self.counters.bytes_out += t.contents.len() as u64;
                    let route = self.paths.route_for(&t);
                    send(&t, route);
                }
                Ok(Output::Event(e)) => self.on_event(now, e),
                Err(e) => {
                    tracing::info!(parent: &self.span, error = %e, "session failed");
                    self.end(now, EndReason::RtcError);
                    return None;
                }
            }
        }
    }

    fn on_event(&mut self, now: Instant, event: Event) {
        match event {
            Event::MediaAdded(m) if m.kind == MediaKind::Audio => {
                self.audio_mid.get_or_insert(m.mid);
            }
            Event::MediaData(d) if Some(d.mid) == self.audio_mid => {
                self.counters.audio_packets_in += 1;
                let seq = **d.seq_range.end();
                let ts = d.time.numer() as u32;
                // str0m's `network_time` is the loop's read of the packet's batch.
                let arrival = self.arrivals.of(seq).unwrap_or(d.network_time);
                let level = d.ext_vals.audio_level;
                self.bridge.on_audio_packet(arrival, seq, ts, d.data);
                self.on_uplink_level(now, arrival, level);
            }
            Event::Connected if self.state == SessionState::Connecting => {
                self.state = SessionState::Connected;
                self.connected_at = Some(now);
                self.bridge.on_connected(now);
                tracing::info!(
                    parent: &self.span,
                    connect_ms = now.duration_since(self.created).as_millis() as u64,
                    "session connected"
                );
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                // ICE-lite: str0m reports Disconnected when consent checks stop arriving.
                self.end(now, EndReason::IceDisconnected);
            }
            Event::ChannelOpen(id, label) => self.on_channel_open(now, id, label),
            Event::ChannelData(d) => self.on_channel_data(d),
            Event::MediaIngressStats(st) if Some(st.mid) == self.audio_mid => {
                self.quality.on_ingress_stats(now, &st)
            }
            Event::MediaEgressStats(st) if Some(st.mid) == self.audio_mid => {
                self.quality.on_egress_stats(now, &st)
            }
            Event::Closed => self.end(now, EndReason::ClosedByPeer),
            _ => {}
        }
    }

    /// A sample due goes to the backends and (the session's report) the loop's histograms.
    fn publish_quality_sample(&mut self) {
        let sample = self.quality.take_sample();
        if let Some(sample) = sample.filter(|_| self.state == SessionState::Connected) {
            self.bridge.on_quality(sample.to_proto(&self.quality.now()));
            self.quality_sample = Some(sample);
        }
    }

    /// Ends the session: str0m gets to flush its goodbyes on the next poll.
    pub fn end(&mut self, now: Instant, reason: EndReason) {
        if self.is_ended() {
            return;
        }
        self.state = SessionState::Ended;
        self.end_reason = Some(reason);
        let summary = Some(self.quality.summary()).filter(|s| s.samples > 0);
        let summary = summary.map(|s| s.to_proto());
        self.bridge.on_ended(now, reason.as_str(), summary);
        match reason {
            // The peer is gone or broken: nothing to say goodbye to.
            EndReason::IceDisconnected
            | EndReason::ConnectTimeout
            | EndReason::RtcError
            | EndReason::ClosedByPeer => self.rtc.disconnect(),
            // The peer is still there: tell it why on the data channel, then say goodbye
            // (RTCP BYE, DTLS close_notify) so it does not wait for consent to fail.
            _ => {
                let told = self.send_text(format!(
                    r#"{{"type":"session.ended","reason":"{}"}}"#,
                    reason.as_str()
                ));
                // Give SCTP a moment to deliver the message before the DTLS close.
                let grace = if told { CLOSE_GRACE } else { Duration::ZERO };
                self.close_at = Some(now + grace);
            }
        }
        tracing::info!(parent: &self.span, reason = reason.as_str(), counters = ?self.counters, "session ended");
    }

    /// The transceiver drains: asks the caller to carry the call elsewhere with its resume
    /// credential; false when it cannot be told (no open data channel).
    pub fn ask_to_migrate(&mut self) -> bool {
        let migrate = r#"{"type":"session.migrate"}"#;
        self.state == SessionState::Connected && self.send_text(migrate.into())
    }

    /// What the bridge counted and what happened to the owner since the last call.
    pub fn take_report(&mut self) -> SessionReport {
        let now = self.bridge.counters();
        let bridge = now.since(&self.published_bridge);
        self.published_bridge = now;
        SessionReport {
            bridge,
            handoff: self.bridge.take_handoff(),
            started_talking: self.bridge.take_started_talking(),
            owner_lost: self.owner_lost.take(),
            quality: self.quality_sample.take(),
            rtcp_implausible: self.quality.take_implausible(),
            turns: self.turns.take_counts(),
        }
    }

    /// Makes a backend stream the session's owner. The dispatcher decides ownership and has
    /// approved this attach (it refuses a second owner of a session it counts as owned), so
    /// an owner still here is one it already gave up on (its worker vanished, or it stalled)
    /// whose streams have not closed yet, e.g. a frozen backend's other connections awaiting
    /// their keepalive timeout: it is replaced. The new owner's ticks fall on a grid chosen
    /// from its mode and the loop's size (see `audio_bridge::tick_grid`).
    pub fn attach_owner(
        &mut self,
        now: Instant,
        endpoints: OwnerEndpoints,
        ticks: LoopTicks,
    ) -> Result<(), AttachError> {
        if self.bridge.has_live_owner() {
            tracing::info!(parent: &self.span, "replacing an owner the dispatcher gave up on");
            self.bridge.detach_owner(CloseReason::Replaced);
        }
        self.bridge
            .choose_tick_grid(endpoints.mode, ticks.sessions, ticks.coarse);
        self.bridge.attach_owner(endpoints, now, &self.metadata)?;
        Ok(())
    }

    /// Adds a listen-only subscriber, unless the session already has `max_taps` live ones.
    pub fn add_tap(&mut self, tap: TapSubscriber, max_taps: usize) -> Result<(), AttachError> {
        if self.bridge.live_tap_count() >= max_taps {
            return Err(AttachError::TooManyTaps(max_taps));
        }
        self.bridge.add_tap(tap)?;
        Ok(())
    }

    /// The bridge's 20 ms tick: act on backend messages, then send at most one Opus frame.
    /// Returns whether it gave str0m work (a frame, a data message, a goodbye) to drive.
    fn audio_tick(&mut self, now: Instant) -> bool {
        let mut rtc_work = false;
        if self.bridge.owner_stalled(now) {
            tracing::info!(parent: &self.span, "backend stalled (uplink queue full); re-dispatching");
            self.owner_lost = Some((OwnerLoss::Stalled, self.bridge.last_owner_id()));
        }
        while let Some(action) = self.bridge.poll_downlink() {
            match action {
                BridgeAction::SendData(msg) => {
                    rtc_work |= self.send_data(msg);
                }
                BridgeAction::Hangup(reason) => {
                    tracing::info!(parent: &self.span, %reason, "backend hung up");
                    self.end(now, EndReason::BackendHangup);
                    return true;
                }
                BridgeAction::OwnerLost => {
                    self.owner_lost = Some((OwnerLoss::StreamEnded, self.bridge.last_owner_id()))
                }
            }
        }
        let Some(mid) = self.audio_mid else {
            return rtc_work;
        };
        let pt = match self.opus_pt {
            Some(pt) => pt,
            None => {
                let Some(w) = self.rtc.writer(mid) else {
                    return rtc_work;
                };
                let Some(pt) = w
                    .payload_params()
                    .find(|p| p.spec().codec == Codec::Opus)
                    .map(|p| p.pt())
                else {
                    return rtc_work;
                };
                self.opus_pt = Some(pt);
                pt
            }
        };
        let Some((packet, ts)) = self.bridge.tick(now) else {
            return rtc_work;
        };
        let Some(writer) = self.rtc.writer(mid) else {
            return rtc_work;
        };
        let time = MediaTime::new(u64::from(ts), Frequency::FORTY_EIGHT_KHZ);
        match writer.write(pt, now, time, packet) {
            Ok(()) => self.counters.audio_packets_out += 1,
            Err(e) => tracing::debug!(parent: &self.span, error = %e, "audio write failed"),
        }
        self.after_downlink_frame();
        true
    }

    /// Whether replies to `path.addr` already take exactly `path`.
    pub fn answers_on(&self, path: &ClientPath) -> bool {
        self.paths.iter().any(|p| p == path)
    }

    /// SRTP packets str0m has authenticated for this session so far, replays not counted
    /// (vendored str0m: `Rtc::srtp_packets_authenticated`).
    pub fn srtp_authenticated(&self) -> u64 {
        self.rtc.srtp_packets_authenticated()
    }

    /// Records a path on which str0m has answered an authenticated check (see
    /// [`ClientPaths::add`]); returns a client evicted to keep the list bounded.
    pub fn add_client_addr(&mut self, path: ClientPath) -> Option<PeerKey> {
        self.paths.add(path)
    }

    /// Drops a client that another session has since authenticated.
    pub fn forget_client_addr(&mut self, peer: PeerKey) {
        self.paths.forget(peer);
    }

    /// ICE restart: accept the new offer, but keep the session on this loop by replacing the
    /// random credentials str0m picks with the freshly minted `ufrag` (which names this loop).
    /// Returns the answer SDP.
    pub fn ice_restart(
        &mut self,
        offer: SdpOffer,
        ufrag: String,
        pass: String,
    ) -> Result<String, SessionError> {
        if self.state != SessionState::Connected {
            return Err(SessionError::NotConnected);
        }
        let answer = self
            .rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| SessionError::Offer(e.to_string()))?;
        let random = self.rtc.direct_api().local_ice_credentials();
        let minted = IceCreds {
            ufrag: ufrag.clone(),
            pass: pass.clone(),
        };
        self.rtc.direct_api().set_local_ice_credentials(minted);
        // The random ufrag also appears in each a=candidate line ("ufrag ..."), which clients
        // check against a=ice-ufrag: replace every occurrence (it is 16 random chars).
        let sdp = answer
            .to_sdp_string()
            .replace(&random.ufrag, &ufrag)
            .replace(&random.pass, &pass);
        self.ufrag = ufrag;
        self.counters.ice_restarts += 1;
        Ok(sdp)
    }

    pub fn snapshot(&self, now: Instant, loop_index: usize) -> SessionSnapshot {
        let shown = PathsShown::of(self.paths.iter());
        SessionSnapshot {
            id: self.id.to_string(),
            state: self.state,
            loop_index,
            server_ufrag: self.ufrag.clone(),
            client_addrs: shown.client_addrs,
            client_paths: shown.client_paths,
            relays: shown.relays,
            age_ms: now.duration_since(self.created).as_millis() as u64,
            connect_ms: self
                .connected_at
                .map(|c| c.duration_since(self.created).as_millis() as u64),
            data_channel_open: self.channel.is_some(),
            backend_attached: self.bridge.has_owner(),
            taps: self.bridge.tap_count(),
            counters: self.counters,
            bridge: self.bridge.counters(),
            quality: self.quality.snapshot(),
            turns: self.turns.snapshot(),
        }
    }
}
