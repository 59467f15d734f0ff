"""What a call delivers: plain, numpy-free values."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class AudioFrame:
    """20 ms of the caller's audio: PCM16 little-endian mono at `sample_rate_hz`."""

    pcm: bytes
    # 0, 1, 2, ... with no gaps: a frame the network lost is synthesized (`concealed`).
    sequence: int
    concealed: bool
    sample_rate_hz: int
    # RTP timestamp (48 kHz clock) of the frame.
    rtp_timestamp: int
    # When the packet reached the transceiver's socket (wall clock, µs since the epoch).
    arrival_unix_micros: int
    # When this process received it (wall clock, µs since the epoch).
    received_unix_micros: int = field(default_factory=lambda: time.time_ns() // 1000)


@dataclass(frozen=True, slots=True)
class OpusFrame:
    """One uplink Opus packet (AUDIO_MODE_OPUS_PASSTHROUGH): 20 ms at 48 kHz."""

    data: bytes
    rtp_sequence: int
    rtp_timestamp: int
    arrival_unix_micros: int


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
    """A session event as a Tap sees it: attached, connected, ended, data_channel_open."""

    kind: str
    reason: str = ""
    session_id: str = ""
