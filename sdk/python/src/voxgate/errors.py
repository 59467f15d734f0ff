"""The SDK's exceptions: each says what went wrong and what to do about it."""

from __future__ import annotations

import grpc


class VoxgateError(Exception):
    """Base of every error the SDK raises."""


class AuthError(VoxgateError):
    """The transceiver refused the bearer token (gRPC UNAUTHENTICATED). Not retried."""


class UnknownSessionError(VoxgateError):
    """The session does not exist (any more) on that transceiver (gRPC NOT_FOUND)."""


class SessionOwnedError(VoxgateError):
    """Another backend already owns the session (gRPC FAILED_PRECONDITION); use a Tap to listen."""


class TransceiverGoneError(VoxgateError):
    """The transceiver stopped answering or closed the stream (gRPC UNAVAILABLE, broken stream)."""


class CallEndedError(VoxgateError):
    """The call is over: nothing can be played or sent any more."""


class MessageTooLargeError(VoxgateError, ValueError):
    """A message over the transceiver's limit on one message (by its serialized size: a data
    message's JSON escaping counts). It was not sent; the call goes on. Split audio into smaller
    chunks (`Call.play` does), shorten data messages."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a {size}-byte message is over the transceiver's {limit}-byte limit "
                         "on one message; it was not sent (the call goes on)")
        self.size = size
        self.limit = limit


class DataChannelNotOpenError(VoxgateError, TimeoutError):
    """`Call.send` waited its timeout and the caller's data channel was still not open (the
    transceiver would have dropped the message, so it was not sent)."""


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def from_status(code: int, details: str, what: str) -> VoxgateError:
    """Maps a status the transceiver reported in a Multiplex channel's `closed` to the SDK's
    exception, as `from_rpc_error` maps a stream's."""
    status = _CODES.get(code, grpc.StatusCode.UNKNOWN)
    if status == grpc.StatusCode.ABORTED:
        return SessionOwnedError(f"{what}: {details}")
    return _from_code(status, details, what)


def from_rpc_error(e: grpc.RpcError, what: str) -> VoxgateError:
    """Maps a gRPC failure of `what` (e.g. "attach to session abc") to the SDK's exception."""
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    return _from_code(code, details, what)


def _from_code(code: grpc.StatusCode | None, details: str, what: str) -> VoxgateError:
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AuthError(f"{what}: the transceiver refused the token ({details}); check "
                         "--grpc-token (or --token, on a transceiver without --grpc-token)")
    if code == grpc.StatusCode.NOT_FOUND:
        return UnknownSessionError(f"{what}: unknown session ({details})")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return SessionOwnedError(f"{what}: {details}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN,
                grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED):
        return TransceiverGoneError(f"{what}: transceiver gone ({code.name}: {details})")
    name = code.name if code is not None else "?"
    return VoxgateError(f"{what}: {name}: {details}")
