"""What a call delivers and the choices a worker makes: plain, numpy-free values and enums.

The enums are `str` or `int` enums, so the strings and ints they replace keep working:
`Event.kind == "ended"`, `mode=0`, `opus_application="lowdelay"`.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Literal

#: The PCM rates a worker can ask for, in Hz (the attach's `sample_rate_hz`).
SampleRate = Literal[16000, 24000, 48000]
SAMPLE_RATES: tuple[int, ...] = (16000, 24000, 48000)


class AudioMode(enum.IntEnum):
    """What a call's audio is on the wire (the proto's `AudioMode`, same values)."""

    #: Decoded PCM16 both ways; the transceiver encodes the backend's audio.
    PCM = 0
    #: The caller's Opus packets as they came, and Opus packets back (no transcoding).
    OPUS_PASSTHROUGH = 1


class _StrEnum(str, enum.Enum):
    """A `str` enum that prints as its value (as 3.11's `enum.StrEnum`; 3.10 has none)."""

    def __str__(self) -> str:
        return self.value


class OpusApplication(_StrEnum):
    """How the transceiver encodes a worker's audio (the proto's `OpusApplication`)."""

    VOIP = "voip"
    AUDIO = "audio"
    #: CELT only: cheaper for the transceiver, and suits synthetic (TTS) speech.
    LOWDELAY = "lowdelay"


class CallState(_StrEnum):
    """Where a `Call` is in its life: PENDING -> ATTACHED -> CLOSING -> ENDED, or straight to
    ENDED (declined, refused, or the session ended); ATTACHED -> RESUMING -> ATTACHED when its
    transport was lost and the caller resumed it on a new session (docs/continuity.md)."""

    #: Dispatched to this worker, neither accepted nor declined yet.
    PENDING = "pending"
    #: `accept()` was called: this worker owns the session.
    ATTACHED = "attached"
    #: The session was lost (its transceiver died, or its network): waiting for the caller to
    #: resume the call on a new session, for at most the worker's `resume_window_s`.
    RESUMING = "resuming"
    #: `aclose()` is letting go of the stream.
    CLOSING = "closing"
    #: Over: `Call.end_reason` says why, `Call.error` says if it broke.
    ENDED = "ended"


class EventKind(_StrEnum):
    """A session event's kind, as a `Tap` yields it in `Event.kind`."""

    UNSPECIFIED = "unspecified"
    ATTACHED = "attached"
    CONNECTED = "connected"
    ENDED = "ended"
    DATA_CHANNEL_OPEN = "data_channel_open"


@dataclass(frozen=True, slots=True)
class AudioFrame:
    """20 ms of the caller's audio: PCM16 little-endian mono at `sample_rate` Hz."""

    pcm: bytes
    # 0, 1, 2, ... with no gaps: a frame the network lost is synthesized (`concealed`).
    sequence: int
    concealed: bool
    sample_rate: int
    # RTP timestamp (48 kHz clock) of the frame.
    rtp_timestamp: int
    # When the packet reached the transceiver's socket (wall clock, µs since the epoch).
    arrival_unix_micros: int
    # When this process received it (wall clock, µs since the epoch).
    received_unix_micros: int = field(default_factory=lambda: time.time_ns() // 1000)

    @property
    def sample_rate_hz(self) -> int:
        """The former name of `sample_rate`."""
        return self.sample_rate


@dataclass(frozen=True, slots=True)
class Resumed:
    """The call continued on a new session (docs/continuity.md): what was lost on the way."""

    #: The session that carried the call before, and the one that carries it now.
    previous_session_id: str
    session_id: str
    #: The transceiver the call lives on now.
    target: str
    #: The new session's generation in the call (2 after the first resume, ...).
    generation: int
    #: Caller audio lost between the old session's last frame and the new one's first (ms, by
    #: the transceivers' arrival stamps); None if either had no frame to compare.
    caller_audio_lost_ms: int | None
    #: Audio this backend queued that was never confirmed played (ms): what the old session
    #: had queued past its last progress report, plus what `play()` dropped while the call was
    #: resuming. An upper bound: progress comes every `progress_interval_ms`.
    unplayed_ms: int
    #: The items (`play(item_id=...)`) that audio belonged to, oldest first.
    unplayed_items: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OpusFrame:
    """One uplink Opus packet (`AudioMode.OPUS_PASSTHROUGH`): 20 ms at 48 kHz."""

    data: bytes
    rtp_sequence: int
    rtp_timestamp: int
    arrival_unix_micros: int


@dataclass(frozen=True, slots=True)
class SentAudio:
    """20 ms of audio as the transceiver sent it to the caller (a `tap(downlink=True)` only):
    after clears and pacing, what the caller's player received."""

    #: PCM16 little-endian mono at `sample_rate` (a PCM owner); empty for a passthrough owner.
    pcm: bytes
    sample_rate: int
    #: RTP timestamp (48 kHz); it advances 960 per 20 ms tick even when nothing is sent, so a
    #: gap between two frames' timestamps is the silence between them.
    rtp_timestamp: int
    #: When it left for the caller (wall clock, µs since the epoch; the clock of
    #: `AudioFrame.arrival_unix_micros`, so the two legs line up).
    sent_unix_micros: int
    #: The backend item it belongs to ("" if none).
    item_id: str = ""
    #: The Opus packet as sent (a passthrough owner); empty for a PCM owner.
    opus: bytes = b""


@dataclass(frozen=True, slots=True)
class Message:
    """A data-channel message: `text` or `binary` is set."""

    label: str
    text: str | None = None
    binary: bytes | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """How much downlink audio the caller has been sent (PlaybackProgress)."""

    played_ms: int = 0
    queued_ms: int = 0
    item_id: str = ""
    item_played_ms: int = 0


@dataclass(frozen=True, slots=True)
class Cleared:
    """The answer to `Call.clear()`: truncate the item's transcript at `item_played_ms`."""

    played_ms: int
    dropped_ms: int
    item_id: str
    item_played_ms: int


@dataclass(frozen=True, slots=True)
class Event:
    """A session event as a Tap sees it (`kind` compares equal to its string too)."""

    kind: EventKind
    reason: str = ""
    session_id: str = ""
    #: ENDED only: the call's network quality as a whole (None if the call lasted under 5 s).
    quality: QualitySummary | None = None
    #: When it happened at the transceiver (wall clock, µs since the epoch; 0 from a transceiver
    #: that does not say). A CONNECTED told to a late tap keeps its own time.
    at_unix_micros: int = 0


@dataclass(frozen=True, slots=True)
class DirectionQuality:
    """One direction of the caller's network, from RTCP receiver reports. None: not measured
    yet (no receiver report in this direction so far)."""

    #: RFC 3550 interarrival jitter, ms.
    jitter_ms: float | None = None
    #: Fraction (0-1) lost in the last receiver report's interval (1-5 s).
    loss_recent: float | None = None
    #: Fraction (0-1) lost since the call began.
    loss_total: float | None = None
    packets_lost: int = 0
    #: Packets received (uplink) or sent (downlink) so far.
    packets: int = 0
    #: ITU-T G.107 E-model MOS estimate, 1-4.5 (4.41 on a perfect network): the network's and
    #: the codec's share of the call, not the backend's.
    mos: float | None = None


@dataclass(frozen=True, slots=True)
class Quality:
    """The caller's network as the transceiver measured it (`Uplink.quality`, every 5 s while
    the call is connected)."""

    #: Milliseconds since the session was created.
    at_ms: int = 0
    #: Round-trip time from the client's receiver reports, ms.
    rtt_ms: float | None = None
    #: Caller -> transceiver (the receiver reports the transceiver sends).
    uplink: DirectionQuality = DirectionQuality()
    #: Transceiver -> caller (the receiver reports the client sends).
    downlink: DirectionQuality = DirectionQuality()

    @property
    def mos(self) -> float | None:
        """The lower of the two directions' MOS (None while neither is measured)."""
        known = [m for m in (self.uplink.mos, self.downlink.mos) if m is not None]
        return min(known) if known else None


@dataclass(frozen=True, slots=True)
class QualitySummary:
    """The call's network quality as a whole (`SessionEvent.quality` with ENDED)."""

    #: Quality samples taken (one per 5 s of the call).
    samples: int = 0
    rtt_ms_mean: float | None = None
    rtt_ms_max: float | None = None
    uplink_jitter_ms_max: float | None = None
    downlink_jitter_ms_max: float | None = None
    uplink_loss_total: float | None = None
    downlink_loss_total: float | None = None
    #: Mean and minimum over the samples of the lower of the two directions' MOS.
    mos_mean: float | None = None
    mos_min: float | None = None


#: Where a `TurnLatency` part's figure comes from: the transceiver's own clock ("measured"),
#: an estimate from the round trip or the remainder ("estimated"), or the caller's browser
#: ("client": reported, bounded, not checked).
TurnPartSource = Literal["measured", "estimated", "client"]
#: Where a turn's round trip came from: the transceiver's RTCP, the browser's ICE, or neither.
RttSource = Literal["rtcp", "client", "none"]


@dataclass(frozen=True, slots=True)
class TurnLatency:
    """One turn of the conversation (`Uplink.turn`): the caller stopped speaking, and the time
    until the first audio of the reply reached the caller's ear, split into where it went
    (transceiver/src/media/turn_timing.rs says exactly how). It comes once the caller's
    browser has reported the turn (the web client does; a caller that reports nothing has no
    turns). The parts (`parts()`, in time order) sum to `total_ms`. Milliseconds throughout."""

    #: 1, 2, ... within the session: the turns the transceiver saw (caller speech, a reply).
    turn: int = 0
    #: The browser's own measurement on its clock: its microphone's last loud sample -> its
    #: first loud sample of the reply after quiet, plus its playout delay.
    total_ms: float = 0.0
    #: Estimated, the remainder: the browser's capture, Opus frame and send, and the estimates'
    #: error. May be negative by a few ms when the round-trip halves overestimate.
    capture_send_ms: float = 0.0
    #: Estimated: half the round trip (0 when `rtt_source` is "none").
    network_up_ms: float = 0.0
    #: Measured: the caller's last speech packet at the transceiver's socket -> handed to the
    #: backend.
    transceiver_up_ms: float = 0.0
    #: Measured: -> the reply's first loud audio queued at the transceiver (gRPC both ways
    #: included; 0 if the backend queued it before the caller stopped).
    backend_ms: float = 0.0
    #: Measured: -> that audio's packet handed to the socket (the pacer's queue, 20 ms grid).
    transceiver_down_ms: float = 0.0
    #: Estimated: half the round trip (0 when `rtt_source` is "none").
    network_down_ms: float = 0.0
    #: Client-reported: the browser's mean jitter-buffer delay.
    jitter_buffer_ms: float = 0.0
    #: Client-reported: the browser's playout delay; None where the browser has no figure.
    playout_ms: float | None = None
    #: Where the round trip came from: "rtcp" (the transceiver's), "client" (the browser's
    #: ICE) or "none" (neither known: both network parts are 0, the remainder holds them).
    rtt_source: RttSource = "none"
    #: RTP timestamp (48 kHz) of the reply's first loud packet.
    rtp_timestamp: int = 0

    def parts(self) -> list[tuple[str, float, TurnPartSource]]:
        """`(name, ms, source)` of each part in time order, from the caller's mouth to its ear
        (`playout` only when the browser reported it); the ms sum to `total_ms`."""
        parts: list[tuple[str, float, TurnPartSource]] = [
            ("capture_send", self.capture_send_ms, "estimated"),
            ("network_up", self.network_up_ms, "estimated"),
            ("transceiver_up", self.transceiver_up_ms, "measured"),
            ("backend", self.backend_ms, "measured"),
            ("transceiver_down", self.transceiver_down_ms, "measured"),
            ("network_down", self.network_down_ms, "estimated"),
            ("jitter_buffer", self.jitter_buffer_ms, "client"),
        ]
        if self.playout_ms is not None:
            parts.append(("playout", self.playout_ms, "client"))
        return parts
