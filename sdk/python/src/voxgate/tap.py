"""Listen-only copy of a session's uplink (`Tap`), e.g. for a recorder or a transcriber that
runs beside the backend that owns the call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from voxgate._proto import voxgate_pb2 as pb
from voxgate._proto import voxgate_pb2_grpc as pb_grpc
from voxgate.errors import from_rpc_error
from voxgate.types import AudioFrame, Event, Message
from voxgate.worker import normalize_target

_EVENT_NAMES = {
    pb.SessionEvent.ATTACHED: "attached",
    pb.SessionEvent.CONNECTED: "connected",
    pb.SessionEvent.ENDED: "ended",
    pb.SessionEvent.DATA_CHANNEL_OPEN: "data_channel_open",
}


async def tap(
    target: str, session_id: str, *, token: str | None = None, sample_rate: int = 16000,
) -> AsyncIterator[AudioFrame | Event | Message]:
    """Yields the session's caller audio, events and data messages until it ends (the last item
    is the `ended` Event). Raises `UnknownSessionError`, `AuthError`, `TransceiverGoneError`."""
    auth = (("authorization", f"Bearer {token}"),) if token else ()
    async with grpc.aio.insecure_channel(normalize_target(target)) as channel:
        stream = pb_grpc.BridgeStub(channel).Tap(
            pb.TapRequest(session_id=session_id, sample_rate_hz=sample_rate), metadata=auth)
        try:
            async for up in stream:
                kind = up.WhichOneof("kind")
                if kind == "audio":
                    a = up.audio
                    yield AudioFrame(pcm=a.pcm, sequence=a.sequence, concealed=a.concealed,
                                     sample_rate_hz=a.sample_rate_hz,
                                     rtp_timestamp=a.rtp_timestamp,
                                     arrival_unix_micros=a.arrival_unix_micros)
                elif kind == "data":
                    d = up.data
                    which = d.WhichOneof("payload")
                    yield Message(label=d.label, text=d.text if which == "text" else None,
                                  binary=d.binary if which == "binary" else None)
                elif kind == "event":
                    name = _EVENT_NAMES.get(up.event.kind, "unspecified")
                    yield Event(kind=name, reason=up.event.reason,
                                session_id=up.event.session_id or session_id)
                    if name == "ended":
                        return
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"tap of session {session_id}") from None
        finally:
            stream.cancel()
