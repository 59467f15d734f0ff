"""A real WebRTC caller (aiortc) for tests: speaks PCM it is given, records what it hears.

The uplink track sends 20 ms frames in real time: queued speech when there is some, silence
otherwise (as a browser's microphone would). `say(pcm)` queues an utterance and returns a future
that resolves to the wall-clock time its last frame went to the encoder: the end of the caller's
speech. Every frame heard on the downlink is kept with its arrival time and level, so a test can
ask when the reply started and stopped. Data-channel messages ("oai-events") are kept as text.

With `turns=True` the caller also opens the transceiver's `voxgate.turns` channel, as the web
client does: `report_turn(...)` sends a `turn.report` there and returns the transceiver's
`turn.latency` answer (its split of that turn's mouth-to-ear time, docs/operating.md).
"""

from __future__ import annotations

import asyncio
import fractions
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from dataclasses import dataclass

import av
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack, MediaStreamError

RATE = 48_000
FRAME = RATE // 50
CONNECT_TIMEOUT_S = 20.0
# A heard frame louder than this (RMS of int16 samples) is reply audio, not Opus noise.
HEARD_RMS = 200.0
#: The transceiver's own threshold of a reply's onset (-50 dBFS RMS, audio_bridge/reply_onset.rs).
ONSET_RMS = 32768 * 10 ** (-50 / 20)
TURNS_LABEL = "voxgate.turns"


def loopback_ice_only() -> None:
    """aioice never gathers 127.0.0.1; against a loopback server gather exactly that."""
    import aioice.ice

    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"] if use_ipv4 else []


def record_rtp_arrivals() -> None:
    """Notes when each downlink RTP packet reaches the caller's socket, before aiortc's jitter
    buffer (which holds 4 packets at the start of a talk spurt, and keeps the last ones of a
    spurt until the next begins): the transport is timed on packets, what the caller hears on
    decoded frames."""
    from aiortc.rtcrtpreceiver import RTCRtpReceiver

    if getattr(RTCRtpReceiver, "_voxgate_patched", False):
        return
    original = RTCRtpReceiver._handle_rtp_packet

    async def handle(self, packet, arrival_time_ms):
        arrivals = self.__dict__.setdefault("voxgate_arrivals", deque(maxlen=50_000))
        now = time.time()
        arrivals.append(now)
        by_ts = self.__dict__.setdefault("voxgate_arrival_by_ts", {})
        by_ts.setdefault(packet.timestamp, now)
        if len(by_ts) > 20_000:
            by_ts.pop(next(iter(by_ts)))
        return await original(self, packet, arrival_time_ms)

    RTCRtpReceiver._handle_rtp_packet = handle
    RTCRtpReceiver._voxgate_patched = True


def record_rtp_sends() -> None:
    """Notes when each uplink RTP packet goes to the caller's socket, by RTP timestamp, on the
    DTLS transport: the transceiver hands the same timestamp to the backend with every frame,
    so one frame's trip caller -> transceiver -> backend can be timed exactly."""
    from aiortc.rtcdtlstransport import RTCDtlsTransport
    from aiortc.rtp import is_rtcp

    if getattr(RTCDtlsTransport, "_voxgate_patched", False):
        return
    original = RTCDtlsTransport._send_rtp

    async def send(self, data: bytes) -> None:
        if not is_rtcp(data) and len(data) >= 8:
            sent = self.__dict__.setdefault("voxgate_sent", {})
            sent[int.from_bytes(data[4:8], "big")] = time.time()
            if len(sent) > 20_000:
                sent.pop(next(iter(sent)))
        await original(self, data)

    RTCDtlsTransport._send_rtp = send
    RTCDtlsTransport._voxgate_patched = True


def _http(method: str, url: str, body: bytes | None, headers: dict[str, str]):
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers or {}), e.read() or b""


class _Speaker(AudioStreamTrack):
    """The caller's microphone: queued utterances, silence between them, real-time paced."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._pts = 0
        self._start: float | None = None
        self._queue: list[tuple[bytes, asyncio.Future[float], asyncio.Future[float]]] = []
        self._offset = 0

    def handover(self) -> _Speaker:
        """A new track with what this one had still to say: a closed peer connection stops
        its tracks, and a resumed call needs a live one."""
        fresh = _Speaker()
        fresh._queue, fresh._offset = self._queue, self._offset
        self._queue = []
        return fresh

    def say(self, pcm: bytes) -> tuple[asyncio.Future[float], asyncio.Future[float]]:
        loop = asyncio.get_running_loop()
        started, done = loop.create_future(), loop.create_future()
        self._queue.append((pcm, started, done))
        return started, done

    async def recv(self):
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            self._pts += FRAME
            wait = self._start + self._pts / RATE - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        chunk = b""
        if self._queue:
            pcm, started, done = self._queue[0]
            if not started.done():
                started.set_result(time.time())
            chunk = pcm[self._offset:self._offset + FRAME * 2]
            self._offset += FRAME * 2
            if self._offset >= len(pcm):
                self._queue.pop(0)
                self._offset = 0
                if not done.done():
                    done.set_result(time.time())
        samples = np.zeros(FRAME, dtype=np.int16)
        if chunk:
            samples[: len(chunk) // 2] = np.frombuffer(chunk, dtype=np.int16)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, RATE)
        return frame


@dataclass
class Heard:
    """One decoded downlink frame: when it was heard (wall clock, s), its RMS level and the RTP
    timestamp of the packet it was decoded from."""

    at: float
    rms: float
    rtp_timestamp: int | None = None


class SignalingError(RuntimeError):
    """A POST that was not answered 201: `status` is what the transceiver answered."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Caller:
    """One WebRTC call to a transceiver (see the module doc)."""

    def __init__(self, signal_url: str, *, token: str | None = None,
                 query: dict[str, str] | None = None, turns: bool = False) -> None:
        self.base = signal_url.rstrip("/")
        self.auth = {"Authorization": f"Bearer {token}"} if token else {}
        self.query = query or {}
        self.pc: RTCPeerConnection | None = None
        self.speaker = _Speaker()
        self.heard: list[Heard] = []
        self.heard_pcm = bytearray()  # mono 48 kHz
        self.messages: list[str] = []
        self.message_event = asyncio.Event()
        self.session_url = ""
        self.session_id = ""
        self.dc = None
        self.dc_open = asyncio.Event()
        self.turns = turns
        self.turns_dc = None
        self.turns_open = asyncio.Event()
        #: The transceiver's `turn.latency` answers, as parsed JSON.
        self.turn_latencies: list[dict] = []
        self._turn_answer = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._receiver = None
        #: The latest answer's resume credential (`X-Voxgate-Resume`) and its lifetime (s).
        self.resume_credential = ""
        self.resume_ttl = 0

    async def connect(self) -> Caller:
        url = self.base + "/v1/sessions"
        if self.query:
            url += "?" + urllib.parse.urlencode(self.query)
        await self._negotiate(url, self.auth)
        return self

    async def resume(self, signal_url: str) -> Caller:
        """Carries the call onto a new session at `signal_url` (docs/continuity.md): closes this
        peer connection, and POSTs a new one's offer with the resume credential as the bearer.
        Raises `SignalingError` (with the status) when it is not answered 201."""
        for t in self._tasks:
            t.cancel()
        self._tasks = []
        if self.pc is not None:
            try:
                await asyncio.wait_for(self.pc.close(), 5)
            except Exception:  # noqa: BLE001 - the old connection is going anyway
                pass
        self.dc_open.clear()
        self.turns_open.clear()
        self.speaker = self.speaker.handover()
        self.base = signal_url.rstrip("/")
        self.auth = {"Authorization": f"Bearer {self.resume_credential}"}
        await self._negotiate(self.base + "/v1/sessions", self.auth)
        return self

    async def _negotiate(self, url: str, auth: dict[str, str]) -> None:
        loopback_ice_only()
        record_rtp_arrivals()
        record_rtp_sends()
        self.pc = pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        connected = asyncio.Event()

        @pc.on("connectionstatechange")
        def _state() -> None:
            if pc.connectionState == "connected":
                connected.set()

        @pc.on("track")
        def _track(track) -> None:
            if track.kind == "audio":
                self._receiver = next(r for r in pc.getReceivers() if r.track is track)
                self._tasks.append(asyncio.create_task(self._listen(track)))

        pc.addTrack(self.speaker)
        self.dc = pc.createDataChannel("oai-events")

        @self.dc.on("open")
        def _open() -> None:
            self.dc_open.set()

        @self.dc.on("message")
        def _message(m) -> None:
            self.messages.append(m if isinstance(m, str) else m.decode("utf-8", "replace"))
            self.message_event.set()

        if self.turns:
            self._open_turns_channel(pc)
        await pc.setLocalDescription(await pc.createOffer())
        status, headers, body = await asyncio.to_thread(
            _http, "POST", url, pc.localDescription.sdp.encode(),
            {"Content-Type": "application/sdp", **auth})
        if status != 201:
            await pc.close()
            raise SignalingError(status, f"POST {url}: {status} {body[:300]!r}")
        lower = {k.lower(): v for k, v in headers.items()}
        self.resume_credential = lower.get("x-voxgate-resume", "")
        self.resume_ttl = int(lower.get("x-voxgate-resume-ttl", "0") or 0)
        location = lower.get("location", "")
        self.session_url = urllib.parse.urljoin(self.base + "/", location)
        self.session_id = location.rstrip("/").rsplit("/", 1)[-1]
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body.decode(), type="answer"))
        await asyncio.wait_for(connected.wait(), CONNECT_TIMEOUT_S)

    async def _listen(self, track) -> None:
        try:
            while True:
                frame = await track.recv()
                at = time.time()
                samples = frame.to_ndarray().reshape(-1)
                channels = len(frame.layout.channels)
                mono = samples[::channels] if channels > 1 else samples
                if frame.sample_rate != RATE:  # not expected: aiortc decodes Opus at 48 kHz
                    continue
                rms = float(np.sqrt(np.mean(mono.astype(np.float64) ** 2))) if len(mono) else 0.0
                self.heard.append(Heard(at, rms, self._rtp_timestamp(frame.pts)))
                self.heard_pcm += mono.astype(np.int16).tobytes()
        except (MediaStreamError, asyncio.CancelledError):
            return

    def say(self, pcm48: bytes) -> tuple[asyncio.Future[float], asyncio.Future[float]]:
        """Queues an utterance (PCM16 mono 48 kHz); returns futures of its first and last
        frame's send time (wall clock, s)."""
        return self.speaker.say(pcm48)

    def packet_arrivals(self) -> list[float]:
        """When each downlink RTP packet reached the caller's socket (wall clock, s)."""
        return list(self._receiver.__dict__.get("voxgate_arrivals", ())) if self._receiver else []

    def _rtp_timestamp(self, pts) -> int | None:
        """aiortc's receiver counts a decoded frame's pts from the call's first RTP timestamp
        (its TimestampMapper's origin): add it back."""
        mapper = getattr(self._receiver, "_RTCRtpReceiver__timestamp_mapper", None)
        origin = getattr(mapper, "_origin", None)
        if not isinstance(pts, int) or origin is None:
            return None
        return (pts + origin) & 0xFFFF_FFFF

    def reply_onset_after(self, t: float, rms: float = ONSET_RMS) -> Heard | None:
        """The first frame heard loud (the transceiver's onset threshold by default) whose
        packet arrived after wall time `t`: aiortc's jitter buffer keeps a talk spurt's last
        packets until the next spurt pushes them out, so the first loud frames decoded after
        `t` can be the previous reply's tail."""
        for h in self.heard:
            if h.at > t and h.rms >= rms and h.rtp_timestamp is not None:
                arrived = self.arrived_at(h.rtp_timestamp)
                if arrived is not None and arrived > t:
                    return h
        return None

    def arrived_at(self, rtp_timestamp: int) -> float | None:
        """When the downlink packet with this RTP timestamp reached the caller's socket."""
        by_ts = self._receiver.__dict__.get("voxgate_arrival_by_ts", {}) if self._receiver else {}
        return by_ts.get(rtp_timestamp)

    def _open_turns_channel(self, pc) -> None:
        self.turns_dc = dc = pc.createDataChannel(TURNS_LABEL)

        @dc.on("open")
        def _open() -> None:
            self.turns_open.set()

        @dc.on("message")
        def _message(m) -> None:
            try:
                msg = json.loads(m)
            except ValueError:
                return
            if isinstance(msg, dict) and msg.get("type") == "turn.latency":
                self.turn_latencies.append(msg)
                self._turn_answer.set()

    def send_turns(self, payload: str | bytes) -> None:
        """Sends anything on the `voxgate.turns` channel (hostile tests send garbage)."""
        self.turns_dc.send(payload)

    async def report_turn(self, speech_end_to_heard_ms: float, rtp_timestamp: int | None,
                          jitter_buffer_ms: float | None, timeout: float = 5.0) -> dict | None:
        """Reports a turn as the web client does (`turn.report`) and waits for the
        transceiver's split of it; None when none came (a report it dropped, counted)."""
        report = {"type": "turn.report", "speech_end_to_heard_ms": round(speech_end_to_heard_ms, 1)}
        if rtp_timestamp is not None:
            report["rtp_timestamp"] = rtp_timestamp
        if jitter_buffer_ms is not None:
            report["jitter_buffer_ms"] = round(max(0.0, jitter_buffer_ms), 1)
        seen = len(self.turn_latencies)
        self._turn_answer.clear()
        self.send_turns(json.dumps(report))
        deadline = time.monotonic() + timeout
        while len(self.turn_latencies) == seen:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                await asyncio.wait_for(self._turn_answer.wait(), left)
            except asyncio.TimeoutError:
                return None
            self._turn_answer.clear()
        return self.turn_latencies[seen]

    def sent_at(self, rtp_timestamp: int) -> float | None:
        """When the uplink packet with this RTP timestamp left the caller (wall clock, s)."""
        for sender in self.pc.getSenders() if self.pc else []:
            sent = sender.transport.__dict__.get("voxgate_sent", {}) if sender.transport else {}
            if rtp_timestamp in sent:
                return sent[rtp_timestamp]
        return None

    async def wait_quiet(self, quiet: float, timeout: float) -> None:
        """Waits until no downlink packet has arrived for `quiet` seconds: a reply has played
        out (the transceiver sends nothing while it has nothing to play)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            arrivals = self.packet_arrivals()
            if not arrivals or time.time() - arrivals[-1] >= quiet:
                return
            await asyncio.sleep(0.02)
        raise TimeoutError(f"the downlink never went quiet for {quiet} s within {timeout} s")

    def first_heard_after(self, t: float) -> float | None:
        """When reply audio (above HEARD_RMS) was first heard after wall time `t`."""
        h = self.first_frame_after(t)
        return h.at if h else None

    def first_frame_after(self, t: float, rms: float = HEARD_RMS) -> Heard | None:
        return next((h for h in self.heard if h.at > t and h.rms >= rms), None)

    def last_heard(self) -> float | None:
        return next((h.at for h in reversed(self.heard) if h.rms > HEARD_RMS), None)

    def heard_seconds(self, after: float = 0.0) -> float:
        """Seconds of audible reply heard after wall time `after` (20 ms per frame)."""
        return 0.02 * sum(1 for h in self.heard if h.at > after and h.rms > HEARD_RMS)

    async def wait_heard(self, after: float, timeout: float) -> float:
        """Waits (polling) until reply audio is heard after `after`; returns its time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            t = self.first_heard_after(after)
            if t is not None:
                return t
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no reply audio heard within {timeout} s")

    async def wait_message(self, predicate, timeout: float, start: int = 0) -> dict:
        """Waits for a JSON data-channel message, from the `start`-th on, for which
        `predicate(msg)` is true."""
        deadline = time.monotonic() + timeout
        seen = start
        while True:
            for raw in self.messages[seen:]:
                seen += 1
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if predicate(msg):
                    return msg
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no matching data-channel message in {timeout} s; "
                                   f"got {self.messages[-5:]}")
            self.message_event.clear()
            try:
                await asyncio.wait_for(self.message_event.wait(), min(left, 0.2))
            except asyncio.TimeoutError:
                pass

    async def delete(self) -> int:
        status, _, _ = await asyncio.to_thread(_http, "DELETE", self.session_url, None, self.auth)
        return status

    async def close(self) -> None:
        if self.session_url:
            try:
                await self.delete()
            except OSError:
                pass
        for t in self._tasks:
            t.cancel()
        if self.pc is not None:
            try:
                await asyncio.wait_for(self.pc.close(), 5)
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
