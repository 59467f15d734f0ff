"""The recorder's placement of both legs (call_record.py), without a transceiver: frames with
known stamps in, samples at known places out."""

from __future__ import annotations

import math
import random
import sys
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from call_record import (  # noqa: E402
    DOWNLINK_REANCHOR_US,
    LEFT,
    RIGHT,
    UPLINK_REANCHOR_US,
    WINDOW_SECONDS,
    LegClock,
    StereoTrack,
    resample,
)

RATE = 16_000
FRAME = RATE // 50


def frame(value: int, n: int = FRAME) -> array:
    return array("h", [value] * n)


def collect(rate: int = RATE) -> tuple[StereoTrack, bytearray]:
    out = bytearray()
    return StereoTrack(rate, out.extend), out


def channel(out: bytearray, ch: int) -> array:
    samples = array("h")
    samples.frombytes(bytes(out))
    return samples[ch::2]


def test_a_caller_leg_sits_on_its_rtp_clock_whatever_its_arrivals_jitter():
    clock = LegClock(UPLINK_REANCHOR_US, stamp_is_end=True)
    rng = random.Random(7)
    t0, ts0 = 1_700_000_000_000_000, 4_000_000_000  # timestamps that wrap mid-call
    starts = []
    for k in range(200):
        arrival = t0 + 20_000 * (k + 1) + rng.randrange(0, 40_000)  # 0-40 ms late
        starts.append(clock.start_of((ts0 + 960 * k) & 0xFFFF_FFFF, arrival))
    first = starts[0]
    assert [s - first for s in starts] == [20_000 * k for k in range(200)]
    assert clock.reanchored == 0
    # A frame whose stamp is far off its RTP place (the caller's clock jumped) anchors again.
    jumped = clock.start_of(ts0 + 960 * 900, t0 + 20_000 * 201)
    assert jumped == t0 + 20_000 * 200 and clock.reanchored == 1


def test_an_agent_leg_starts_at_its_send_time_and_silence_is_the_rtp_gap():
    clock = LegClock(DOWNLINK_REANCHOR_US, stamp_is_end=False)
    sent = 5_000_000
    assert clock.start_of(100, sent) == sent
    # Ten ticks of nothing, then a frame sent 0.4 ms late: placed on the tick grid.
    assert clock.start_of(100 + 11 * 960, sent + 220_400) == sent + 220_000
    # A pacer that restarted its grid after a stall: the send time wins.
    assert clock.start_of(100 + 12 * 960, sent + 900_000) == sent + 900_000
    assert clock.reanchored == 1


def test_both_legs_land_where_their_times_say_and_the_window_writes_in_order():
    track, out = collect()
    up = LegClock(UPLINK_REANCHOR_US, stamp_is_end=True)
    down = LegClock(DOWNLINK_REANCHOR_US, stamp_is_end=False)
    base = 10_000_000
    # Caller: 3 s of 1000s from base (arrivals 20 ms after each frame's start).
    for k in range(150):
        start = up.start_of(960 * k, base + 20_000 * (k + 1))
        track.put(LEFT, start, frame(1000), RATE)
    # Agent: 1 s of -2000s starting 250 ms after the caller stopped, sent late and out of order
    # within the window.
    frames = list(range(50))
    frames[3], frames[4] = frames[4], frames[3]
    for k in frames:
        start = down.start_of(77 + 960 * k, base + 3_250_000 + 20_000 * k)
        track.put(RIGHT, start, frame(-2000), RATE)
    track.close()
    left, right = channel(out, LEFT), channel(out, RIGHT)
    assert len(left) == len(right) == track.written == int(4.25 * RATE)
    assert all(s == 1000 for s in left[:3 * RATE]) and not any(left[3 * RATE:])
    onset = next(i for i, s in enumerate(right) if s)
    assert onset == int(3.25 * RATE)
    assert all(s == -2000 for s in right[onset:onset + RATE]) and not any(right[:onset])
    assert track.late_samples == 0
    assert track.seconds_at(base + 3_250_000) == 3.25


def test_a_frame_for_audio_already_written_is_dropped_and_counted():
    track, out = collect()
    track.put(LEFT, 0, frame(1), RATE)
    track.put(LEFT, (WINDOW_SECONDS + 1) * 1_000_000, frame(2), RATE)  # pushes 1 s out
    track.put(RIGHT, 0, frame(3), RATE)  # for the first frame's time: gone
    assert track.late_samples == FRAME
    track.pad_to(4_000_000)  # the call ended 4 s in: silence to the end
    track.close()
    assert not any(channel(out, RIGHT))
    assert track.written == 4 * RATE


def test_a_leg_at_another_rate_is_resampled_to_the_tracks():
    track, out = collect(48_000)
    tone = array("h", (int(8000 * math.sin(2 * math.pi * 500 * i / RATE)) for i in range(FRAME)))
    track.put(LEFT, 0, tone, RATE)
    track.close()
    left = channel(out, LEFT)
    assert len(left) == 960
    assert max(abs(a - b) for a, b in zip(left[0::3], tone)) <= 1, "the original samples kept"
    assert len(resample(tone, RATE, 24_000)) == 480
