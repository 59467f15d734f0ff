"""Fixtures of the voice agent's tests: one real transceiver and one agent process
(`python -m voice_agent`, models loaded once) per module, real aiortc callers per test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(HERE.parent))

from voxgate_harness.caller import Caller  # noqa: E402
from voxgate_harness.transceiver import Transceiver  # noqa: E402
from voxgate_harness.voice import AgentProcess  # noqa: E402

TOKEN = "agent-test-token"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """(transceiver, agent) running for the module; their logs are printed at the end."""
    tmp = tmp_path_factory.mktemp("voice-agent")
    t = Transceiver("--grpc-token", TOKEN, log_dir=tmp).start()
    agent = AgentProcess(t.grpc_target, TOKEN, tmp / "agent.log")
    try:
        agent.wait_ready()
        yield t, agent
    finally:
        agent.stop()
        t.stop()
        print(f"--- agent log ---\n{agent.log()[-4000:]}\n--- transceiver log ---\n"
              f"{t.log_tail(40)}")


@pytest.fixture
async def caller(stack):
    t, _ = stack
    c = await Caller(t.signal_url, turns=True).connect()
    yield c
    await c.close()
