//! One simulated WebRTC client as a pure state machine: str0m's `Rtc` plus Opus on both sides.
//!
//! No sockets, no threads, no clock. The owner feeds in datagrams
//! ([`ClientSession::handle_datagram`]) and time ([`ClientSession::handle_timeout`]), then sends
//! what [`ClientSession::poll_transmit`] hands out and wakes again at
//! [`ClientSession::poll_timeout`]. Every mutation of the `Rtc` is followed by a full drain of
//! `poll_output` (str0m's single-mutation invariant); the drain routes str0m's output here:
//! transmits are queued (after loss injection), audio frames are decoded, data-channel messages
//! and lifecycle timings are recorded.
//!
//! Uplink audio rides the same deadline: from DTLS connected, one Opus frame every 20 ms with an
//! RTP clock advancing 960 ticks per frame, for `send_for`.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::channel::ChannelId;
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive, TcpType, Transmit};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcError};

use crate::downlink_audio::{DownlinkAudio, DownlinkCounters};
use crate::loss_injector::{is_rtp, LossInjector};
use crate::session_config::{SessionConfig, DATA_CHANNEL_LABEL};
use crate::session_report::SessionReport;
use crate::signal::{SignalSource, SAMPLE_RATE};
use crate::signaling_client::{sdp_ice_ufrag, CreatedSession};
use crate::tail_buffer::TailBuffer;
use crate::uplink_audio::UplinkAudio;
use crate::uplink_schedule::UplinkSchedule;

pub use crate::session_error::SessionError;
pub use crate::session_event::{SessionEvent, SessionTimings};

/// Lifecycle events kept for [`ClientSession::poll_event`] when nobody polls them.
const MAX_PENDING_EVENTS: usize = 64;

#[derive(Debug, Default)]
struct Counters {
    datagrams_received: u64,
    datagrams_unparsed: u64,
    datagrams_sent: u64,
    send_errors: u64,
    audio_packets_sent: u64,
    channel_messages_received: u64,
    ice_restarts: u32,
    tcp_frames_received: u64,
}

/// One client: an offering, controlling, full-ICE str0m peer with one SendRecv Opus m-line and,
/// optionally, the `oai-events` data channel.
pub struct ClientSession {
    rtc: Rtc,
    started: Instant,
    local_addr: SocketAddr,
    mid: Option<Mid>,
    opus_pt: Option<Pt>,
    pending: Option<SdpPendingOffer>,
    channel: Option<ChannelId>,
    channel_open: bool,
    session_id: String,
    location: String,
    server_ufrag: String,
    rtc_deadline: Instant,
    transmits: VecDeque<Transmit>,
    events: VecDeque<SessionEvent>,
    uplink: UplinkAudio,
    plan: UplinkSchedule,
    loss: LossInjector,
    downlink: DownlinkAudio,
    messages: TailBuffer<String>,
    timings: SessionTimings,
    counters: Counters,
    ice_state: IceConnectionState,
    dtls_connected: bool,
    closed: bool,
    last_error: Option<String>,
    remote_addrs_seen: HashSet<SocketAddr>,
    last_source: Option<SocketAddr>,
    destinations: HashSet<SocketAddr>,
    last_destination: Option<SocketAddr>,
}

impl ClientSession {
    /// A new session whose socket is bound at `local_addr`, and its SDP offer.
    ///
    /// `started` is the origin of all [`SessionTimings`]: pass the instant signaling begins.
    pub fn new(
        cfg: &SessionConfig,
        local_addr: SocketAddr,
        started: Instant,
    ) -> Result<(Self, String), SessionError> {
        let rtc = Rtc::builder()
            // The transceiver's provider: one DTLS configuration per process. str0m's default
            // builds one per session and dimpl self-tests its crypto on each build, which a load
            // generator opening many sessions a second pays on its own core.
            // The client still makes a certificate of its own per session, as a browser does.
            .set_crypto_provider(voxgate_dtls::crypto_provider())
            .set_ice_lite(false)
            .clear_codecs()
            .enable_opus(true, false)
            .build(started);
        let source = SignalSource::sine(cfg.tone_hz, cfg.amplitude);
        let uplink = if cfg.precoded_uplink {
            UplinkAudio::looped(source)?
        } else {
            UplinkAudio::live(source)?
        };
        let pcm_cap = (cfg.keep_pcm.as_secs_f64() * f64::from(SAMPLE_RATE)) as usize;
        let mut s = ClientSession {
            rtc,
            started,
            local_addr,
            mid: None,
            opus_pt: None,
            pending: None,
            channel: None,
            channel_open: false,
            session_id: String::new(),
            location: String::new(),
            server_ufrag: String::new(),
            rtc_deadline: started,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            uplink,
            plan: UplinkSchedule::new(cfg.send_for),
            loss: LossInjector::new(cfg.uplink_loss, cfg.seed),
            downlink: DownlinkAudio::new(cfg.decode_downlink, cfg.keep_arrivals, pcm_cap)?,
            messages: TailBuffer::new(cfg.keep_messages),
            timings: SessionTimings::default(),
            counters: Counters::default(),
            ice_state: IceConnectionState::New,
            dtls_connected: false,
            closed: false,
            last_error: None,
            remote_addrs_seen: HashSet::new(),
            last_source: None,
            destinations: HashSet::new(),
            last_destination: None,
        };

        if cfg.udp {
            s.rtc
                .add_local_candidate(Candidate::host(local_addr, "udp")?);
        }
        if cfg.tcp {
            // Active candidates advertise port 9 (RFC 6544 §4.5): the real port is whatever
            // the connection gets.
            let c = Candidate::builder()
                .tcp()
                .host(Self::tcp_candidate_addr(local_addr))
                .tcptype(TcpType::Active)
                .build()?;
            s.rtc.add_local_candidate(c);
        }
        s.drain(started);

        let mut api = s.rtc.sdp_api();
        let mid = api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
        if cfg.data_channel {
            api.add_channel(DATA_CHANNEL_LABEL.to_owned());
        }
        let (offer, pending) = api.apply().ok_or(SessionError::NothingToOffer)?;
        s.mid = Some(mid);
        s.pending = Some(pending);
        s.drain(started);
        Ok((s, offer.to_sdp_string()))
    }

    /// Applies the result of the signaling POST: records the server's session id and location,
    /// then accepts the answer.
    pub fn accept_created(
        &mut self,
        now: Instant,
        created: &CreatedSession,
    ) -> Result<(), SessionError> {
        self.session_id.clone_from(&created.session_id);
        self.location.clone_from(&created.location);
        self.accept_answer(now, &created.answer_sdp)
    }

    /// Accepts the answer to the pending offer (the initial one or an ICE restart).
    pub fn accept_answer(&mut self, now: Instant, answer_sdp: &str) -> Result<(), SessionError> {
        let pending = self.pending.take().ok_or(SessionError::NoPendingOffer)?;
        let answer = SdpAnswer::from_sdp_string(answer_sdp)?;
        let result = self.rtc.sdp_api().accept_answer(pending, answer);
        if let Err(e) = result {
            self.drain(now);
            return Err(e.into());
        }
        if let Some(ufrag) = sdp_ice_ufrag(answer_sdp) {
            self.server_ufrag = ufrag.to_owned();
        }
        if self.timings.answer.is_none() {
            self.timings.answer = Some(now.saturating_duration_since(self.started));
        } else {
            self.counters.ice_restarts += 1;
        }
        self.opus_pt = self.mid.and_then(|mid| {
            self.rtc.writer(mid).and_then(|w| {
                w.payload_params()
                    .find(|p| p.spec().codec == Codec::Opus)
                    .map(|p| p.pt())
            })
        });
        self.drain(now);
        if self.opus_pt.is_none() {
            return Err(SessionError::NoOpus);
        }
        Ok(())
    }

    /// Starts an ICE restart (new local ICE credentials, same candidates); returns the offer to
    /// PATCH to the server. Finish with [`ClientSession::accept_answer`], or abandon with
    /// [`ClientSession::cancel_pending_offer`].
    pub fn start_ice_restart(&mut self, now: Instant) -> Result<String, SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        let mut api = self.rtc.sdp_api();
        api.ice_restart(true);
        let (offer, pending) = api.apply().ok_or(SessionError::NothingToOffer)?;
        self.pending = Some(pending);
        self.drain(now);
        Ok(offer.to_sdp_string())
    }

    /// Forgets an outstanding offer (for example after the PATCH failed).
    pub fn cancel_pending_offer(&mut self) {
        self.pending = None;
    }

    /// The address of the active TCP candidate for a session whose UDP socket is `local_addr`.
    pub fn tcp_candidate_addr(local_addr: SocketAddr) -> SocketAddr {
        SocketAddr::new(local_addr.ip(), 9)
    }

    /// Feeds one datagram that arrived on this session's socket.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        source: SocketAddr,
        destination: SocketAddr,
        bytes: &[u8],
    ) {
        self.handle_receive(now, Protocol::Udp, source, destination, bytes);
    }

    /// Feeds one RFC 4571 frame that arrived on the session's TCP connection to `source`.
    pub fn handle_tcp_frame(&mut self, now: Instant, source: SocketAddr, bytes: &[u8]) {
        let destination = Self::tcp_candidate_addr(self.local_addr);
        self.counters.tcp_frames_received += 1;
        self.handle_receive(now, Protocol::Tcp, source, destination, bytes);
    }

    fn handle_receive(
        &mut self,
        now: Instant,
        proto: Protocol,
        source: SocketAddr,
        destination: SocketAddr,
        bytes: &[u8],
    ) {
        if self.closed || !self.rtc.is_alive() {
            return;
        }
        self.counters.datagrams_received += 1;
        if self.last_source != Some(source) {
            self.last_source = Some(source);
            self.remote_addrs_seen.insert(source);
        }
        let Ok(receive) = Receive::new(proto, source, destination, bytes) else {
            self.counters.datagrams_unparsed += 1;
            return;
        };
        if let Err(e) = self.rtc.handle_input(Input::Receive(now, receive)) {
            self.fail(e);
            return;
        }
        self.drain(now);
    }

    /// Advances time: str0m's timers, then any uplink frames that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed || !self.rtc.is_alive() {
            return;
        }
        if let Err(e) = self.rtc.handle_input(Input::Timeout(now)) {
            self.fail(e);
            return;
        }
        self.drain(now);
        self.pump_uplink(now);
    }

    /// When to call [`ClientSession::handle_timeout`] next; `None` once the session is dead.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed || !self.rtc.is_alive() {
            return None;
        }
        Some(match self.plan.next_at() {
            Some(t) => t.min(self.rtc_deadline),
            None => self.rtc_deadline,
        })
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.transmits.pop_front()?;
        self.counters.datagrams_sent += 1;
        Some(t)
    }

    /// Tells the session the socket refused a datagram it handed out.
    pub fn record_send_error(&mut self) {
        self.counters.send_errors += 1;
    }

    /// The next lifecycle event (the most recent 64 are kept if nobody polls).
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// Sends a text message on the data channel.
    pub fn send_channel_text(&mut self, now: Instant, text: &str) -> Result<(), SessionError> {
        let id = self
            .channel
            .filter(|_| self.channel_open)
            .ok_or(SessionError::ChannelNotOpen)?;
        let mut channel = self.rtc.channel(id).ok_or(SessionError::ChannelNotOpen)?;
        let written = channel.write(false, text.as_bytes());
        self.drain(now);
        match written {
            Ok(true) => Ok(()),
            Ok(false) => Err(SessionError::ChannelBufferFull),
            Err(e) => Err(e.into()),
        }
    }

    /// Stops uplink audio now.
    pub fn stop_audio(&mut self) {
        self.plan.stop();
    }

    /// (Re)starts uplink audio at `now` for `send_for` (`Duration::MAX`: until stopped).
    /// Ignored until the session is connected; the RTP clock continues where it stopped.
    pub fn start_audio(&mut self, now: Instant, send_for: Duration) {
        self.plan.set_send_for(send_for);
        if self.dtls_connected && !self.closed {
            self.schedule_uplink(now);
        }
    }

    /// Closes locally: RTCP BYE, SCTP shutdown and DTLS close_notify are queued for sending.
    pub fn close(&mut self, now: Instant) {
        if self.rtc.is_alive() {
            if let Err(e) = self.rtc.close() {
                self.last_error.get_or_insert_with(|| e.to_string());
            }
            self.drain(now);
        }
        self.mark_closed();
    }

    /// Goes silent without telling anyone, like a client whose network vanished.
    pub fn abandon(&mut self) {
        self.rtc.disconnect();
        self.transmits.clear();
        self.mark_closed();
    }

    /// Snapshot of identity, timings, counters and state.
    pub fn report(&self) -> SessionReport {
        let down = self.downlink.counters();
        SessionReport {
            session_id: self.session_id.clone(),
            location: self.location.clone(),
            local_addr: self.local_addr,
            server_ufrag: self.server_ufrag.clone(),
            connected: self.is_connected(),
            t_answer: self.timings.answer,
            t_ice_connected: self.timings.ice_connected,
            t_dtls_connected: self.timings.dtls_connected,
            t_first_audio_sent: self.timings.first_audio_sent,
            t_first_audio_received: self.timings.first_audio_received,
            audio_frames_written: self.plan.frames_written(),
            audio_packets_sent: self.counters.audio_packets_sent,
            audio_packets_dropped: self.loss.dropped(),
            audio_packets_received: down.packets,
            audio_packets_lost: down.packets_lost,
            frames_decoded: down.frames_decoded,
            frames_concealed: down.frames_concealed,
            channel_open: self.channel_open,
            channel_messages_received: self.counters.channel_messages_received,
            ice_state: format!("{:?}", self.ice_state),
            ice_restarts: self.counters.ice_restarts,
            datagrams_received: self.counters.datagrams_received,
            tcp_frames_received: self.counters.tcp_frames_received,
            datagrams_sent: self.counters.datagrams_sent,
            send_errors: self.counters.send_errors,
            closed: self.closed,
            last_error: self.last_error.clone(),
        }
    }

    /// ICE connected (or completed), DTLS up, and not closed.
    pub fn is_connected(&self) -> bool {
        self.dtls_connected
            && !self.closed
            && matches!(
                self.ice_state,
                IceConnectionState::Connected | IceConnectionState::Completed
            )
    }

    /// Whether the session has ended.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether uplink audio is currently scheduled.
    pub fn is_sending_audio(&self) -> bool {
        self.plan.is_running()
    }

    /// The current ICE connection state.
    pub fn ice_state(&self) -> IceConnectionState {
        self.ice_state
    }

    /// Whether the data channel is open.
    pub fn channel_open(&self) -> bool {
        self.channel_open
    }

    /// The local UDP address (the advertised host candidate).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Server session id, once answered.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// `Location` of the server resource, once answered.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The server's current ICE ufrag.
    pub fn server_ufrag(&self) -> &str {
        &self.server_ufrag
    }

    /// Lifecycle timings.
    pub fn timings(&self) -> SessionTimings {
        self.timings
    }

    /// Downlink counters (packets, loss, decoded and concealed frames).
    pub fn downlink_counters(&self) -> DownlinkCounters {
        self.downlink.counters()
    }

    /// The most recent decoded downlink audio, 48 kHz mono, concealment included.
    pub fn received_pcm(&self) -> &[i16] {
        self.downlink.pcm()
    }

    /// Downlink frames received per Opus TOC configuration (`toc >> 3`: 0–11 SILK only, 12–15
    /// hybrid, 16–31 CELT only).
    pub fn received_opus_configs(&self) -> [u64; 32] {
        self.downlink.opus_configs()
    }

    /// Arrival instants of the most recent downlink audio packets.
    pub fn arrival_times(&self) -> &[Instant] {
        self.downlink.arrival_times()
    }

    /// Every source address that sent this session a datagram.
    pub fn remote_addrs_seen(&self) -> &HashSet<SocketAddr> {
        &self.remote_addrs_seen
    }

    /// Every address this session sent a datagram to.
    pub fn destinations(&self) -> &HashSet<SocketAddr> {
        &self.destinations
    }

    /// The most recent data-channel messages received (binary ones lossily as UTF-8).
    pub fn channel_messages(&self) -> &[String] {
        self.messages.as_slice()
    }

    /// Uplink frames skipped because the owner woke the session too late.
    pub fn uplink_frames_skipped(&self) -> u64 {
        self.plan.frames_skipped()
    }

    /// Read access to the underlying str0m instance.
    pub fn rtc(&self) -> &Rtc {
        &self.rtc
    }

    /// Drains str0m until it asks for a timeout, routing every output.
    fn drain(&mut self, now: Instant) {
        while self.rtc.is_alive() {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.rtc_deadline = t;
                    return;
                }
                Ok(Output::Transmit(t)) => self.on_transmit(now, t),
                Ok(Output::Event(e)) => self.on_event(now, e),
                Err(e) => {
                    self.fail(e);
                    return;
                }
            }
        }
        self.mark_closed();
    }

    fn on_transmit(&mut self, now: Instant, t: Transmit) {
        if self.loss.should_drop(&t.contents) {
            return;
        }
        if is_rtp(&t.contents) {
            self.counters.audio_packets_sent += 1;
            if self.timings.first_audio_sent.is_none() {
                self.timings.first_audio_sent = Some(self.since_start(now));
            }
        }
        if self.last_destination != Some(t.destination) {
            self.last_destination = Some(t.destination);
            self.destinations.insert(t.destination);
        }
        self.transmits.push_back(t);
    }

    fn on_event(&mut self, now: Instant, event: Event) {
        match event {
            Event::IceConnectionStateChange(state) => {
                self.ice_state = state;
                let up = matches!(
                    state,
                    IceConnectionState::Connected | IceConnectionState::Completed
                );
                if up && self.timings.ice_connected.is_none() {
                    self.timings.ice_connected = Some(self.since_start(now));
                }
                self.push_event(SessionEvent::IceState(state));
            }
            Event::Connected => {
                self.dtls_connected = true;
                if self.timings.dtls_connected.is_none() {
                    self.timings.dtls_connected = Some(self.since_start(now));
                    self.schedule_uplink(now);
                }
                tracing::debug!(session = %self.session_id, "connected");
                self.push_event(SessionEvent::Connected);
            }
            Event::MediaData(data) => {
                if data.params.spec().codec != Codec::Opus {
                    return;
                }
                if self.timings.first_audio_received.is_none() {
                    self.timings.first_audio_received =
                        Some(data.network_time.saturating_duration_since(self.started));
                }
                let (first, last) = (**data.seq_range.start(), **data.seq_range.end());
                self.downlink
                    .on_frame(data.network_time, first, last, &data.data);
            }
            Event::ChannelOpen(id, label)
                if self.channel.is_none() || label == DATA_CHANNEL_LABEL =>
            {
                self.channel = Some(id);
                self.channel_open = true;
                self.push_event(SessionEvent::ChannelOpen);
            }
            Event::ChannelData(data) => {
                self.counters.channel_messages_received += 1;
                self.messages
                    .push(String::from_utf8_lossy(&data.data).into_owned());
            }
            Event::ChannelClose(id) if self.channel == Some(id) => {
                self.channel_open = false;
                self.push_event(SessionEvent::ChannelClosed);
            }
            Event::Closed => self.mark_closed(),
            _ => {}
        }
    }

    fn schedule_uplink(&mut self, now: Instant) {
        if self.opus_pt.is_none() {
            self.plan.stop();
        } else {
            self.plan.start(now);
        }
    }

    /// Writes every uplink frame that is due by `now`.
    fn pump_uplink(&mut self, now: Instant) {
        while let Some((due, rtp_time)) = self.plan.poll_frame(now) {
            if let Err(e) = self.write_frame(due, rtp_time) {
                self.last_error.get_or_insert_with(|| e.to_string());
                self.plan.stop();
                return;
            }
            self.plan.frame_written(due);
            self.drain(now);
        }
    }

    fn write_frame(&mut self, wallclock: Instant, rtp_time: u64) -> Result<(), SessionError> {
        let (Some(mid), Some(pt)) = (self.mid, self.opus_pt) else {
            return Err(SessionError::NoOpus);
        };
        let payload = self.uplink.next_packet()?;
        let time = MediaTime::new(rtp_time, Frequency::FORTY_EIGHT_KHZ);
        let writer = self.rtc.writer(mid).ok_or(SessionError::Closed)?;
        writer.write(pt, wallclock, time, payload)?;
        Ok(())
    }

    fn fail(&mut self, e: RtcError) {
        tracing::debug!(session = %self.session_id, error = %e, "session failed");
        self.last_error.get_or_insert_with(|| e.to_string());
        self.rtc.disconnect();
        self.mark_closed();
    }

    fn mark_closed(&mut self) {
        self.plan.stop();
        if !self.closed {
            self.closed = true;
            self.channel_open = false;
            tracing::debug!(session = %self.session_id, "closed");
            self.push_event(SessionEvent::Closed);
        }
    }

    fn push_event(&mut self, e: SessionEvent) {
        if self.events.len() >= MAX_PENDING_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    fn since_start(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }
}

#[cfg(test)]
mod tests;
