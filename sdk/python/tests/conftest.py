"""Fixtures of the SDK tests: a real transceiver (target/debug/transceiver) per test and real
WebRTC callers (aiortc), from the shared harness in tests/voxgate_harness."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from voxgate_harness.caller import Caller  # noqa: E402
from voxgate_harness.transceiver import Transceiver  # noqa: E402

GRPC_TOKEN = "sdk-test-token"


@pytest.fixture(autouse=True, params=["multiplex", "session"])
def transport(request, monkeypatch) -> str:
    """Every SDK test runs twice: calls on the worker's Multiplex stream (the default), and on a
    Session stream each."""
    import voxgate.worker

    monkeypatch.setattr(voxgate.worker, "DEFAULT_MULTIPLEX", request.param == "multiplex")
    return request.param


@pytest.fixture
def token() -> str:
    return GRPC_TOKEN


@pytest.fixture
def transceiver(tmp_path):
    """A transceiver that wants GRPC_TOKEN on the bridge API; shows its log on failure."""
    t = Transceiver("--grpc-token", GRPC_TOKEN, log_dir=tmp_path).start()
    yield t
    t.stop()
    print(f"--- transceiver log ({t.log_path}) ---\n{t.log_tail(60)}")


@pytest.fixture
async def caller_factory(transceiver):
    callers: list[Caller] = []

    async def make(**query: str) -> Caller:
        c = Caller(transceiver.signal_url, query=query)
        callers.append(c)
        return await c.connect()

    yield make
    for c in callers:
        await c.close()
