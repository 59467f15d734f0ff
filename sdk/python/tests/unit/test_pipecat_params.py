"""The Pipecat transport's parameters: audio both ways at the call's rate unless set, voxgate's
defaults on top of a plain `TransportParams` (needs the [pipecat] extra, no transceiver)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("pipecat", reason="the [pipecat] extra is not installed")

from pipecat.transports.base_transport import TransportParams  # noqa: E402

from voxgate.pipecat import VoxgateParams, _params_for  # noqa: E402

CALL = SimpleNamespace(sample_rate=24000)


def test_no_params_means_audio_both_ways_at_the_calls_rate():
    p = _params_for(CALL, None)
    assert isinstance(p, VoxgateParams)
    assert p.audio_in_enabled and p.audio_out_enabled
    assert (p.audio_in_sample_rate, p.audio_out_sample_rate) == (24000, 24000)
    assert p.cancel_on_disconnect and p.message_label == "oai-events"


def test_plain_transport_params_keep_their_choices_and_gain_voxgates_defaults():
    p = _params_for(CALL, TransportParams(audio_in_enabled=True, audio_out_enabled=False,
                                          audio_out_sample_rate=16000))
    assert isinstance(p, VoxgateParams)
    assert p.audio_in_enabled and not p.audio_out_enabled
    assert (p.audio_in_sample_rate, p.audio_out_sample_rate) == (24000, 16000)
    assert p.pace_ahead_secs > 0


def test_voxgate_params_are_used_as_given():
    given = VoxgateParams(cancel_on_disconnect=False, message_label="events",
                          audio_in_sample_rate=48000)
    p = _params_for(CALL, given)
    assert not p.cancel_on_disconnect and p.message_label == "events"
    assert (p.audio_in_sample_rate, p.audio_out_sample_rate) == (48000, 24000)
