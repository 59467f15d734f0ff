"""Conversions between the bridge contract's messages (proto/grpc/voxgate.proto) and the SDK's
values, and the checks of a worker's choices before anything goes on the wire. No I/O."""

from __future__ import annotations

from voxgate._proto import voxgate_pb2 as pb
from voxgate.types import (
    SAMPLE_RATES,
    AudioFrame,
    AudioMode,
    Cleared,
    DirectionQuality,
    EventKind,
    Message,
    OpusApplication,
    OpusFrame,
    Progress,
    Quality,
    QualitySummary,
    SentAudio,
    TurnLatency,
)

_APPLICATIONS = {
    OpusApplication.VOIP: pb.OPUS_APPLICATION_VOIP,
    OpusApplication.AUDIO: pb.OPUS_APPLICATION_AUDIO,
    OpusApplication.LOWDELAY: pb.OPUS_APPLICATION_LOWDELAY,
}

_EVENT_KINDS = {
    pb.SessionEvent.ATTACHED: EventKind.ATTACHED,
    pb.SessionEvent.CONNECTED: EventKind.CONNECTED,
    pb.SessionEvent.ENDED: EventKind.ENDED,
    pb.SessionEvent.DATA_CHANNEL_OPEN: EventKind.DATA_CHANNEL_OPEN,
}


def normalize_target(target: str) -> str:
    """`http://host:port` (as the transceiver prints it) or `host:port` -> `host:port`."""
    return target.split("://", 1)[-1].rstrip("/")


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata that carries `token` (none without one)."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def sample_rate(rate: int) -> int:
    """`rate` if the transceiver can deliver it; ValueError otherwise."""
    if rate not in SAMPLE_RATES:
        raise ValueError(f"sample_rate must be 16000, 24000 or 48000, not {rate!r}")
    return int(rate)


def audio_mode(mode: AudioMode | int) -> AudioMode:
    """`mode` as an `AudioMode`; ValueError for a value the contract does not have."""
    try:
        return AudioMode(mode)
    except ValueError:
        raise ValueError(f"mode must be one of {[m.name for m in AudioMode]}, "
                         f"not {mode!r}") from None


def opus_encoder(application: OpusApplication | str | None,
                 complexity: int | None) -> pb.OpusEncoder | None:
    """The attach's `encoder` field for a worker's choice (None: the transceiver's own
    settings); ValueError for a bad one, before any call is made."""
    if application is None and complexity is None:
        return None
    app = None
    if application is not None:
        try:
            app = OpusApplication(application)
        except ValueError:
            raise ValueError(f"opus_application must be one of "
                             f"{sorted(a.value for a in OpusApplication)}, "
                             f"not {application!r}") from None
    if complexity is not None and not 0 <= complexity <= 10:
        raise ValueError(f"opus_complexity must be 0 to 10, not {complexity}")
    encoder = pb.OpusEncoder(application=_APPLICATIONS[app] if app is not None else 0)
    if complexity is not None:
        encoder.complexity = complexity
    return encoder


def audio_frame(a: pb.AudioFrame) -> AudioFrame:
    return AudioFrame(pcm=a.pcm, sequence=a.sequence, concealed=a.concealed,
                      sample_rate=a.sample_rate_hz, rtp_timestamp=a.rtp_timestamp,
                      arrival_unix_micros=a.arrival_unix_micros)


def sent_audio(s: pb.SentAudio) -> SentAudio:
    return SentAudio(pcm=s.pcm, sample_rate=s.sample_rate_hz, rtp_timestamp=s.rtp_timestamp,
                     sent_unix_micros=s.sent_unix_micros, item_id=s.item_id, opus=s.opus)


def opus_frame(o: pb.OpusPacket) -> OpusFrame:
    return OpusFrame(data=o.data, rtp_sequence=o.rtp_sequence, rtp_timestamp=o.rtp_timestamp,
                     arrival_unix_micros=o.arrival_unix_micros)


def message(d: pb.DataMessage) -> Message:
    which = d.WhichOneof("payload")
    return Message(label=d.label, text=d.text if which == "text" else None,
                   binary=d.binary if which == "binary" else None)


def data_message(payload: str | bytes | bytearray | memoryview, label: str) -> pb.DataMessage:
    """Text for a `str`, binary for bytes-like; TypeError for anything else."""
    if isinstance(payload, str):
        return pb.DataMessage(label=label, text=payload)
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return pb.DataMessage(label=label, binary=bytes(payload))
    raise TypeError(f"a data-channel message is str or bytes, not {type(payload).__name__}")


def progress(p: pb.PlaybackProgress) -> Progress:
    return Progress(p.played_ms, p.queued_ms, p.item_id, p.item_played_ms)


def cleared(c: pb.Cleared) -> Cleared:
    return Cleared(c.played_ms, c.dropped_ms, c.item_id, c.item_played_ms)


def _optional(msg: object, name: str) -> float | None:
    """A proto3 `optional double`: None when absent (not measured), not 0.0."""
    return getattr(msg, name) if msg.HasField(name) else None  # type: ignore[attr-defined]


def direction_quality(d: pb.DirectionQuality) -> DirectionQuality:
    return DirectionQuality(
        jitter_ms=_optional(d, "jitter_ms"), loss_recent=_optional(d, "loss_recent"),
        loss_total=_optional(d, "loss_total"), packets_lost=d.packets_lost, packets=d.packets,
        mos=_optional(d, "mos"))


def quality(q: pb.Quality) -> Quality:
    return Quality(at_ms=q.at_ms, rtt_ms=_optional(q, "rtt_ms"),
                   uplink=direction_quality(q.uplink), downlink=direction_quality(q.downlink))


def quality_summary(ev: pb.SessionEvent) -> QualitySummary | None:
    """The summary an ENDED event carries; None when it has none (a call under 5 s)."""
    if not ev.HasField("quality"):
        return None
    s = ev.quality
    return QualitySummary(
        samples=s.samples, rtt_ms_mean=_optional(s, "rtt_ms_mean"),
        rtt_ms_max=_optional(s, "rtt_ms_max"),
        uplink_jitter_ms_max=_optional(s, "uplink_jitter_ms_max"),
        downlink_jitter_ms_max=_optional(s, "downlink_jitter_ms_max"),
        uplink_loss_total=_optional(s, "uplink_loss_total"),
        downlink_loss_total=_optional(s, "downlink_loss_total"),
        mos_mean=_optional(s, "mos_mean"), mos_min=_optional(s, "mos_min"))


def turn_latency(t: pb.TurnLatency) -> TurnLatency:
    return TurnLatency(
        turn=t.turn, total_ms=t.total_ms, capture_send_ms=t.capture_send_ms,
        network_up_ms=t.network_up_ms, transceiver_up_ms=t.transceiver_up_ms,
        backend_ms=t.backend_ms, transceiver_down_ms=t.transceiver_down_ms,
        network_down_ms=t.network_down_ms, jitter_buffer_ms=t.jitter_buffer_ms,
        playout_ms=_optional(t, "playout_ms"),
        rtt_source=t.rtt_source or "none",  # type: ignore[arg-type]
        rtp_timestamp=t.rtp_timestamp)


def event_kind(kind: int) -> EventKind:
    return _EVENT_KINDS.get(kind, EventKind.UNSPECIFIED)


def is_ended(up: pb.Uplink) -> bool:
    """Whether `up` is the session's last message (the ENDED event)."""
    return up.WhichOneof("kind") == "event" and up.event.kind == pb.SessionEvent.ENDED
