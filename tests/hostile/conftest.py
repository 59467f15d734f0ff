"""The hostile tests' transceiver: the real binary (target/debug) with its default single media
loop, so the hostile caller and its neighbour share a loop, and the test module's `TOKEN` as
its gRPC token. Its log's tail is printed after the test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from voxgate_harness.transceiver import Transceiver  # noqa: E402


@pytest.fixture
def transceiver(request, tmp_path):
    t = Transceiver("--grpc-token", request.module.TOKEN, log_dir=tmp_path).start()
    yield t
    t.stop()
    print(f"--- transceiver log ({t.log_path}) ---\n{t.log_tail(60)}")
