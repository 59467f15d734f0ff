"""The conversions between the contract's messages and the SDK's values, and the checks of a
worker's choices; the enums and their string and int twins."""

from __future__ import annotations

import pytest

import voxgate
from voxgate import _wire
from voxgate._message_size import channel_entry_len
from voxgate._multiplex import _channel_closed
from voxgate._proto import voxgate_pb2 as pb
from voxgate.types import AudioMode, CallState, EventKind, OpusApplication


def test_an_audio_frame_keeps_every_field_and_notes_when_it_came():
    frame = _wire.audio_frame(pb.AudioFrame(
        sequence=7, rtp_timestamp=960, arrival_unix_micros=123, sample_rate_hz=24000,
        pcm=b"\1\0" * 480, concealed=True))
    assert (frame.sequence, frame.rtp_timestamp, frame.arrival_unix_micros) == (7, 960, 123)
    assert frame.sample_rate == 24000 and frame.sample_rate_hz == 24000  # the former name
    assert frame.pcm == b"\1\0" * 480 and frame.concealed
    assert frame.received_unix_micros > 0


def test_an_opus_packet_becomes_an_opus_frame():
    frame = _wire.opus_frame(pb.OpusPacket(data=b"op", rtp_sequence=3, rtp_timestamp=9,
                                           arrival_unix_micros=5))
    assert (frame.data, frame.rtp_sequence, frame.rtp_timestamp, frame.arrival_unix_micros) == (
        b"op", 3, 9, 5)


def test_data_messages_are_text_or_binary_both_ways():
    text = _wire.message(pb.DataMessage(label="oai-events", text="hi"))
    assert (text.label, text.text, text.binary) == ("oai-events", "hi", None)
    binary = _wire.message(pb.DataMessage(label="b", binary=b"\0\1"))
    assert (binary.text, binary.binary) == (None, b"\0\1")
    empty_text = _wire.message(pb.DataMessage(label="x", text=""))
    assert empty_text.text == "" and empty_text.binary is None

    assert _wire.data_message("hi", "oai-events").WhichOneof("payload") == "text"
    out = _wire.data_message(bytearray(b"\0\1"), "b")
    assert out.WhichOneof("payload") == "binary" and out.binary == b"\0\1" and out.label == "b"
    with pytest.raises(TypeError, match="str or bytes"):
        _wire.data_message({"type": "hello"}, "oai-events")


def test_progress_and_cleared_answers():
    p = _wire.progress(pb.PlaybackProgress(played_ms=100, queued_ms=40, item_id="r1",
                                           item_played_ms=60))
    assert p == voxgate.Progress(100, 40, "r1", 60)
    c = _wire.cleared(pb.Cleared(played_ms=100, dropped_ms=900, item_id="r1", item_played_ms=60))
    assert c == voxgate.Cleared(100, 900, "r1", 60)


def test_event_kinds_and_the_end_of_a_session():
    assert _wire.event_kind(pb.SessionEvent.ENDED) is EventKind.ENDED
    assert _wire.event_kind(pb.SessionEvent.DATA_CHANNEL_OPEN) == "data_channel_open"
    assert _wire.event_kind(99) is EventKind.UNSPECIFIED
    ended = pb.Uplink(event=pb.SessionEvent(kind=pb.SessionEvent.ENDED, reason="deleted"))
    assert _wire.is_ended(ended)
    assert not _wire.is_ended(pb.Uplink(event=pb.SessionEvent(kind=pb.SessionEvent.CONNECTED)))
    assert not _wire.is_ended(pb.Uplink(audio=pb.AudioFrame()))


def test_the_encoder_choice_is_checked_and_unset_fields_stay_unset():
    assert _wire.opus_encoder(None, None) is None
    low = _wire.opus_encoder("lowdelay", None)
    assert low.application == pb.OPUS_APPLICATION_LOWDELAY and not low.HasField("complexity")
    voip = _wire.opus_encoder(OpusApplication.VOIP, 0)
    assert voip.application == pb.OPUS_APPLICATION_VOIP
    assert voip.HasField("complexity") and voip.complexity == 0
    only = _wire.opus_encoder(None, 10)
    assert only.application == pb.OPUS_APPLICATION_DEFAULT and only.complexity == 10
    with pytest.raises(ValueError, match="opus_application must be one of"):
        _wire.opus_encoder("celt", None)
    with pytest.raises(ValueError, match="opus_complexity must be 0 to 10"):
        _wire.opus_encoder(None, 11)


def test_modes_rates_targets_and_tokens():
    assert _wire.audio_mode(1) is AudioMode.OPUS_PASSTHROUGH
    assert _wire.audio_mode(AudioMode.PCM) is AudioMode.PCM
    with pytest.raises(ValueError, match="mode must be one of"):
        _wire.audio_mode(7)
    assert _wire.sample_rate(48000) == 48000
    with pytest.raises(ValueError, match="16000, 24000 or 48000"):
        _wire.sample_rate(44100)
    assert _wire.normalize_target("http://10.0.0.1:50051/") == "10.0.0.1:50051"
    assert _wire.normalize_target("h:1") == "h:1"
    assert _wire.bearer("s3cret") == (("authorization", "Bearer s3cret"),)
    assert _wire.bearer(None) == () and _wire.bearer("") == ()


def test_a_worker_checks_its_choices_before_it_connects():
    with pytest.raises(ValueError, match="16000, 24000 or 48000"):
        voxgate.Worker("h:1", sample_rate=8000)
    with pytest.raises(ValueError, match="mode must be one of"):
        voxgate.Worker("h:1", mode=5)
    with pytest.raises(ValueError, match="capacity"):
        voxgate.Worker("h:1", capacity=0)
    with pytest.raises(ValueError, match="at least one"):
        voxgate.Worker([])
    w = voxgate.Worker("http://h:1", mode=voxgate.OPUS_PASSTHROUGH, opus_application="audio")
    assert w.mode is AudioMode.OPUS_PASSTHROUGH
    assert w.encoder.application == pb.OPUS_APPLICATION_AUDIO


def test_the_enums_match_the_contract_and_compare_as_their_old_values():
    assert AudioMode.PCM == pb.AUDIO_MODE_PCM == voxgate.PCM == 0
    assert AudioMode.OPUS_PASSTHROUGH == pb.AUDIO_MODE_OPUS_PASSTHROUGH == voxgate.OPUS_PASSTHROUGH
    assert OpusApplication("voip") is OpusApplication.VOIP and OpusApplication.VOIP == "voip"
    assert f"{OpusApplication.LOWDELAY}" == "lowdelay" and str(CallState.ENDED) == "ended"
    assert EventKind.ENDED == "ended" and f"{EventKind.CONNECTED}" == "connected"
    assert voxgate.Event(kind=EventKind.ENDED).kind == "ended"


def test_multiplex_batches_weigh_every_message_by_its_serialized_size():
    # Issue 37: data messages counted as nothing, so a batch of them passed the limit.
    audio = pb.ChannelDownlink(channel=1, downlink=pb.Downlink(audio=pb.AudioChunk(pcm=b"x" * 6)))
    opus = pb.ChannelDownlink(channel=1, downlink=pb.Downlink(opus=pb.OpusPacket(data=b"y" * 4)))
    data = pb.ChannelDownlink(channel=9, downlink=pb.Downlink(
        data=pb.DataMessage(label="l", text="t" * 300)))
    for m in (audio, opus, data):
        assert channel_entry_len(m) == pb.MultiplexDownlink(messages=[m]).ByteSize()
    batch = pb.MultiplexDownlink(messages=[audio, opus, data])
    assert sum(map(channel_entry_len, (audio, opus, data))) == batch.ByteSize()
    assert channel_entry_len(data) > 300


def test_a_channel_closed_cleanly_carries_no_error_and_a_refusal_its_status():
    assert _channel_closed("s1", pb.ChannelClosed(code=0, message="released")) is None
    refused = _channel_closed("s1", pb.ChannelClosed(code=5, message="no such session"))
    assert isinstance(refused, voxgate.UnknownSessionError) and "session s1" in str(refused)


def test_quality_keeps_every_field_and_an_unmeasured_value_is_none_not_zero():
    q = _wire.quality(pb.Quality(
        at_ms=5000, rtt_ms=0.0,
        uplink=pb.DirectionQuality(jitter_ms=1.5, loss_recent=0.0, loss_total=0.01,
                                   packets_lost=2, packets=250, mos=4.41),
        downlink=pb.DirectionQuality(packets=240)))
    assert q == voxgate.Quality(
        at_ms=5000, rtt_ms=0.0,
        uplink=voxgate.DirectionQuality(jitter_ms=1.5, loss_recent=0.0, loss_total=0.01,
                                        packets_lost=2, packets=250, mos=4.41),
        downlink=voxgate.DirectionQuality(packets=240))
    assert q.rtt_ms == 0.0, "a measured 0 stays 0"
    d = q.downlink
    assert (d.jitter_ms, d.loss_recent, d.loss_total, d.mos) == (None, None, None, None)
    assert q.mos == 4.41, "the lower measured direction"
    empty = _wire.quality(pb.Quality())
    assert empty.rtt_ms is None and empty.uplink == voxgate.DirectionQuality() and empty.mos is None
    assert voxgate.Quality(uplink=voxgate.DirectionQuality(mos=4.0),
                           downlink=voxgate.DirectionQuality(mos=3.2)).mos == 3.2


def test_the_quality_summary_comes_with_ended_and_is_none_without_one():
    ended = pb.SessionEvent(kind=pb.SessionEvent.ENDED, quality=pb.QualitySummary(
        samples=3, rtt_ms_mean=1.0, rtt_ms_max=2.0, uplink_jitter_ms_max=3.0,
        uplink_loss_total=0.0, mos_mean=4.4, mos_min=4.3))
    assert _wire.quality_summary(ended) == voxgate.QualitySummary(
        samples=3, rtt_ms_mean=1.0, rtt_ms_max=2.0, uplink_jitter_ms_max=3.0,
        downlink_jitter_ms_max=None, uplink_loss_total=0.0, downlink_loss_total=None,
        mos_mean=4.4, mos_min=4.3)
    assert _wire.quality_summary(pb.SessionEvent(kind=pb.SessionEvent.ENDED)) is None
    bare = _wire.quality_summary(pb.SessionEvent(quality=pb.QualitySummary(samples=1)))
    assert bare.samples == 1 and bare.mos_mean is None and bare.rtt_ms_max is None


def turn_message(**fields) -> pb.TurnLatency:
    """A turn whose parts sum to its total (412.5 ms) without playout."""
    parts = dict(turn=3, total_ms=412.5, capture_send_ms=-1.5, network_up_ms=20.0,
                 transceiver_up_ms=1.0, backend_ms=300.0, transceiver_down_ms=13.0,
                 network_down_ms=20.0, jitter_buffer_ms=60.0, rtt_source="rtcp",
                 rtp_timestamp=96_000)
    return pb.TurnLatency(**(parts | fields))


def test_a_turn_keeps_every_field_and_its_parts_run_mouth_to_ear_and_sum_to_the_total():
    t = _wire.turn_latency(turn_message(total_ms=432.5, playout_ms=20.0))
    assert t == voxgate.TurnLatency(
        turn=3, total_ms=432.5, capture_send_ms=-1.5, network_up_ms=20.0, transceiver_up_ms=1.0,
        backend_ms=300.0, transceiver_down_ms=13.0, network_down_ms=20.0, jitter_buffer_ms=60.0,
        playout_ms=20.0, rtt_source="rtcp", rtp_timestamp=96_000)
    assert t.parts() == [
        ("capture_send", -1.5, "estimated"), ("network_up", 20.0, "estimated"),
        ("transceiver_up", 1.0, "measured"), ("backend", 300.0, "measured"),
        ("transceiver_down", 13.0, "measured"), ("network_down", 20.0, "estimated"),
        ("jitter_buffer", 60.0, "client"), ("playout", 20.0, "client")]
    assert sum(ms for _, ms, _ in t.parts()) == t.total_ms


def test_a_turn_without_a_playout_figure_has_none_not_zero_and_no_playout_part():
    t = _wire.turn_latency(turn_message())
    assert t.playout_ms is None
    assert [name for name, _, _ in t.parts()][-1] == "jitter_buffer" and len(t.parts()) == 7
    assert sum(ms for _, ms, _ in t.parts()) == t.total_ms
    zero = _wire.turn_latency(turn_message(playout_ms=0.0))
    assert zero.playout_ms == 0.0, "a reported 0 stays 0"
    assert zero.parts()[-1] == ("playout", 0.0, "client")
    assert _wire.turn_latency(pb.TurnLatency()).rtt_source == "none"
