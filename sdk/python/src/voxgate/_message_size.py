"""What one message to the transceiver weighs, and the limit it is held to. No I/O.

Every downlink message is weighed by its serialized size (what gRPC frames, whatever the
payload: a data message that JSON escaping grew counts at its real size). The transceiver drops
a call's message over 256 KiB (older transceivers ended the stream that carried it and, on a
`Multiplex` stream, every call on it, and refused a batch over 256 KiB the same way). So a
message that could fit no message on the wire is refused for its own call, before it is queued,
with `MessageTooLargeError`; and a `Multiplex` batch is filled only up to the limit.
"""

from __future__ import annotations

from voxgate._proto import voxgate_pb2 as pb
from voxgate.errors import MessageTooLargeError

# The most bytes one gRPC message to the transceiver may have (a message of exactly this size
# is taken): one call's message, and a whole Multiplex batch.
MAX_MESSAGE_BYTES = 256 * 1024


def _varint_len(n: int) -> int:
    length = 1
    while n >= 0x80:
        n >>= 7
        length += 1
    return length


def channel_entry_len(msg: pb.ChannelDownlink) -> int:
    """Bytes `msg` adds to a `MultiplexDownlink` (its field key, its length and its body): a
    batch's serialized size is the sum of its entries'."""
    body = msg.ByteSize()
    return 1 + _varint_len(body) + body


def check_channel(msg: pb.ChannelDownlink) -> int:
    """`msg`'s entry length, if a batch holding only `msg` is within the limit."""
    return _within(channel_entry_len(msg))


def check_session(msg: pb.Downlink) -> int:
    """`msg`'s serialized size, if it is within the limit as a `Session` stream message."""
    return _within(msg.ByteSize())


def _within(size: int) -> int:
    if size > MAX_MESSAGE_BYTES:
        raise MessageTooLargeError(size, MAX_MESSAGE_BYTES)
    return size
