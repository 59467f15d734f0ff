"""The voice-to-voice benchmark (`scripts/bench`, loadgen's `voice` scenario): a real caller
talks to the offline voice agent through a real transceiver, turn after turn with pauses
between, then talks over one reply; prints one JSON object with every turn's parts and the
barge-in's (see voice.py for what each part is).

    PYTHONPATH=tests .venv/bin/python -m voxgate_harness.voice_bench --turns 3 \\
        --transceiver target/release/transceiver --log-dir /tmp/voice --out voice.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from voxgate_harness.caller import Caller
from voxgate_harness.transceiver import Transceiver
from voxgate_harness.voice import AgentProcess, measure_barge_in, measure_turn, speech

UTTERANCES = ["Book a table for two.", "Hello there.", "What time is it?",
              "Book a table for four.", "Goodbye."]
BARGE = ("Please repeat after me: the quick brown fox jumps over the lazy dog, and then it runs "
         "all the way home to its family.", "Wait, stop, stop talking, I have a question.")
PAUSE_S = 1.0
TIMEOUT_S = 120.0


async def run(args: argparse.Namespace) -> dict:
    texts = [UTTERANCES[i % len(UTTERANCES)] for i in range(args.turns)]
    audio = speech(texts + list(BARGE))
    caller = await Caller(args.signal_url, turns=True).connect()
    try:
        await asyncio.wait_for(caller.dc_open.wait(), 30)
        await asyncio.wait_for(caller.turns_open.wait(), 30)
        turns = []
        for text, pcm in zip(texts, audio):
            turn = await measure_turn(caller, pcm, TIMEOUT_S)
            turn["said"] = text
            turns.append(turn)
            # The reply plays out (however long it is), then a pause.
            await caller.wait_quiet(0.3, TIMEOUT_S)
            await asyncio.sleep(PAUSE_S)
        barge = await measure_barge_in(caller, audio[-2], audio[-1], TIMEOUT_S)
        return {"turns": turns, "barge_in": [barge]}
    finally:
        await caller.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transceiver", required=True, help="the transceiver binary")
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--log-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, help="write the JSON here (default: stdout)")
    args = p.parse_args(argv)
    os.environ["VOXGATE_TRANSCEIVER_BIN"] = args.transceiver
    token = os.urandom(16).hex()
    args.log_dir.mkdir(parents=True, exist_ok=True)
    with Transceiver("--grpc-token", token, log_dir=args.log_dir) as t:
        agent = AgentProcess(t.grpc_target, token, args.log_dir / "voice-agent.log")
        try:
            agent.wait_ready()
            args.signal_url = t.signal_url
            result = asyncio.run(run(args))
        finally:
            agent.stop()
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
