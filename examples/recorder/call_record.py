"""The two legs of a call as one stereo track: pure logic, no I/O of its own (the recorder feeds
it frames and gives it somewhere to write).

Where a frame goes. Both legs are stamped by the transceiver on one wall clock: a caller frame
by its packet's arrival (`AudioFrame.arrival_unix_micros`), a frame sent to the caller by when
it left (`SentAudio.sent_unix_micros`). So the track is the call as the transceiver lived it:
the caller's audio as it arrived (left), the agent's as it was sent (right); the caller heard
the right channel one network trip later, and spoke the left one a trip earlier.

Within a leg, frames are placed by their RTP timestamps (48 kHz), not by each stamp, so network
jitter neither overlaps nor tears them: a leg is anchored at its first frame (a caller frame's
audio ends when its packet leaves, so it starts 20 ms before its arrival; a sent frame starts
when it leaves), and each later frame sits its RTP distance from the anchor. A leg whose frames
drift from their stamps by more than its threshold (the caller's clock jumped, the pacer
restarted its grid after a stall) is anchored again at that frame. A gap in a leg (the caller
sent nothing, the agent was silent, a tap that fell behind lost frames) is silence.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

RTP_RATE = 48_000
FRAME_US = 20_000
#: How far a leg's frames may drift from their stamps before it is anchored again: network
#: jitter for the caller's leg, the loop's tick jitter for the agent's.
UPLINK_REANCHOR_US = 250_000
DOWNLINK_REANCHOR_US = 60_000
#: Audio kept in memory before it is written: later frames of either leg land in this window.
WINDOW_SECONDS = 2
LEFT, RIGHT = 0, 1


class LegClock:
    """Maps one leg's frames (RTP timestamp, transceiver stamp) to where they start (µs)."""

    def __init__(self, reanchor_us: int, stamp_is_end: bool) -> None:
        self.reanchor_us = reanchor_us
        self.stamp_is_end = stamp_is_end
        self.anchor_us: int | None = None
        self.anchor_ts = 0
        self.reanchored = 0

    def start_of(self, rtp_timestamp: int, stamp_us: int) -> int:
        stamped_start = stamp_us - FRAME_US if self.stamp_is_end else stamp_us
        if self.anchor_us is not None:
            # RTP timestamps wrap at 2^32: the distance is signed, modulo.
            ticks = (rtp_timestamp - self.anchor_ts) & 0xFFFF_FFFF
            if ticks >= 1 << 31:
                ticks -= 1 << 32
            start = self.anchor_us + ticks * 1_000_000 // RTP_RATE
            if abs(start - stamped_start) <= self.reanchor_us:
                return start
            self.reanchored += 1
        self.anchor_us, self.anchor_ts = stamped_start, rtp_timestamp
        return stamped_start


def pcm16(data: bytes) -> array:
    samples = array("h")
    samples.frombytes(data)
    return samples


def resample(samples: array, src_rate: int, dst_rate: int) -> array:
    """Linear interpolation: enough for a record a person listens to (a leg changes rate only
    when a new owner attaches at another rate)."""
    if src_rate == dst_rate or not samples:
        return samples
    n = len(samples) * dst_rate // src_rate
    out = array("h", bytes(2 * n))
    last = len(samples) - 1
    for i in range(n):
        x = i * src_rate / dst_rate
        j = int(x)
        k = min(j + 1, last)
        out[i] = int(samples[j] + (samples[k] - samples[j]) * (x - j))
    return out


class StereoTrack:
    """Interleaved 16-bit stereo at `rate`, written through `write` (bytes of whole sample
    pairs, in order) as frames age out of the window. Time 0 is the first frame's start."""

    def __init__(self, rate: int, write: Callable[[bytes], None]) -> None:
        self.rate = rate
        self.write = write
        self.t0_us: int | None = None
        self.base = 0  # sample index of window[0]
        self.window = array("h")  # interleaved L, R
        self.end = 0  # one past the last sample index any frame reached
        self.late_samples = 0  # arrived for a stretch already written: dropped
        self.written = 0

    def index_of(self, start_us: int) -> int:
        if self.t0_us is None:
            self.t0_us = start_us
        return round((start_us - self.t0_us) * self.rate / 1_000_000)

    def put(self, channel: int, start_us: int, samples: array, rate: int) -> None:
        samples = resample(samples, rate, self.rate)
        at = self.index_of(start_us)
        if at < self.base:
            skip = min(self.base - at, len(samples))
            self.late_samples += skip
            samples, at = samples[skip:], self.base
        if not samples:
            return
        self._grow_to(at + len(samples))
        off = 2 * (at - self.base) + channel
        self.window[off:off + 2 * len(samples):2] = samples
        self.end = max(self.end, at + len(samples))
        self._flush_older_than(self.end - WINDOW_SECONDS * self.rate)

    def _grow_to(self, end: int) -> None:
        need = 2 * (end - self.base) - len(self.window)
        if need > 0:
            self.window.extend(array("h", bytes(2 * need)))

    def _flush_older_than(self, index: int) -> None:
        n = index - self.base
        if n <= 0:
            return
        self.write(self.window[:2 * n].tobytes())
        del self.window[:2 * n]
        self.base += n
        self.written += n

    def pad_to(self, stamp_us: int) -> None:
        """The track lasts at least until `stamp_us` (silence after the last frame): a call's
        record ends when the call did."""
        if self.t0_us is not None:
            self.end = max(self.end, self.index_of(stamp_us))

    def close(self) -> None:
        """Writes what is left, up to the last frame's end."""
        self._grow_to(self.end)
        self._flush_older_than(self.end)

    def seconds_at(self, stamp_us: int) -> float:
        """A transceiver time as seconds into the track (negative: before its first frame)."""
        return 0.0 if self.t0_us is None else (stamp_us - self.t0_us) / 1_000_000
