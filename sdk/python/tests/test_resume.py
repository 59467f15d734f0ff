"""A call that survives its transceiver (docs/continuity.md): two real transceivers sharing a
resume key, one Worker subscribed to both, a real WebRTC caller (aiortc). The first transceiver
is killed mid-call; the caller resumes on the second with its resume credential, and the
backend carries on with the same `Call` object."""

from __future__ import annotations

import asyncio
import secrets
import time
import urllib.error
import urllib.request

from voxgate_harness.audio import tone
from voxgate_harness.caller import Caller, SignalingError
from voxgate_harness.transceiver import Transceiver

import voxgate
from voxgate.types import CallState

RATE = 16_000
TIMEOUT = 20.0


def post_status(url: str, credential: str) -> int:
    req = urllib.request.Request(url + "/v1/sessions", data=b"v=0\r\n", method="POST", headers={
        "Content-Type": "application/sdp", "Authorization": f"Bearer {credential}"})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_a_call_resumes_on_another_transceiver_as_the_same_call(tmp_path, token):
    key = tmp_path / "resume.key"
    key.write_text(secrets.token_hex(32))
    args = ("--grpc-token", token, "--resume-key-file", str(key))
    t1 = Transceiver(*args, log_dir=tmp_path / "t1").start()
    t2 = Transceiver(*args, log_dir=tmp_path / "t2").start()
    caller = Caller(t1.signal_url)
    try:
        async with voxgate.Worker([t1.grpc_target, t2.grpc_target], token=token, capacity=4,
                                  sample_rate=RATE, worker_id="agent") as worker:
            await worker.wait_registered(TIMEOUT)
            await caller.connect()
            calls = worker.calls()
            call = await asyncio.wait_for(anext(calls), TIMEOUT)
            await call.accept()
            first_session, call_id = call.session_id, call.call_id
            assert call_id == first_session and call.generation == 1
            resumed: list[voxgate.Resumed] = []
            call.on_resumed(resumed.append)
            got: list[voxgate.AudioFrame] = []

            async def listen() -> None:
                async for f in call.audio():
                    got.append(f)

            listening = asyncio.create_task(listen())
            await until(lambda: len(got) >= 25, TIMEOUT, "no caller audio before the kill")
            await call.play(tone(500, 3.0, RATE), item_id="reply-1")
            await asyncio.sleep(0.3)
            old_credential = caller.resume_credential

            t1.kill()
            await until(lambda: call.state is CallState.RESUMING, 10,
                        f"the call did not wait for a resume: {call.state}")
            # Audio the backend plays while the call has no session is dropped and reported.
            await call.play(tone(500, 0.5, RATE), item_id="reply-2")
            before = len(got)
            await caller.resume(t2.signal_url)
            await until(lambda: bool(resumed), TIMEOUT, "on_resumed never fired")

            # The same Call object carries on, on the new session.
            r = resumed[0]
            assert call.state is CallState.ATTACHED
            assert (call.call_id, call.generation) == (call_id, 2)
            assert call.session_id == caller.session_id != first_session
            assert call.target == t2.grpc_target
            assert (r.previous_session_id, r.session_id, r.generation) == (
                first_session, caller.session_id, 2)
            await until(lambda: len(got) >= before + 25, TIMEOUT, "audio() stopped after resume")
            assert r.caller_audio_lost_ms is not None and r.caller_audio_lost_ms >= 0, r
            assert r.unplayed_ms >= 500 and "reply-2" in r.unplayed_items, r
            heard_from = time.time()
            await call.play(tone(700, 1.0, RATE), item_id="after")
            await caller.wait_heard(after=heard_from, timeout=10)
            # It was never offered as a new call.
            assert worker.active == 1
            # The used credential resumes nothing more; a forged one is not even looked at.
            assert post_status(t2.signal_url, old_credential) == 409
            assert post_status(t2.signal_url, "vr1.Zm9yZ2Vk.AAAA") == 401
            assert call.state is CallState.ATTACHED
            print(f"resume: caller audio lost {r.caller_audio_lost_ms} ms, unplayed "
                  f"{r.unplayed_ms} ms of {r.unplayed_items}")
            listening.cancel()
            await calls.aclose()
    finally:
        await caller.close()
        t1.stop()
        t2.stop()


async def test_a_resume_that_never_comes_ends_the_call_as_before(tmp_path, token):
    t = Transceiver("--grpc-token", token, log_dir=tmp_path).start()
    caller = Caller(t.signal_url)
    try:
        async with voxgate.Worker(t.grpc_target, token=token, sample_rate=RATE,
                                  resume_window_s=0.5) as worker:
            await worker.wait_registered(TIMEOUT)
            await caller.connect()
            calls = worker.calls()
            call = await asyncio.wait_for(anext(calls), TIMEOUT)
            await call.accept()
            t.kill()
            await until(lambda: call.state is CallState.RESUMING, 10, "not resuming")
            await asyncio.wait_for(call.ended.wait(), 5)
            assert isinstance(call.error, voxgate.TransceiverGoneError)
            assert worker.active == 0
            await calls.aclose()
    finally:
        await caller.close()
        t.stop()


async def test_a_resume_with_no_live_call_is_gone_and_a_caller_can_tell(tmp_path, token):
    t = Transceiver("--grpc-token", token, log_dir=tmp_path).start()
    caller = Caller(t.signal_url)
    try:
        async with voxgate.Worker(t.grpc_target, token=token, sample_rate=RATE) as worker:
            await worker.wait_registered(TIMEOUT)
            await caller.connect()
            calls = worker.calls()
            call = await asyncio.wait_for(anext(calls), TIMEOUT)
            await call.accept()
            await call.hangup()
            # The call is over for the backend: its credential has nothing to resume.
            try:
                await caller.resume(t.signal_url)
                raise AssertionError("resumed a call that had ended")
            except SignalingError as e:
                assert e.status == 410, e
            await calls.aclose()
    finally:
        await caller.close()
        t.stop()
