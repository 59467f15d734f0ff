"""voxgate: write voice-AI backends in Python against a voxgate transceiver.

The transceiver terminates WebRTC at the edge and hands each call to a backend over gRPC
(proto/grpc/voxgate.proto). This package is that backend's side: a `Worker` subscribes to one
or more transceivers and yields `Call`s; a call gives the caller's 20 ms PCM frames and takes
PCM to play, `clear()` for barge-in, data-channel messages, the caller's network quality
(`call.quality`, every 5 s), each turn's mouth-to-ear latency (`call.last_turn`, a
`TurnLatency`: from the caller's end of speech to the reply's first audio at its ear, split into
parts that sum to the total; only for callers whose browser reports turns, as the web client
does) and `hangup()`. `tap()` listens to a call without owning it; a
`TaskSet` keeps the tasks a backend starts per call. Everything is asyncio (grpc.aio); audio is
plain `bytes`.
"""

from voxgate.call import Call
from voxgate.errors import (
    AuthError,
    CallEndedError,
    DataChannelNotOpenError,
    MessageTooLargeError,
    SessionOwnedError,
    TransceiverGoneError,
    UnknownSessionError,
    VoxgateError,
)
from voxgate.tap import tap
from voxgate.task_set import TaskSet
from voxgate.types import (
    AudioFrame,
    AudioMode,
    CallState,
    Cleared,
    DirectionQuality,
    Event,
    EventKind,
    Message,
    OpusApplication,
    OpusFrame,
    Progress,
    Quality,
    QualitySummary,
    Resumed,
    SampleRate,
    SentAudio,
    TurnLatency,
)
from voxgate.worker import OPUS_PASSTHROUGH, PCM, Worker

__all__ = [
    "AudioFrame", "AudioMode", "AuthError", "Call", "CallEndedError", "CallState", "Cleared",
    "DataChannelNotOpenError", "DirectionQuality", "Event", "EventKind", "Message",
    "MessageTooLargeError", "OPUS_PASSTHROUGH", "OpusApplication", "OpusFrame", "PCM", "Progress",
    "Quality", "QualitySummary", "Resumed", "SampleRate", "SentAudio", "SessionOwnedError",
    "TaskSet", "TransceiverGoneError", "TurnLatency", "UnknownSessionError", "VoxgateError",
    "Worker", "tap",
]
