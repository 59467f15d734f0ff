"""The SDK's offline tests: its pure parts (errors, queues, conversions, enums, the task set,
a call's life on a fake stream) and its packaging. No transceiver, no network, no WebRTC:
`pytest sdk/python/tests/unit` runs them alone, in seconds."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def transport() -> str:
    """Overrides the parent conftest's per-transport parametrization: these tests open no
    stream, so they run once."""
    return "none"
