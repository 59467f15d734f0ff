"""A caller whose RTCP lies (issue 39, bad input): its receiver reports claim a jitter of
hours, a round trip of an hour, a negative or impossible cumulative loss, and report blocks for
SSRCs nobody sent, and it floods them at 200 a second. None of it may reach the session's
quality, the backend's `Quality` or the histograms as truth; each absurd value is counted by
field; and a neighbour call on the same loop keeps its pace and its clean quality.

Real components: the transceiver (target/debug), two aiortc callers (the hostile one with its
RTCP receiver reports rewritten on their way out, after aiortc built them honestly), and a
backend on the Python SDK that owns both calls and plays to them."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

from aiortc.rtp import RtcpReceiverInfo, RtcpRrPacket

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from voxgate_harness.audio import tone  # noqa: E402
from voxgate_harness.caller import Caller  # noqa: E402

import voxgate  # noqa: E402

TOKEN = "hostile-rtcp-token"
RATE = 16_000
#: 2^31 RTP units at 48 kHz: about 12 hours of jitter.
HOURS_OF_JITTER = 0x7FFF_FFFF
#: An LSR an hour older than the real one: A - LSR - DLSR reads an hour.
AN_HOUR = 3600 << 16


def lie(packet: RtcpRrPacket, n: int) -> RtcpRrPacket:
    """The report aiortc built, with every field a receiver report may lie in rewritten."""
    reports = []
    for r in packet.reports:
        reports.append(RtcpReceiverInfo(
            ssrc=r.ssrc,
            fraction_lost=255,
            # Negative (duplicates gone wild) and beyond anything sent, in turn.
            packets_lost=-3 if n % 2 else 5_000_000,
            highest_sequence=r.highest_sequence,
            jitter=HOURS_OF_JITTER,
            lsr=(r.lsr - AN_HOUR) & 0xFFFF_FFFF if r.lsr else 0,
            dlsr=1 if r.lsr else 0,
        ))
    # A block for an SSRC the transceiver never sent.
    reports.append(RtcpReceiverInfo(ssrc=0x1234_5678, fraction_lost=0, packets_lost=7,
                                    highest_sequence=99, jitter=5, lsr=0, dlsr=0))
    return RtcpRrPacket(ssrc=packet.ssrc, reports=reports)


def make_liar(caller: Caller) -> dict:
    """Rewrites the caller's receiver reports as they leave and keeps the last one for the
    flood. Returns counters."""
    receiver = caller._receiver
    honest_send = receiver._send_rtcp
    state = {"sent": 0, "last": None}

    async def send(packet) -> None:
        if isinstance(packet, RtcpRrPacket):
            packet = lie(packet, state["sent"])
            state["last"] = packet
            state["sent"] += 1
        await honest_send(packet)

    receiver._send_rtcp = send
    state["send"] = send
    return state


async def flood(state: dict, stop: asyncio.Event) -> None:
    """200 forged receiver reports a second (each a fresh copy of the last lie)."""
    while not stop.is_set():
        if state["last"] is not None:
            await state["send"](RtcpRrPacket(ssrc=state["last"].ssrc,
                                             reports=list(state["last"].reports[:-1])))
        await asyncio.sleep(0.005)


def metrics(signal_url: str) -> str:
    with urllib.request.urlopen(f"{signal_url}/metrics", timeout=5) as r:
        return r.read().decode()


def metric(text: str, name: str, label: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") and label in line)


def session(signal_url: str, sid: str) -> dict:
    with urllib.request.urlopen(f"{signal_url}/v1/sessions/{sid}", timeout=5) as r:
        return json.loads(r.read())


def bounded(q: voxgate.Quality | dict) -> None:
    """Every figure is one a network can produce (or absent)."""
    if isinstance(q, voxgate.Quality):
        rtt, dirs = q.rtt_ms, [q.uplink, q.downlink]
        dirs = [{"jitter_ms": d.jitter_ms, "loss_total": d.loss_total, "mos": d.mos}
                for d in dirs]
    else:
        rtt, dirs = q["rtt_ms"], [q["uplink"], q["downlink"]]
    assert rtt is None or 0 <= rtt < 10_000, q
    for d in dirs:
        assert d["jitter_ms"] is None or 0 <= d["jitter_ms"] < 5_000, q
        assert d["loss_total"] is None or 0 <= d["loss_total"] <= 1, q
        assert d["mos"] is None or 1 <= d["mos"] <= 4.5, q


async def test_lying_rtcp_is_bounded_and_counted_and_the_neighbour_keeps_its_pace(transceiver):
    async with voxgate.Worker(transceiver.grpc_target, token=TOKEN, sample_rate=RATE,
                              capacity=4) as worker:
        await worker.wait_registered(20)
        calls = worker.calls()
        liar = await Caller(transceiver.signal_url).connect()
        liar_call = await asyncio.wait_for(anext(calls), 20)
        neighbour = await Caller(transceiver.signal_url).connect()
        neighbour_call = await asyncio.wait_for(anext(calls), 20)
        stop = asyncio.Event()
        try:
            async with liar_call, neighbour_call:
                liar_q: list[voxgate.Quality] = []
                liar_call.on_quality(liar_q.append)
                for c in (liar_call, neighbour_call):
                    await c.wait_connected(20)
                    await c.play(tone(500, 30.0, RATE))
                liar.say(tone(440, 30.0, 48_000))
                neighbour.say(tone(660, 30.0, 48_000))
                state = make_liar(liar)
                flooding = asyncio.create_task(flood(state, stop))
                # Two quality samples (5 s, 10 s) under the lies, the neighbour measured from
                # 2 s to 11 s.
                await asyncio.sleep(2.0)
                since = time.time()
                await asyncio.sleep(9.0)
                until = time.time()
                stop.set()
                await flooding
                # A lie about the round trip needs a sender report of ours to answer (one a
                # second, media/session/rtc_config.rs) and then a stats round (every 5 s): wait
                # for its count.
                deadline = time.monotonic() + 12
                while time.monotonic() < deadline:
                    text = metrics(transceiver.signal_url)
                    if all(metric(text, "voxgate_rtcp_implausible_total", f'field="{f}"')
                           for f in ("jitter", "rtt", "lost")):
                        break
                    await asyncio.sleep(0.5)
                liar_state = session(transceiver.signal_url, liar.session_id)
                neighbour_state = session(transceiver.signal_url, neighbour.session_id)
        finally:
            stop.set()
            await liar.close()
            await neighbour.close()

    assert state["sent"] >= 1000, f"only {state['sent']} forged reports went out"
    # Nothing absurd reached the session JSON, the backend or the histograms.
    assert liar_state["state"] == "connected", liar_state
    bounded(liar_state["quality"])
    for q in liar_q:
        bounded(q)
    assert liar_q, "the backend still got the liar's quality samples"
    # Each lie was seen and counted, by field.
    for field in ("jitter", "rtt", "lost"):
        assert metric(text, "voxgate_rtcp_implausible_total", f'field="{field}"') >= 1, field
    # The histograms took no absurd observation: in each series, every sample is under the
    # largest finite bucket (the +Inf bucket holds no more than it).
    for name in ("voxgate_call_rtt_seconds_bucket", "voxgate_call_jitter_seconds_bucket"):
        series: dict[str, list[tuple[float, float]]] = {}
        for line in text.splitlines():
            if line.startswith(name + "{"):
                labels, value = line.rsplit(" ", 1)
                le = labels.split('le="')[1].split('"')[0]
                key = labels.replace(f'le="{le}"', "")
                series.setdefault(key, []).append((float(le), float(value)))
        assert series, name
        for key, buckets in series.items():
            buckets.sort()
            assert buckets[-1][0] == float("inf") and buckets[-1][1] == buckets[-2][1], (
                key, buckets[-2:])
    # The neighbour: its downlink kept the 20 ms pace, its quality stayed clean.
    arrivals = [a for a in neighbour.packet_arrivals() if since <= a <= until]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert len(arrivals) >= 0.95 * (until - since) * 50, len(arrivals)
    assert 0.018 <= statistics.median(gaps) <= 0.022, statistics.median(gaps)
    assert max(gaps) < 0.1, max(gaps)
    nq = neighbour_state["quality"]
    assert nq["uplink"]["mos"] is not None and nq["uplink"]["mos"] > 4.0, nq
    assert nq["downlink"]["loss_total"] in (None, 0.0) or nq["downlink"]["loss_total"] < 0.01, nq
