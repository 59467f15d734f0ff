"""A caller that floods the liveness probe (issue 38, bad input): the web client's watchdog
GETs its session when its path goes silent (`GET /v1/sessions/{id}`, docs/continuity.md), and
that route is not rate-limited like POST and PATCH, each answer being one `Snapshot` command
to the session's media loop. A hostile page can call it in a loop. Each request must get an
answer (200 for its session, 404 for one that does not exist, or a refusal), and a neighbour
call on the same loop must keep its pace and the hostile caller's own call its media.

Real components: the transceiver (target/debug), two aiortc callers, a backend on the Python
SDK playing to both, and the flood in a process of its own (four keep-alive HTTP/1.1
connections, as fast as they are answered; niced, so that it models a client on another
machine rather than one starving the neighbour's measuring process of CPU)."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from voxgate_harness.audio import tone  # noqa: E402
from voxgate_harness.caller import Caller  # noqa: E402
from voxgate_harness.transceiver import Transceiver  # noqa: E402

import voxgate  # noqa: E402

TOKEN = "hostile-probe-token"
RATE = 16_000
FLOOD_SECS = 8.0

#: Four threads, each on one keep-alive connection: its own session, a session that does not
#: exist, a malformed id, in turn. Prints the answers' status counts as JSON.
FLOOD = r"""
import http.client, json, sys, threading, time
host, port, sid, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
paths = [f"/v1/sessions/{sid}", "/v1/sessions/" + "0" * 32, "/v1/sessions/%ff..%2f"]
counts, lock = {}, threading.Lock()
def run():
    conn, n, mine = http.client.HTTPConnection(host, port, timeout=5), 0, {}
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            conn.request("GET", paths[n % len(paths)])
            r = conn.getresponse(); r.read()
            mine[r.status] = mine.get(r.status, 0) + 1
        except Exception as e:
            mine[type(e).__name__] = mine.get(type(e).__name__, 0) + 1
            conn.close(); conn = http.client.HTTPConnection(host, port, timeout=5)
        n += 1
    with lock:
        for k, v in mine.items():
            counts[str(k)] = counts.get(str(k), 0) + v
threads = [threading.Thread(target=run) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(counts))
"""


def session(signal_url: str, sid: str) -> dict:
    with urllib.request.urlopen(f"{signal_url}/v1/sessions/{sid}", timeout=5) as r:
        return json.loads(r.read())


async def test_a_probe_flood_is_answered_and_the_neighbour_keeps_its_pace(tmp_path):
    t = Transceiver("--grpc-token", TOKEN, log_dir=tmp_path).start()  # one loop: both calls
    try:
        async with voxgate.Worker(t.grpc_target, token=TOKEN, sample_rate=RATE,
                                  capacity=4) as worker:
            await worker.wait_registered(20)
            calls = worker.calls()
            hostile = await Caller(t.signal_url).connect()
            hostile_call = await asyncio.wait_for(anext(calls), 20)
            neighbour = await Caller(t.signal_url).connect()
            neighbour_call = await asyncio.wait_for(anext(calls), 20)
            try:
                async with hostile_call, neighbour_call:
                    for c in (hostile_call, neighbour_call):
                        await c.wait_connected(20)
                        await c.play(tone(500, 30.0, RATE))
                    hostile.say(tone(440, 30.0, 48_000))
                    neighbour.say(tone(660, 30.0, 48_000))
                    await asyncio.sleep(1.0)
                    host, port = t.signal_url.removeprefix("http://").split(":")
                    flood = await asyncio.create_subprocess_exec(
                        "nice", "-n", "10", sys.executable, "-c", FLOOD, host, port,
                        hostile.session_id, str(FLOOD_SECS), stdout=subprocess.PIPE)
                    await asyncio.sleep(1.0)
                    since = time.time()
                    await asyncio.sleep(FLOOD_SECS - 2.0)
                    until = time.time()
                    out, _ = await asyncio.wait_for(flood.communicate(), 30)
                    hostile_state = session(t.signal_url, hostile.session_id)
                    neighbour_state = session(t.signal_url, neighbour.session_id)
            finally:
                await hostile.close()
                await neighbour.close()
    finally:
        t.stop()
        print(f"--- transceiver log ({t.log_path}) ---\n{t.log_tail(40)}")

    counts = json.loads(out)
    total = sum(counts.values())
    print(f"probe flood: {total} requests in {FLOOD_SECS:.0f} s: {counts}")
    assert total >= 1000, counts  # the flood really flooded (measured here: several thousand)
    # Every request got an HTTP answer: its own session, not found, or a refusal.
    assert set(counts) <= {"200", "400", "404", "429", "503"}, counts
    assert counts.get("200", 0) >= 100 and counts.get("404", 0) >= 100, counts
    # The hostile caller's own call kept its media.
    assert hostile_state["state"] == "connected", hostile_state
    own = [a for a in hostile.packet_arrivals() if since <= a <= until]
    assert len(own) >= 0.9 * (until - since) * 50, len(own)
    # The neighbour: its downlink kept the 20 ms pace through the flood.
    arrivals = [a for a in neighbour.packet_arrivals() if since <= a <= until]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    print(f"neighbour: {len(arrivals)} packets, median gap {statistics.median(gaps) * 1e3:.1f} ms, "
          f"max {max(gaps) * 1e3:.1f} ms")
    assert len(arrivals) >= 0.95 * (until - since) * 50, len(arrivals)
    assert 0.018 <= statistics.median(gaps) <= 0.022, statistics.median(gaps)
    assert max(gaps) < 0.1, max(gaps)
    assert neighbour_state["state"] == "connected", neighbour_state
