"""python -m voice_agent: the offline voice agent as a voxgate worker (`scripts/run --agent`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

import voxgate

from voice_agent.agent import RATE, Models, serve


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="voice_agent", description=__doc__)
    p.add_argument("--transceiver", action="append",
                   default=None, help="transceiver gRPC address, repeatable "
                   "(env VOXGATE_AGENT_TRANSCEIVER, comma-separated; default 127.0.0.1:50051)")
    p.add_argument("--capacity", type=int,
                   default=int(os.environ.get("VOXGATE_AGENT_CAPACITY", "4")),
                   help="calls served at once (env VOXGATE_AGENT_CAPACITY; default 4)")
    p.add_argument("--worker-id", default=os.environ.get("VOXGATE_AGENT_WORKER_ID"),
                   help="worker id (env VOXGATE_AGENT_WORKER_ID; default <host>-<pid>)")
    # Piper's synthetic speech does not need the speech codec: the CELT-only encoder is the
    # cheaper one for the transceiver (docs/BENCHMARKS.md, the encoder matrix).
    p.add_argument("--opus-application", choices=[a.value for a in voxgate.OpusApplication],
                   default=os.environ.get("VOXGATE_AGENT_OPUS_APPLICATION", "lowdelay"),
                   help="how the transceiver encodes the agent's speech (env "
                   "VOXGATE_AGENT_OPUS_APPLICATION; default lowdelay)")
    args = p.parse_args(argv)
    if not args.transceiver:
        env = os.environ.get("VOXGATE_AGENT_TRANSCEIVER", "127.0.0.1:50051")
        args.transceiver = [t for t in env.split(",") if t]
    # The token comes from the environment only, so it never shows in `ps`.
    args.token = os.environ.get("VOXGATE_AGENT_TOKEN") or None
    return args


async def amain(args: argparse.Namespace) -> None:
    models = await asyncio.to_thread(Models.load)
    async with voxgate.Worker(args.transceiver, token=args.token, capacity=args.capacity,
                              worker_id=args.worker_id, sample_rate=RATE,
                              opus_application=args.opus_application) as worker:
        await serve(worker, models)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s voice-agent %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(amain(parse_args(argv)))
    except KeyboardInterrupt:
        pass
    except voxgate.AuthError as e:
        logging.error("%s", e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
