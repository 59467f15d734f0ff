"""How gRPC failures become the SDK's exceptions."""

from __future__ import annotations

import grpc
import pytest

from voxgate.errors import (
    AuthError,
    SessionOwnedError,
    TransceiverGoneError,
    UnknownSessionError,
    VoxgateError,
    from_rpc_error,
    from_status,
)

CASES = [
    (grpc.StatusCode.UNAUTHENTICATED, AuthError),
    (grpc.StatusCode.NOT_FOUND, UnknownSessionError),
    (grpc.StatusCode.FAILED_PRECONDITION, SessionOwnedError),
    (grpc.StatusCode.UNAVAILABLE, TransceiverGoneError),
    (grpc.StatusCode.CANCELLED, TransceiverGoneError),
    (grpc.StatusCode.UNKNOWN, TransceiverGoneError),
    (grpc.StatusCode.INTERNAL, TransceiverGoneError),
    (grpc.StatusCode.DEADLINE_EXCEEDED, TransceiverGoneError),
]


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


@pytest.mark.parametrize(("code", "kind"), CASES)
def test_a_stream_failure_maps_to_its_exception_and_names_what_failed(code, kind):
    err = from_rpc_error(rpc_error(code, "the details"), "attach to session abc")
    assert type(err) is kind
    assert str(err).startswith("attach to session abc: ") and "the details" in str(err)


@pytest.mark.parametrize(("code", "kind"), CASES)
def test_a_channel_status_maps_as_a_stream_failure_does(code, kind):
    assert type(from_status(code.value[0], "d", "session x")) is kind


def test_a_channel_aborted_means_another_backend_owns_the_session():
    err = from_status(grpc.StatusCode.ABORTED.value[0], "owned by w2", "session x")
    assert isinstance(err, SessionOwnedError) and "owned by w2" in str(err)


def test_other_codes_are_plain_voxgate_errors_naming_the_code():
    err = from_rpc_error(rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "bad rate"), "attach")
    assert type(err) is VoxgateError and "INVALID_ARGUMENT" in str(err)
    unknown = from_status(999, "what", "session x")
    assert isinstance(unknown, TransceiverGoneError)  # an unknown code reads as UNKNOWN


def test_an_auth_error_says_what_to_check():
    err = from_rpc_error(rpc_error(grpc.StatusCode.UNAUTHENTICATED, "bad token"), "worker w1")
    assert "refused the token" in str(err) and "--grpc-token" in str(err)


def test_an_error_without_a_status_is_still_mapped():
    class Bare(grpc.RpcError):
        pass

    err = from_rpc_error(Bare("no code"), "session x")
    assert type(err) is VoxgateError and "session x" in str(err)
