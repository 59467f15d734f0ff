"""Listen-only copy of a session (`Tap`), e.g. for a recorder or a transcriber that runs beside
the backend that owns the call: the caller's audio, and on request what was sent to the caller."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from voxgate import _wire
from voxgate._proto import voxgate_pb2 as pb
from voxgate._proto import voxgate_pb2_grpc as pb_grpc
from voxgate.errors import from_rpc_error
from voxgate.types import (
    AudioFrame,
    Cleared,
    Event,
    EventKind,
    Message,
    OpusFrame,
    Quality,
    SampleRate,
    SentAudio,
    TurnLatency,
)

TapItem = AudioFrame | OpusFrame | SentAudio | Cleared | Event | Message | Quality | TurnLatency


async def tap(
    target: str, session_id: str, *, token: str | None = None, sample_rate: SampleRate = 16000,
    downlink: bool = False,
) -> AsyncIterator[TapItem]:
    """Yields the session's caller audio, events, data messages, network quality (every 5 s
    while connected) and each turn's `TurnLatency` (once per turn the caller's browser
    reported) until it ends (the last item is the `EventKind.ENDED` Event, with the
    call's `QualitySummary` in `quality`). Events that happened before the tap (CONNECTED,
    DATA_CHANNEL_OPEN) come first, each with its own `at_unix_micros`.

    The audio is the owner's: PCM `AudioFrame`s at the owner's rate (each frame says it; 48 kHz
    before a backend owns the call), or `OpusFrame`s when the owner takes Opus passthrough.
    `sample_rate` is checked but not used by the transceiver (kept for callers written before
    this was said).

    With `downlink=True` the tap also hears what the transceiver sent to the caller: a
    `SentAudio` per 20 ms frame actually sent (after clears: what the caller's player got, not
    what the backend queued) and the owner's `Cleared` answers. Both legs are stamped on the
    transceiver's clock (`AudioFrame.arrival_unix_micros`, `SentAudio.sent_unix_micros`), so
    they line up. Raises `UnknownSessionError`, `AuthError`, `TransceiverGoneError`;
    `ValueError` for a rate no owner could have."""
    rate = _wire.sample_rate(sample_rate)
    async with grpc.aio.insecure_channel(_wire.normalize_target(target)) as channel:
        stream = pb_grpc.BridgeStub(channel).Tap(
            pb.TapRequest(session_id=session_id, sample_rate_hz=rate, downlink=downlink),
            metadata=_wire.bearer(token))
        try:
            async for up in stream:
                kind = up.WhichOneof("kind")
                if kind == "audio":
                    yield _wire.audio_frame(up.audio)
                elif kind == "sent":
                    yield _wire.sent_audio(up.sent)
                elif kind == "opus":
                    yield _wire.opus_frame(up.opus)
                elif kind == "cleared":
                    yield _wire.cleared(up.cleared)
                elif kind == "data":
                    yield _wire.message(up.data)
                elif kind == "quality":
                    yield _wire.quality(up.quality)
                elif kind == "turn":
                    yield _wire.turn_latency(up.turn)
                elif kind == "event":
                    event = Event(kind=_wire.event_kind(up.event.kind), reason=up.event.reason,
                                  session_id=up.event.session_id or session_id,
                                  quality=_wire.quality_summary(up.event),
                                  at_unix_micros=up.event.at_unix_micros)
                    yield event
                    if event.kind is EventKind.ENDED:
                        return
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"tap of session {session_id}") from None
        finally:
            stream.cancel()
