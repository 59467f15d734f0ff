"""A caller that lies on its `voxgate.turns` channel (issue 39 item 3, bad input): reports that
are not JSON, oversized, of the wrong shape, binary, implausible (negative, a day long),
unmatched (an RTP timestamp of no turn), repeated, and inconsistent (shorter than the
transceiver's own span of the turn), then a flood of all of them at about a thousand a second.
Each is dropped and counted by reason; only its one honest report per turn becomes a split; no
report reaches the backend as a message; and a neighbour call on the same loop keeps its pace.

Real components: the transceiver (target/debug), two aiortc callers (the hostile one opens the
turns channel as the web client does), and a backend on the Python SDK that owns both calls,
answers the hostile caller's speech after a pause and plays to the neighbour throughout."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from voxgate_harness.audio import tone  # noqa: E402
from voxgate_harness.caller import Caller  # noqa: E402

import voxgate  # noqa: E402

TOKEN = "hostile-turns-token"
RATE = 16_000
REASONS = ("malformed", "implausible", "unmatched", "repeated", "inconsistent")
FLOOD_S = 8.0


def report(total_ms: float, ts: int | None = None, **extra) -> str:
    r = {"type": "turn.report", "speech_end_to_heard_ms": total_ms, **extra}
    if ts is not None:
        r["rtp_timestamp"] = ts
    return json.dumps(r)


def garbage(ts: int) -> list[str | bytes]:
    """One of each kind of bad report, for a turn whose reply onset is at RTP timestamp `ts`."""
    return [
        "not json at all",  # malformed
        report(500.0, ts, padding="x" * 600),  # malformed: over 512 bytes
        report(500.0, ts, evil=1),  # malformed: an unknown field
        json.dumps({"type": "quality.report", "speech_end_to_heard_ms": 500.0}),  # malformed
        b"\x00\x01binary\xff",  # malformed
        report(-5.0, ts),  # implausible: negative
        report(86_400_000.0, ts),  # implausible: a day
        report(500.0, ts, jitter_buffer_ms=1e9),  # implausible
        report(500.0, ts, rtt_ms=-1.0),  # implausible
        report(500.0, (ts + 10 * 48_000) & 0xFFFF_FFFF),  # unmatched: 10 s after any onset
        report(500.0, ts),  # repeated: this turn was reported
    ]


def metrics(signal_url: str) -> str:
    with urllib.request.urlopen(f"{signal_url}/metrics", timeout=5) as r:
        return r.read().decode()


def dropped(text: str, reason: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("voxgate_turn_reports_dropped_total{")
               and f'reason="{reason}"' in line)


def session(signal_url: str, sid: str) -> dict:
    with urllib.request.urlopen(f"{signal_url}/v1/sessions/{sid}", timeout=5) as r:
        return json.loads(r.read())


async def turn(caller: Caller, call: voxgate.Call) -> tuple[float, int, float]:
    """The caller speaks 0.8 s, the backend answers 0.4 s after its end. Returns the caller's
    speech end (wall clock), the reply onset's RTP timestamp and when it was heard."""
    _, done = caller.say(tone(440, 0.8, 48_000))
    end = await done
    await asyncio.sleep(0.4)
    await call.play(tone(500, 0.6, RATE))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        heard = caller.reply_onset_after(end)
        if heard is not None:
            await caller.wait_quiet(0.3, 10)
            return end, heard.rtp_timestamp, heard.at
        await asyncio.sleep(0.02)
    raise TimeoutError("the reply was never heard")


async def test_lying_turn_reports_are_dropped_by_reason_and_the_neighbour_keeps_its_pace(
        transceiver):
    async with voxgate.Worker(transceiver.grpc_target, token=TOKEN, sample_rate=RATE,
                              capacity=4) as worker:
        await worker.wait_registered(20)
        calls = worker.calls()
        liar = await Caller(transceiver.signal_url, turns=True).connect()
        liar_call = await asyncio.wait_for(anext(calls), 20)
        neighbour = await Caller(transceiver.signal_url).connect()
        neighbour_call = await asyncio.wait_for(anext(calls), 20)
        sent = 0
        try:
            async with liar_call, neighbour_call:
                splits: list[voxgate.TurnLatency] = []
                liar_call.on_turn(splits.append)
                messages: list = []

                async def collect() -> None:
                    async for m in liar_call.messages():
                        messages.append(m)

                collecting = asyncio.create_task(collect())
                for c in (liar_call, neighbour_call):
                    await c.wait_connected(20)
                await asyncio.wait_for(liar.turns_open.wait(), 20)
                await neighbour_call.play(tone(660, 40.0, RATE))
                neighbour.say(tone(330, 40.0, 48_000))

                # Before any turn: a report names nothing.
                liar.send_turns(report(500.0))
                sent += 1
                # Turn 1: a report shorter than the transceiver's own span, then an honest
                # one, which comes too late (a turn is reported once).
                end, ts, heard = await turn(liar, liar_call)
                honest = (heard - end) * 1e3
                liar.send_turns(report(1.0, ts))
                sent += 1
                assert await liar.report_turn(honest, ts, 0.0) is None
                sent += 1
                # Turn 2: the honest report becomes the turn's split, then every kind of lie.
                end, ts, heard = await turn(liar, liar_call)
                answer = await liar.report_turn((heard - end) * 1e3, ts, 0.0)
                assert answer is not None and answer["type"] == "turn.latency", answer
                since = time.time()
                lies = garbage(ts)
                while time.time() - since < FLOOD_S:
                    for lie in lies:
                        liar.send_turns(lie)
                    sent += len(lies)
                    await asyncio.sleep(0.01)
                until = time.time()
                # Every lie was delivered (a reliable channel) and counted.
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:
                    state = session(transceiver.signal_url, liar.session_id)
                    if state["turns"]["reports_dropped"] >= sent:
                        break
                    await asyncio.sleep(0.5)
                text = metrics(transceiver.signal_url)
                neighbour_state = session(transceiver.signal_url, neighbour.session_id)
                collecting.cancel()
        finally:
            await liar.close()
            await neighbour.close()

    print("sent", sent, "turns", json.dumps(state["turns"]))
    assert sent > 5_000, sent
    # Each lie dropped and counted, by reason; the one honest report per turn that came in
    # time is the only split, in the session JSON, at the backend and at the caller.
    assert state["turns"]["reports_dropped"] == sent, (sent, state["turns"])
    assert sum(dropped(text, r) for r in REASONS) == sent, text
    for reason in REASONS:
        assert dropped(text, reason) >= 1, reason
    assert dropped(text, "inconsistent") == 1
    assert state["turns"]["seen"] == 2, state["turns"]
    assert [s["turn"] for s in state["turns"]["last"]] == [2], state["turns"]
    assert [s.turn for s in splits] == [2], splits
    assert len(liar.turn_latencies) == 1, liar.turn_latencies
    assert state["state"] == "connected", state
    # The turns channel never reaches the backend.
    assert messages == [], messages[:3]
    # The neighbour: its downlink kept the 20 ms pace through the flood.
    arrivals = [a for a in neighbour.packet_arrivals() if since <= a <= until]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert len(arrivals) >= 0.95 * (until - since) * 50, len(arrivals)
    assert 0.018 <= statistics.median(gaps) <= 0.022, statistics.median(gaps)
    assert max(gaps) < 0.1, max(gaps)
    assert neighbour_state["state"] == "connected", neighbour_state
