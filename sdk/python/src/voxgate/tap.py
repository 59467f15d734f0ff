"""Listen-only copy of a session's uplink (`Tap`), e.g. for a recorder or a transcriber that
runs beside the backend that owns the call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from voxgate import _wire
from voxgate._proto import voxgate_pb2 as pb
from voxgate._proto import voxgate_pb2_grpc as pb_grpc
from voxgate.errors import from_rpc_error
from voxgate.types import AudioFrame, Event, EventKind, Message, Quality, SampleRate


async def tap(
    target: str, session_id: str, *, token: str | None = None, sample_rate: SampleRate = 16000,
) -> AsyncIterator[AudioFrame | Event | Message | Quality]:
    """Yields the session's caller audio (PCM at `sample_rate` Hz), events, data messages and
    network quality (every 5 s while connected) until it ends (the last item is the
    `EventKind.ENDED` Event, with the call's `QualitySummary` in `quality`). Raises `UnknownSessionError`,
    `AuthError`, `TransceiverGoneError`; `ValueError` for a rate the transceiver cannot give."""
    rate = _wire.sample_rate(sample_rate)
    async with grpc.aio.insecure_channel(_wire.normalize_target(target)) as channel:
        stream = pb_grpc.BridgeStub(channel).Tap(
            pb.TapRequest(session_id=session_id, sample_rate_hz=rate),
            metadata=_wire.bearer(token))
        try:
            async for up in stream:
                kind = up.WhichOneof("kind")
                if kind == "audio":
                    yield _wire.audio_frame(up.audio)
                elif kind == "data":
                    yield _wire.message(up.data)
                elif kind == "quality":
                    yield _wire.quality(up.quality)
                elif kind == "event":
                    event = Event(kind=_wire.event_kind(up.event.kind), reason=up.event.reason,
                                  session_id=up.event.session_id or session_id,
                                  quality=_wire.quality_summary(up.event))
                    yield event
                    if event.kind is EventKind.ENDED:
                        return
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"tap of session {session_id}") from None
        finally:
            stream.cancel()
