//! Every routing rule of the endpoint, with a fake clock and no socket: real str0m sessions
//! talk to real str0m clients (the testkit's `ClientSession`) through datagrams handed across
//! in memory, and a recording [`Outbox`] shows what left and by which way.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use str0m::change::SdpOffer;
use str0m::config::DtlsCert;
use tokio::sync::{mpsc, oneshot};
use voxgate_proto::bridge::{downlink, AudioMode, Downlink, OpusPacket, Uplink};
use voxgate_proto::relay_header::{Direction, RelayHeader, Transport, MAX_HEADER_LEN};
use voxgate_proto::stun_username::{looks_like_stun, server_ufrag};
use voxgate_testkit::{ClientSession, SessionConfig};

use super::*;
use crate::media::audio_bridge::QueuedDownlink;
use crate::media::audio_bridge::{
    CoarseTicks, EncoderSettings, OpusApplication, OwnerEndpoints, OwnerUplink, TapSubscriber,
    TickGrid, UPLINK_QUEUE,
};
use crate::media::session::{Candidates, SessionParams, SessionSnapshot, SessionState};
use crate::media::tcp_server::TcpLimits;
use crate::media::thread_priority::LoopPriority;

/// The loop socket every session advertises as its UDP candidate (nothing is bound).
const SERVER: SocketAddr = addr([127, 0, 0, 1], 50_000);
/// The loop's own ICE-TCP listener, advertised as a passive TCP candidate.
const SERVER_TCP: SocketAddr = addr([127, 0, 0, 1], 50_001);
/// A relay inside `--relays`, and one outside.
const RELAY: SocketAddr = addr([10, 0, 0, 7], 3478);
const STRANGER_RELAY: SocketAddr = addr([192, 0, 2, 9], 3478);

const fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3])), port)
}

/// One datagram the endpoint sent.
#[derive(Debug, Clone)]
struct Sent {
    to: SocketAddr,
    /// The relay header's client, if it went framed through a relay.
    framed_for: Option<SocketAddr>,
    /// The TCP connection it went on, if any.
    tcp_conn: Option<u32>,
    payload: Vec<u8>,
}

/// An [`Outbox`] that keeps everything; `tcp_open` says whether TCP sends succeed.
struct Recorder {
    sent: Vec<Sent>,
    tcp_open: bool,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            sent: Vec::new(),
            tcp_open: true,
        }
    }
}

impl Outbox for Recorder {
    fn send_udp(&mut self, to: SocketAddr, header: &[u8], payload: &[u8]) {
        let framed_for = (!header.is_empty()).then(|| {
            let mut framed = header.to_vec();
            framed.extend_from_slice(payload);
            let (h, _) = RelayHeader::decode(&framed).expect("a valid relay header");
            assert_eq!(h.direction, Direction::ToClient);
            h.client
        });
        self.sent.push(Sent {
            to,
            framed_for,
            tcp_conn: None,
            payload: payload.to_vec(),
        });
    }

    fn send_tcp(&mut self, conn: u32, peer: SocketAddr, payload: &[u8]) -> bool {
        if self.tcp_open {
            self.sent.push(Sent {
                to: peer,
                framed_for: None,
                tcp_conn: Some(conn),
                payload: payload.to_vec(),
            });
        }
        self.tcp_open
    }
}

fn settings(max_taps: usize) -> LoopSettings {
    LoopSettings {
        priority: LoopPriority::Normal,
        relays: vec!["10.0.0.0/8".parse().unwrap()],
        max_taps,
        coarse_ticks: CoarseTicks::default(),
        tcp_limits: TcpLimits::default(),
        read_window: Duration::ZERO,
    }
}

fn cert() -> DtlsCert {
    str0m::crypto::from_feature_flags()
        .dtls_provider
        .generate_certificate()
        .expect("DTLS certificate")
}

/// The `a=mid` of the offer's audio section.
fn audio_mid(offer: &str) -> String {
    let audio = &offer[offer.find("m=audio").expect("an audio section")..];
    let mid = &audio[audio.find("a=mid:").expect("a mid") + 6..];
    mid.lines().next().unwrap().trim().to_string()
}

/// A client and the id and ufrag of its session on the endpoint.
struct Caller {
    client: ClientSession,
    id: SessionId,
    ufrag: String,
}

/// The endpoint under test, its clock, and what it sent.
struct Rig {
    endpoint: LoopEndpoint,
    out: Recorder,
    now: Instant,
    cert: DtlsCert,
    serial: u64,
}

impl Rig {
    fn new(max_taps: usize) -> Rig {
        // The process's tick grid starts at its first use on the real clock. The rig's clock
        // starts after it, or a busy machine could put the grid's epoch in the rig's future
        // and the first downlink tick past the end of a test.
        let _ = TickGrid::shared();
        Rig {
            endpoint: LoopEndpoint::new(0, settings(max_taps)),
            out: Recorder::new(),
            now: Instant::now(),
            cert: cert(),
            serial: 0,
        }
    }

    /// A client at `at` offers; its session is accepted as the control plane accepts it and
    /// inserted with `Command::Insert`; the client takes the answer.
    fn call(&mut self, at: SocketAddr, connect_timeout: Duration) -> Caller {
        let cfg = SessionConfig {
            send_for: Duration::MAX,
            decode_downlink: false,
            keep_pcm: Duration::ZERO,
            keep_arrivals: 0,
            keep_messages: 0,
            ..SessionConfig::default()
        };
        let (mut client, offer) = ClientSession::new(&cfg, at, self.now).expect("offer");
        let offer = offer.to_string();
        self.serial += 1;
        let id = SessionId::random();
        let ufrag = format!("ufrag{}x{}", self.serial, id.0 as u32);
        let params = SessionParams {
            id,
            ufrag: ufrag.clone(),
            pass: "endpointTestPasswordEndpointTest".into(),
            cert: self.cert.clone(),
            candidates: Candidates {
                udp: vec![SERVER],
                tcp: vec![SERVER_TCP],
            },
            connect_timeout,
            max_duration: None,
            audio_mid: audio_mid(&offer),
            encoder: EncoderSettings {
                bitrate: 32_000,
                complexity: 5,
                application: OpusApplication::Voip,
            },
            metadata: Default::default(),
            call_id: id,
            generation: 1,
        };
        let sdp = SdpOffer::from_sdp_string(&offer).expect("parses");
        let (session, answer) = Session::accept(self.now, self.serial, params, sdp).expect("ok");
        let (reply, done) = oneshot::channel();
        let insert = Command::Insert {
            session: Box::new(session),
            reply,
        };
        assert!(self
            .endpoint
            .handle_command(self.now, insert, &mut self.out));
        done.blocking_recv().expect("inserted");
        client.accept_answer(self.now, &answer).expect("answer");
        Caller { client, id, ufrag }
    }

    /// Takes what the client wants to send.
    fn client_datagrams(c: &mut Caller) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| c.client.poll_transmit())
            .map(|t| t.contents.to_vec())
            .collect()
    }

    /// Delivers what the endpoint sent to `to` (directly or through a relay) to the client.
    fn deliver_to(&mut self, c: &mut Caller, to: SocketAddr) -> usize {
        let mine: Vec<Sent> = self
            .out
            .sent
            .iter()
            .filter(|s| s.to == to || s.framed_for == Some(to))
            .cloned()
            .collect();
        self.out
            .sent
            .retain(|s| !(s.to == to || s.framed_for == Some(to)));
        for s in &mine {
            c.client
                .handle_datagram(self.now, SERVER, c.client.local_addr(), &s.payload);
        }
        mine.len()
    }

    /// Moves datagrams both ways (the client's arriving from `from`, framed by `via` if
    /// given) and advances the clock until the client is connected, or `limit` passes.
    fn pump(&mut self, c: &mut Caller, from: SocketAddr, via: Option<SocketAddr>, limit: Duration) {
        let until = self.now + limit;
        while self.now < until {
            if c.client.is_connected() && c.client.channel_open() {
                return;
            }
            let mut moved = false;
            for d in Rig::client_datagrams(c) {
                self.receive(from, via, &d);
                moved = true;
            }
            moved |= self.deliver_to(c, c.client.local_addr()) > 0;
            if moved {
                continue;
            }
            self.tick(c);
        }
    }

    /// Advances the clock to the next deadline of the client or the endpoint and runs it.
    fn tick(&mut self, c: &mut Caller) {
        let client_at = c.client.poll_timeout().expect("client alive");
        let next = self
            .endpoint
            .poll_timeout()
            .map_or(client_at, |d| d.min(client_at));
        self.now = self.now.max(next).max(self.now + Duration::from_micros(1));
        c.client.handle_timeout(self.now);
        self.endpoint.handle_timeout(self.now, &mut self.out);
    }

    /// Runs both clocks for `d` (the client's datagrams are not delivered).
    fn run_for(&mut self, c: &mut Caller, d: Duration) {
        let until = self.now + d;
        while self.now < until {
            self.tick(c);
        }
    }

    /// A client datagram arriving on the loop's socket from `from`, or framed by relay `via`
    /// for client `from`.
    fn receive(&mut self, from: SocketAddr, via: Option<SocketAddr>, bytes: &[u8]) {
        let (source, framed) = match via {
            None => (Source::Udp(from), bytes.to_vec()),
            Some(relay) => (Source::Udp(relay), frame(from, bytes)),
        };
        let now = self.now;
        self.endpoint
            .handle_datagram(now, now, source, &framed, &mut self.out);
    }

    /// Runs the endpoint's timers (nothing else) until it holds no session, or `limit` passes.
    fn run_until_empty(&mut self, limit: Duration) {
        let until = self.now + limit;
        while !self.endpoint.is_empty() && self.now < until {
            self.now = self
                .endpoint
                .poll_timeout()
                .map_or(until, |d| d.max(self.now));
            self.endpoint.handle_timeout(self.now, &mut self.out);
        }
        assert!(self.endpoint.is_empty(), "every session removed");
    }

    /// Attaches a passthrough owner with `packets` Opus packets queued for the caller, so the
    /// session sends media on its ticks; returns the backend's ends of the queues.
    fn attach_playing(&mut self, id: SessionId, packets: usize) -> Backend {
        let (up_tx, up_rx) = mpsc::channel(UPLINK_QUEUE);
        let (down_tx, down_rx) = mpsc::channel(packets.max(1));
        for i in 0..packets {
            let opus = Downlink {
                kind: Some(downlink::Kind::Opus(OpusPacket {
                    data: vec![0xf8, 0xff, 0xfe, i as u8].into(),
                    rtp_sequence: i as u32,
                    ..OpusPacket::default()
                })),
            };
            down_tx.try_send(opus.into()).expect("room");
        }
        let endpoints = OwnerEndpoints {
            uplink: OwnerUplink::Stream(up_tx),
            downlink: down_rx,
            sample_rate: 48_000,
            mode: AudioMode::OpusPassthrough,
            progress_interval: Duration::from_millis(200),
            stall_after: Duration::from_secs(5),
            owner_id: 1,
            encoder: Default::default(),
            clears: Default::default(),
        };
        let (reply, result) = oneshot::channel();
        let cmd = Command::Attach {
            id,
            endpoints,
            reply,
        };
        assert!(self.endpoint.handle_command(self.now, cmd, &mut self.out));
        result.blocking_recv().unwrap().expect("attached");
        Backend {
            _uplink: up_rx,
            _downlink: down_tx,
        }
    }

    fn snapshot(&mut self, id: SessionId) -> Option<SessionSnapshot> {
        let (reply, rx) = oneshot::channel();
        let cmd = Command::Snapshot { id, reply };
        assert!(self.endpoint.handle_command(self.now, cmd, &mut self.out));
        rx.blocking_recv().expect("answered")
    }

    fn dropped(&mut self, reason: DropReason) -> u64 {
        self.endpoint.counters_mut().dropped(reason)
    }

    fn events(&mut self) -> Vec<EndpointEvent> {
        std::iter::from_fn(|| self.endpoint.poll_event()).collect()
    }
}

/// The backend's ends of an owner's queues (kept open while the test runs).
struct Backend {
    _uplink: mpsc::Receiver<Uplink>,
    _downlink: mpsc::Sender<QueuedDownlink>,
}

/// `bytes` behind a relay header towards the transceiver, for client `client`.
fn frame(client: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut header = [0u8; MAX_HEADER_LEN];
    let h = RelayHeader {
        direction: Direction::ToTransceiver,
        client,
        transport: Transport::Udp,
    };
    let n = h.encode(&mut header).expect("encodes");
    let mut v = header[..n].to_vec();
    v.extend_from_slice(bytes);
    v
}

/// The client's next binding request for its session (it sends them while ICE runs).
fn next_check(rig: &mut Rig, c: &mut Caller) -> Vec<u8> {
    for _ in 0..200 {
        if let Some(d) = Rig::client_datagrams(c)
            .into_iter()
            .find(|d| looks_like_stun(d) && server_ufrag(d).is_ok())
        {
            return d;
        }
        rig.tick(c);
    }
    panic!("the client sent no binding request");
}

#[test]
fn a_call_connects_and_replies_go_back_the_way_its_checks_came() {
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 10], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    rig.pump(&mut c, client, None, Duration::from_secs(10));
    assert!(c.client.is_connected(), "ICE, DTLS and SCTP came up");
    let snap = rig.snapshot(c.id).expect("the session");
    assert_eq!(snap.state, SessionState::Connected);
    assert_eq!(snap.client_addrs, vec![client.to_string()]);
    assert!(snap.relays.is_empty());
    // Whatever the session sends goes to the client directly (no relay header).
    rig.run_for(&mut c, Duration::from_millis(200));
    assert!(rig
        .out
        .sent
        .iter()
        .all(|s| s.to == client && s.framed_for.is_none()));
}

#[test]
fn a_check_for_an_unknown_ufrag_is_dropped_unanswered() {
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 11], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    let check = next_check(&mut rig, &mut c);
    // The same session deleted: its ufrag is unknown from now on.
    let (reply, found) = oneshot::channel();
    let delete = Command::Delete { id: c.id, reply };
    assert!(rig.endpoint.handle_command(rig.now, delete, &mut rig.out));
    assert!(found.blocking_recv().unwrap(), "deleted");
    rig.run_until_empty(Duration::from_secs(1));
    rig.out.sent.clear();
    rig.receive(client, None, &check);
    assert_eq!(rig.dropped(DropReason::StunUnknownUfrag), 1);
    assert!(rig.out.sent.is_empty(), "no answer: no amplification");
    let ended: Vec<_> = rig
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EndpointEvent::Ended(e) => Some(e),
            EndpointEvent::Loop(_) => None,
        })
        .collect();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].id, c.id);
    assert_eq!(ended[0].reason, EndReason::Deleted);
    assert!(!c.ufrag.is_empty());
}

#[test]
fn a_framed_datagram_from_outside_the_relays_is_dropped() {
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 12], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    let check = next_check(&mut rig, &mut c);
    rig.receive(client, Some(STRANGER_RELAY), &check);
    assert_eq!(rig.dropped(DropReason::RelayNotAllowed), 1);
    assert!(rig.out.sent.is_empty());
    assert!(rig.snapshot(c.id).unwrap().client_addrs.is_empty());
    // From an allowed relay, a header that is not towards the transceiver is refused too.
    let mut bad = frame(client, &check);
    bad[1] ^= 0xff;
    let now = rig.now;
    rig.endpoint
        .handle_datagram(now, now, Source::Udp(RELAY), &bad, &mut rig.out);
    assert_eq!(rig.dropped(DropReason::BadRelayHeader), 1);
    assert!(rig.out.sent.is_empty());
}

#[test]
fn datagrams_from_unknown_sources_are_dropped_and_counted() {
    let mut rig = Rig::new(4);
    let stranger = addr([203, 0, 113, 5], 7000);
    let rtp = [0x80u8, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 1, 2, 3, 4];
    rig.receive(stranger, None, &rtp);
    assert_eq!(rig.dropped(DropReason::UnknownSource), 1);
    // A STUN message without a USERNAME (an indication, say) from a stranger.
    let mut stun = [0u8; 20];
    stun[0] = 0x00;
    stun[1] = 0x11; // Binding indication
    stun[4..8].copy_from_slice(&0x2112_A442u32.to_be_bytes());
    rig.receive(stranger, None, &stun);
    assert_eq!(rig.dropped(DropReason::StunMalformed), 1);
    assert!(rig.out.sent.is_empty());
}

#[test]
fn an_address_held_by_one_session_is_refused_to_another() {
    let mut rig = Rig::new(4);
    let shared = addr([192, 168, 1, 13], 5000);
    let mut a = rig.call(shared, Duration::from_secs(20));
    rig.pump(&mut a, shared, None, Duration::from_secs(10));
    assert!(a.client.is_connected());
    // A second caller whose checks arrive from the same address (say, someone relaying the
    // first caller's address): str0m answers them, the endpoint withholds the answers.
    let other = addr([192, 168, 1, 99], 6000);
    let mut b = rig.call(other, Duration::from_secs(20));
    for _ in 0..5 {
        let check = next_check(&mut rig, &mut b);
        rig.receive(shared, None, &check);
    }
    assert!(
        rig.dropped(DropReason::AddrHeld) >= 5,
        "every answer withheld"
    );
    assert!(rig.snapshot(b.id).unwrap().client_addrs.is_empty());
    assert_eq!(
        rig.snapshot(a.id).unwrap().client_addrs,
        vec![shared.to_string()],
        "the address stays with its holder"
    );
    // And the holder's call goes on: its own checks from the address are still answered.
    rig.out.sent.clear();
    let check = next_check(&mut rig, &mut a);
    rig.receive(shared, None, &check);
    assert!(
        rig.deliver_to(&mut a, shared) > 0,
        "the holder's check answered"
    );
}

/// The client's next SRTP packet (its audio), and whatever else it sent meanwhile.
fn next_srtp(rig: &mut Rig, c: &mut Caller) -> Vec<u8> {
    for _ in 0..200 {
        let datagrams = Rig::client_datagrams(c);
        if let Some(d) = datagrams.into_iter().find(|d| is_srtp(d)) {
            return d;
        }
        rig.tick(c);
    }
    panic!("the client sent no SRTP");
}

/// RTP, not RTCP (RFC 5761: payload types 192-223 in the second byte are RTCP's).
fn is_srtp(d: &[u8]) -> bool {
    d.len() > 12 && (128..192).contains(&d[0]) && !(192..224).contains(&d[1])
}

/// Runs the clocks for 100 ms and returns where the session's datagrams went.
fn where_replies_go(rig: &mut Rig, c: &mut Caller) -> Vec<(SocketAddr, Option<SocketAddr>)> {
    rig.out.sent.clear();
    rig.run_for(c, Duration::from_millis(100));
    assert!(!rig.out.sent.is_empty(), "the owner's audio went out");
    rig.out.sent.iter().map(|s| (s.to, s.framed_for)).collect()
}

#[test]
fn a_path_moves_on_an_answered_check_or_fresh_authenticated_media_and_nothing_else() {
    const OTHER_RELAY: SocketAddr = addr([10, 0, 0, 8], 3478);
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 14], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    rig.pump(&mut c, client, None, Duration::from_secs(10));
    assert!(c.client.is_connected());
    let _backend = rig.attach_playing(c.id, 200);
    let direct = (client, None);
    assert!(where_replies_go(&mut rig, &mut c)
        .iter()
        .all(|s| *s == direct));
    // Spoofed media through a trusted relay: an RTP header with garbage behind it. It fails
    // SRTP's tag and moves nothing.
    let mut spoofed = next_srtp(&mut rig, &mut c);
    let n = spoofed.len();
    spoofed[n - 4..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    rig.receive(client, Some(RELAY), &spoofed);
    assert!(
        rig.snapshot(c.id).unwrap().relays.is_empty(),
        "spoofed media moved nothing"
    );
    assert!(where_replies_go(&mut rig, &mut c)
        .iter()
        .all(|s| *s == direct));
    // The client's genuine, fresh media through the relay (its flow moved there): replies
    // take the relay at once, without waiting for a check.
    let genuine = next_srtp(&mut rig, &mut c);
    rig.receive(client, Some(RELAY), &genuine);
    assert_eq!(rig.snapshot(c.id).unwrap().relays, vec![RELAY.to_string()]);
    assert_eq!(rig.endpoint.counters_mut().media_path_moves, 1);
    let relayed = (RELAY, Some(client));
    assert!(where_replies_go(&mut rig, &mut c)
        .iter()
        .all(|s| *s == relayed));
    // The same genuine packet replayed through another trusted relay: str0m's replay window
    // refuses it, and it moves nothing.
    rig.receive(client, Some(OTHER_RELAY), &genuine);
    assert_eq!(rig.snapshot(c.id).unwrap().relays, vec![RELAY.to_string()]);
    assert_eq!(rig.endpoint.counters_mut().media_path_moves, 1);
    assert!(where_replies_go(&mut rig, &mut c)
        .iter()
        .all(|s| *s == relayed));
    // A check through the other relay, answered: from now on replies go framed through it.
    let check = next_check(&mut rig, &mut c);
    rig.receive(client, Some(OTHER_RELAY), &check);
    assert_eq!(
        rig.snapshot(c.id).unwrap().relays,
        vec![OTHER_RELAY.to_string()]
    );
    let other = (OTHER_RELAY, Some(client));
    assert!(where_replies_go(&mut rig, &mut c)
        .iter()
        .all(|s| *s == other));
}

#[test]
fn an_ice_tcp_connection_opens_only_on_an_answered_check() {
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 15], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    let peer = addr([192, 168, 1, 15], 40_123);
    let now = rig.now;
    let garbage = b"GET / HTTP/1.1\r\n\r\n";
    let r = rig
        .endpoint
        .handle_first_tcp_frame(now, peer, 1, garbage, &mut rig.out);
    assert_eq!(r, Err(TcpCloseReason::Garbage));
    let check = next_check(&mut rig, &mut c);
    // The right ufrag with a broken MESSAGE-INTEGRITY: str0m does not answer.
    let mut forged = check.clone();
    let last = forged.len() - 10;
    forged[last] ^= 0x55;
    let now = rig.now;
    let r = rig
        .endpoint
        .handle_first_tcp_frame(now, peer, 2, &forged, &mut rig.out);
    assert_eq!(r, Err(TcpCloseReason::Unauthenticated));
    // A valid check for a ufrag this loop does not know.
    let (reply, _) = oneshot::channel();
    let delete = Command::Delete { id: c.id, reply };
    rig.endpoint.handle_command(rig.now, delete, &mut rig.out);
    rig.run_until_empty(Duration::from_secs(1));
    rig.out.sent.clear();
    let now = rig.now;
    let r = rig
        .endpoint
        .handle_first_tcp_frame(now, peer, 3, &check, &mut rig.out);
    assert_eq!(r, Err(TcpCloseReason::UnknownUfrag));
    assert!(
        rig.out.sent.is_empty(),
        "nothing sent to a refused connection"
    );
}

#[test]
fn an_answered_check_on_a_tcp_connection_opens_it_and_replies_take_it() {
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 16], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    let peer = addr([192, 168, 1, 16], 40_124);
    let check = next_check(&mut rig, &mut c);
    let now = rig.now;
    let r = rig
        .endpoint
        .handle_first_tcp_frame(now, peer, 7, &check, &mut rig.out);
    assert_eq!(r, Ok(()));
    let answer = rig.out.sent.last().expect("the answer").clone();
    assert_eq!(
        answer.tcp_conn,
        Some(7),
        "the answer went back on the connection"
    );
    assert_eq!(answer.to, peer);
    let snap = rig.snapshot(c.id).unwrap();
    assert_eq!(snap.client_paths.len(), 1);
    assert_eq!(snap.client_paths[0].transport, "tcp");
    // The connection closes: what the session sends on it is counted as unrouted.
    rig.out.tcp_open = false;
    let before = rig.endpoint.counters_mut().unrouted;
    let check = next_check(&mut rig, &mut c);
    let now = rig.now;
    rig.endpoint
        .handle_tcp_frame(now, peer, 7, &check, &mut rig.out);
    assert!(rig.endpoint.counters_mut().unrouted > before);
}

#[test]
fn a_session_that_never_connects_ends_at_its_connect_timeout() {
    let mut rig = Rig::new(4);
    let c = rig.call(addr([192, 168, 1, 17], 5000), Duration::from_secs(2));
    let start = rig.now;
    let due = rig.endpoint.poll_timeout().expect("a deadline");
    assert!(due <= start + Duration::from_secs(2));
    // Nothing from the client: run the timers until the connect deadline has passed.
    let mut now = start;
    while now < start + Duration::from_secs(3) {
        now = rig
            .endpoint
            .poll_timeout()
            .map_or(start + Duration::from_secs(3), |d| d.max(now));
        rig.endpoint.handle_timeout(now, &mut rig.out);
        if rig.endpoint.is_empty() {
            break;
        }
    }
    assert!(
        now >= start + Duration::from_secs(2),
        "not before the deadline"
    );
    assert!(rig.endpoint.is_empty(), "removed");
    let ends: Vec<_> = rig
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EndpointEvent::Ended(e) => Some((e.id, e.reason)),
            EndpointEvent::Loop(_) => None,
        })
        .collect();
    assert_eq!(ends, vec![(c.id, EndReason::ConnectTimeout)]);
    assert_eq!(rig.endpoint.poll_timeout(), None, "no timer left");
}

#[test]
fn taps_past_the_limit_are_refused_and_counted_and_unknown_ids_are_not_found() {
    let mut rig = Rig::new(1);
    let c = rig.call(addr([192, 168, 1, 18], 5000), Duration::from_secs(20));
    let tap = |rig: &mut Rig, id: SessionId| {
        let (tx, rx) = mpsc::channel(8);
        let (reply, result) = oneshot::channel();
        let tap = TapSubscriber {
            tx,
            downlink: false,
        };
        let cmd = Command::Tap { id, tap, reply };
        assert!(rig.endpoint.handle_command(rig.now, cmd, &mut rig.out));
        (result.blocking_recv().unwrap(), rx)
    };
    let (first, _keep) = tap(&mut rig, c.id);
    assert!(first.is_ok());
    let (second, _) = tap(&mut rig, c.id);
    assert!(matches!(second, Err(AttachError::TooManyTaps(1))));
    assert_eq!(rig.endpoint.counters_mut().taps_refused, 1);
    let (unknown, _) = tap(&mut rig, SessionId::random());
    assert!(matches!(unknown, Err(AttachError::NotFound)));
    // A gone subscriber frees its slot.
    drop(_keep);
    let (again, _rx) = tap(&mut rig, c.id);
    assert!(again.is_ok());
}

#[test]
fn shutdown_is_the_only_command_that_stops_the_loop() {
    let mut rig = Rig::new(4);
    let c = rig.call(addr([192, 168, 1, 19], 5000), Duration::from_secs(20));
    let end = Command::End {
        id: c.id,
        reason: EndReason::NoBackend,
    };
    assert!(rig.endpoint.handle_command(rig.now, end, &mut rig.out));
    assert!(!rig
        .endpoint
        .handle_command(rig.now, Command::Shutdown, &mut rig.out));
}

#[test]
fn checks_past_a_sessions_budget_are_dropped_unanswered_and_counted() {
    use crate::media::check_budget::{MAX_NEW_ADDRESSES, NEW_ADDRESS_BURST};
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 20], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    let check = next_check(&mut rig, &mut c);
    // The caller's check from its own address: answered, and the address is the session's.
    rig.receive(client, None, &check);
    assert_eq!(rig.out.sent.len(), 1);
    rig.out.sent.clear();
    // The same valid check, from 500 new source ports at one instant.
    for port in 0..500u16 {
        rig.receive(addr([198, 51, 100, 1], 10_000 + port), None, &check);
    }
    let answered = rig.out.sent.len();
    assert!(
        answered <= NEW_ADDRESS_BURST as usize,
        "{answered} answered"
    );
    let limited = rig.dropped(DropReason::CheckRateLimited);
    assert_eq!(
        limited as usize + answered,
        500,
        "every other check counted"
    );
    // Later, from ever more new addresses: at most MAX_NEW_ADDRESSES are ever let through.
    for second in 1..=20u64 {
        rig.now += Duration::from_secs(1);
        for port in 0..20u16 {
            let from = addr([198, 51, 100, 2], (second * 100) as u16 + port);
            rig.receive(from, None, &check);
        }
    }
    assert!(rig.dropped(DropReason::CheckNewAddressCap) > 0);
    let admitted_total = rig
        .out
        .sent
        .iter()
        .filter(|s| is_binding_success(&s.payload))
        .count();
    assert!(admitted_total <= MAX_NEW_ADDRESSES, "{admitted_total}");
    // The caller's own (authenticated) address still gets its checks answered.
    rig.now += Duration::from_secs(1);
    rig.out.sent.clear();
    rig.receive(client, None, &check);
    assert_eq!(rig.out.sent.len(), 1, "the caller's check answered");
}

/// Connections of the loop's own listener the endpoint asks to close.
fn tcp_closes(rig: &mut Rig) -> Vec<(u32, TcpCloseReason)> {
    std::iter::from_fn(|| rig.endpoint.poll_tcp_close())
        .map(|(c, reason)| (c.conn, reason))
        .collect()
}

#[test]
fn only_a_check_str0m_answers_keeps_a_tcp_connection() {
    let mut rig = Rig::new(4);
    let client = addr([192, 168, 1, 21], 5000);
    let mut c = rig.call(client, Duration::from_secs(20));
    let peer = addr([192, 168, 1, 21], 40_125);
    let check = next_check(&mut rig, &mut c);
    let now = rig.now;
    let r = rig
        .endpoint
        .handle_first_tcp_frame(now, peer, 3, &check, &mut rig.out);
    assert_eq!(r, Ok(()));
    // A byte of junk from the connection's own (authenticated) peer: not a check.
    assert!(!rig
        .endpoint
        .handle_tcp_frame(now, peer, 3, &[0x42], &mut rig.out));
    let mut forged = check.clone();
    let last = forged.len() - 10;
    forged[last] ^= 0x55;
    assert!(
        !rig.endpoint
            .handle_tcp_frame(now, peer, 3, &forged, &mut rig.out),
        "a check str0m does not answer"
    );
    assert!(rig
        .endpoint
        .handle_tcp_frame(now, peer, 3, &check, &mut rig.out));
}

#[test]
fn an_ended_sessions_tcp_connections_are_to_be_closed_and_no_others() {
    let mut rig = Rig::new(4);
    let mut a = rig.call(addr([192, 168, 1, 22], 5000), Duration::from_secs(20));
    let mut b = rig.call(addr([192, 168, 1, 23], 5000), Duration::from_secs(20));
    let check_a = next_check(&mut rig, &mut a);
    let check_b = next_check(&mut rig, &mut b);
    let now = rig.now;
    for (conn, port) in [(1, 41_001), (2, 41_002)] {
        let peer = addr([192, 168, 1, 22], port);
        let r = rig
            .endpoint
            .handle_first_tcp_frame(now, peer, conn, &check_a, &mut rig.out);
        assert_eq!(r, Ok(()));
    }
    let peer_b = addr([192, 168, 1, 23], 41_003);
    let r = rig
        .endpoint
        .handle_first_tcp_frame(now, peer_b, 3, &check_b, &mut rig.out);
    assert_eq!(r, Ok(()));
    // Connection 2 closed on its own meanwhile.
    rig.endpoint.tcp_closed(2, addr([192, 168, 1, 22], 41_002));
    assert!(tcp_closes(&mut rig).is_empty());
    let (reply, _) = oneshot::channel();
    let delete = Command::Delete { id: a.id, reply };
    rig.endpoint.handle_command(rig.now, delete, &mut rig.out);
    let until = rig.now + Duration::from_secs(2);
    while rig.endpoint.len() > 1 && rig.now < until {
        rig.tick(&mut b);
    }
    assert_eq!(rig.endpoint.len(), 1, "session a removed");
    assert_eq!(
        tcp_closes(&mut rig),
        vec![(1, TcpCloseReason::SessionEnded)]
    );
}

#[test]
fn a_session_past_its_share_of_tcp_connections_gives_up_its_oldest() {
    let mut rig = Rig::new(4);
    let share = TcpLimits::default().max_conns_per_session;
    let mut c = rig.call(addr([192, 168, 1, 24], 5000), Duration::from_secs(20));
    let check = next_check(&mut rig, &mut c);
    let now = rig.now;
    for conn in 0..=share as u32 {
        let peer = addr([192, 168, 1, 24], 42_000 + conn as u16);
        let r = rig
            .endpoint
            .handle_first_tcp_frame(now, peer, conn, &check, &mut rig.out);
        assert_eq!(r, Ok(()), "connection {conn}");
    }
    assert_eq!(tcp_closes(&mut rig), vec![(0, TcpCloseReason::SessionCap)]);
}
