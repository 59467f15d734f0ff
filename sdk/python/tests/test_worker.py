"""The SDK against a real transceiver and real WebRTC callers: dispatch, decline, re-dispatch,
clear, hangup, tap, a wrong token, reconnect, and the transceiver vanishing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import grpc
import pytest
from voxgate_harness.audio import dominant_hz, rms, tone
from voxgate_harness.caller import Caller
from voxgate_harness.transceiver import Transceiver, free_tcp_port

import voxgate
from voxgate._proto import voxgate_pb2 as pb

RATE = 16_000
TIMEOUT = 20.0


async def next_call(worker: voxgate.Worker, timeout: float = TIMEOUT) -> voxgate.Call:
    calls = worker.calls()
    try:
        return await asyncio.wait_for(anext(calls), timeout)
    finally:
        await calls.aclose()


async def frames(call: voxgate.Call, n: int) -> list[voxgate.AudioFrame]:
    got = []
    async for f in call.audio():
        got.append(f)
        if len(got) == n:
            break
    return got


def mint_call_token(key: bytes, meta: dict[str, str]) -> str:
    """A per-call token, minted as docs/operating.md shows."""
    import base64
    import hashlib
    import hmac
    import secrets

    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    claims = {"exp": int(time.time()) + 60, "jti": secrets.token_urlsafe(12), "meta": meta}
    payload = b64(json.dumps(claims).encode())
    mac = hmac.new(key, ("v1." + payload).encode(), hashlib.sha256).digest()
    return f"v1.{payload}.{b64(mac)}"


async def test_signed_and_caller_metadata_arrive_apart(tmp_path, token):
    key = b"0123456789abcdef0123456789abcdef-sdk-test"
    (tmp_path / "call.key").write_bytes(key)
    t = Transceiver("--grpc-token", token, "--token-key-file", str(tmp_path / "call.key"),
                    log_dir=tmp_path).start()
    caller = None
    try:
        async with voxgate.Worker(t.grpc_target, token=token, capacity=2, worker_id="w1",
                                  sample_rate=RATE) as worker:
            await worker.wait_registered(TIMEOUT)
            # The caller claims to be an admin; the token says who it is.
            caller = Caller(t.signal_url, token=mint_call_token(key, {"user": "alice"}),
                            query={"user": "admin", "lang": "en"})
            await caller.connect()
            call = await next_call(worker)
            assert call.signed_metadata == {"user": "alice"}
            assert call.caller_metadata == {"user": "admin", "lang": "en"}
            assert call.metadata == {"user": "alice", "lang": "en"}, "merged, signed wins"
            await call.decline("test over")
    finally:
        if caller is not None:
            await caller.close()
        t.stop()


@pytest.fixture
def answered(transceiver, caller_factory, token):
    """`async with answered(**worker_options) as (caller, call)`: one worker, one caller, the
    call accepted and its media flowing."""

    @contextlib.asynccontextmanager
    async def answer(**options):
        async with voxgate.Worker(transceiver.grpc_target, token=token, sample_rate=RATE,
                                  **options) as worker:
            await worker.wait_registered(TIMEOUT)
            caller = await caller_factory()
            async with await next_call(worker) as call:
                await call.wait_connected(TIMEOUT)
                yield caller, call

    return answer


async def poll(cond, timeout: float = TIMEOUT, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_dispatched_call_carries_audio_messages_and_progress_both_ways(
        transceiver, caller_factory, token):
    async with voxgate.Worker(transceiver.grpc_target, token=token, capacity=2,
                              worker_id="w1", sample_rate=RATE) as worker:
        await worker.wait_registered(TIMEOUT)
        caller = await caller_factory(model="small")
        call = await next_call(worker)
        assert call.metadata.get("model") == "small"
        assert call.attempt == 1
        assert call.session_id == caller.session_id
        async with call:
            await call.wait_connected(TIMEOUT)
            # Uplink: the caller's 440 Hz comes through as contiguous 20 ms frames at 16 kHz.
            caller.say(tone(440, 1.5, 48_000))
            got = []
            async for f in call.audio():
                if rms(f.pcm) > 1000:
                    got.append(f)
                if len(got) == 40:
                    break
            assert all(len(f.pcm) == RATE // 50 * 2 for f in got)
            assert all(f.sample_rate == RATE for f in got)
            seqs = [f.sequence for f in got]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "no gaps"
            assert abs(dominant_hz(b"".join(f.pcm for f in got), RATE) - 440) < 15
            assert all(f.received_unix_micros >= f.arrival_unix_micros > 0 for f in got)

            # Downlink: played audio reaches the caller, and progress counts it.
            await call.play(tone(880, 1.0, RATE), item_id="r1")
            await caller.wait_heard(0, TIMEOUT)
            await poll(lambda: call.progress.item_id == "r1" and call.progress.played_ms >= 500,
                       what="progress of r1")

            # Data channel both ways.
            await asyncio.wait_for(caller.dc_open.wait(), TIMEOUT)
            await asyncio.wait_for(call.data_channel_open.wait(), TIMEOUT)
            caller.dc.send(json.dumps({"type": "hello", "n": 1}))
            msg = await asyncio.wait_for(anext(call.messages()), TIMEOUT)
            assert msg.label == "oai-events" and json.loads(msg.text) == {"type": "hello", "n": 1}
            await call.send(json.dumps({"type": "reply", "text": "hi"}))
            assert (await caller.wait_message(lambda m: m.get("type") == "reply", TIMEOUT)) == {
                "type": "reply", "text": "hi"}

        # Leaving `async with call` dropped the stream: the worker is free again.
        await poll(lambda: worker.active == 0, what="the call to be released")


async def test_a_call_attached_late_still_learns_the_data_channel_is_open(
        transceiver, caller_factory, token):
    async with voxgate.Worker(transceiver.grpc_target, token=token,
                              sample_rate=RATE) as worker:
        await worker.wait_registered(TIMEOUT)
        caller = await caller_factory()
        pending = await next_call(worker)
        await asyncio.wait_for(caller.dc_open.wait(), TIMEOUT)  # open before the attach
        async with pending as call:
            await asyncio.wait_for(call.data_channel_open.wait(), TIMEOUT)
            await call.send("late but heard")
            deadline = time.monotonic() + TIMEOUT
            while "late but heard" not in caller.messages and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert "late but heard" in caller.messages


async def test_a_message_sent_at_once_on_attach_waits_for_the_callers_data_channel(
        transceiver, caller_factory, token):
    # A backend that greets the caller as soon as it has the call: the caller's data channel
    # opens only after ICE, DTLS and SCTP, well after the attach, and the transceiver drops a
    # message for a channel that is not open. `send` waits for the channel instead.
    async with voxgate.Worker(transceiver.grpc_target, token=token,
                              sample_rate=RATE) as worker:
        await worker.wait_registered(TIMEOUT)
        connecting = asyncio.ensure_future(caller_factory())
        try:
            async with await next_call(worker) as call:
                assert not call.data_channel_open.is_set(), "the channel opened before the test"
                await call.send("hello at once")
                caller = await asyncio.wait_for(connecting, TIMEOUT)
                await poll(lambda: "hello at once" in caller.messages, timeout=5.0,
                           what="the message sent before the data channel opened")
        finally:
            await connecting


async def test_declined_call_goes_to_another_worker(transceiver, caller_factory, token):
    async with (voxgate.Worker(transceiver.grpc_target, token=token, worker_id="a",
                               sample_rate=RATE) as a,
                voxgate.Worker(transceiver.grpc_target, token=token, worker_id="b",
                               sample_rate=RATE) as b):
        await a.wait_registered(TIMEOUT)
        await b.wait_registered(TIMEOUT)
        caller = await caller_factory()
        first = asyncio.ensure_future(next_call(a))
        second = asyncio.ensure_future(next_call(b))
        done, _ = await asyncio.wait({first, second}, timeout=TIMEOUT,
                                     return_when=asyncio.FIRST_COMPLETED)
        assert done, "nobody got the call"
        winner = done.pop()
        declined = winner.result()
        other = second if winner is first else first
        assert declined.attempt == 1
        await declined.decline("busy in this test")
        taken = await asyncio.wait_for(other, TIMEOUT)
        assert taken.session_id == caller.session_id == declined.session_id
        assert taken.attempt == 2
        async with taken:
            await taken.wait_connected(TIMEOUT)
            caller.say(tone(440, 1.0, 48_000))
            assert len(await asyncio.wait_for(frames(taken, 10), TIMEOUT)) == 10


async def test_call_is_dispatched_again_when_its_worker_goes_away(
        transceiver, caller_factory, token):
    a = voxgate.Worker(transceiver.grpc_target, token=token, worker_id="a", sample_rate=RATE)
    try:
        await a.wait_registered(TIMEOUT)
        caller = await caller_factory()
        call = await (await next_call(a)).accept()
        assert call.attempt == 1
        await call.wait_connected(TIMEOUT)
        # b registers only now, so the first dispatch could only have gone to a.
        async with voxgate.Worker(transceiver.grpc_target, token=token, worker_id="b",
                                  sample_rate=RATE) as b:
            await b.wait_registered(TIMEOUT)
            await a.close()  # the process "dies": its streams drop
            assert call.ended.is_set() and call.end_reason == "closed"
            again = await next_call(b)
            assert again.session_id == caller.session_id and again.attempt == 2
            async with again:
                await again.wait_connected(TIMEOUT)
                caller.say(tone(440, 1.0, 48_000))
                assert len(await asyncio.wait_for(frames(again, 10), TIMEOUT)) == 10
    finally:
        await a.close()


async def test_clear_drops_queued_audio_and_reports_the_played_time(answered):
    async with answered(progress_interval_ms=100) as (caller, call):
        await call.play(tone(660, 5.0, RATE), item_id="answer-1")
        await poll(lambda: call.progress.played_ms >= 600, what="600 ms played")
        cleared = await call.clear()
        cleared_at = time.time()
        assert cleared.item_id == "answer-1"
        assert 500 <= cleared.item_played_ms < 5000
        assert cleared.dropped_ms > 0
        assert abs(cleared.played_ms + cleared.dropped_ms - 5000) <= 40
        # The caller stops hearing it (a margin for the packets already on their way).
        await asyncio.sleep(1.0)
        assert caller.heard_seconds(after=cleared_at + 0.3) == 0
        assert caller.heard_seconds() >= 0.4
        # Nothing was queued any more: a second clear drops nothing.
        again = await call.clear()
        assert again.dropped_ms == 0


async def test_hangup_ends_the_call_for_the_caller_and_the_backend(answered):
    async with answered() as (caller, call):
        ended = []
        call.on_ended(lambda c: ended.append(c.end_reason))
        reason = await call.hangup("goodbye")
        assert call.ended.is_set() and reason == call.end_reason
        assert ended == [reason]
        # audio() ends (in time) rather than waiting for frames that cannot come.
        await asyncio.wait_for(frames(call, -1), TIMEOUT)
        with pytest.raises(voxgate.CallEndedError, match="has ended"):
            await call.play(b"\0\0" * 320)
        # The caller's session is gone.
        await poll(lambda: caller.pc.connectionState in ("closed", "failed"), what="caller closed")


async def test_caller_leaving_ends_the_call_with_the_reason(answered):
    async with answered() as (caller, call):
        assert await caller.delete() == 204
        await asyncio.wait_for(call.ended.wait(), TIMEOUT)
        assert call.end_reason == "deleted" and call.error is None
        with pytest.raises(voxgate.CallEndedError):
            await call.send("too late")


async def test_a_caller_hanging_up_ends_the_call_and_the_transceiver_logs_no_error(
        answered, transceiver):
    # The caller's browser closes its peer connection (aiortc sends an SCTP ABORT for the data
    # channel and stops its consent checks): a normal hang-up, which is nobody's error.
    async with answered() as (caller, call):
        await caller.pc.close()
        await asyncio.wait_for(call.ended.wait(), 3 * TIMEOUT)
        assert call.error is None, call.error
    log = transceiver.log_path.read_text(errors="replace")
    assert "session ended" in log
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert errors == [], "\n".join(errors)


async def test_tap_listens_without_owning_and_unknown_sessions_are_errors(
        transceiver, answered, token):
    async with answered() as (caller, call):
        caller.say(tone(440, 3.0, 48_000))
        loud = []
        async for item in voxgate.tap(transceiver.grpc_target, caller.session_id,
                                      token=token, sample_rate=RATE):
            if isinstance(item, voxgate.AudioFrame) and rms(item.pcm) > 1000:
                loud.append(item)
                if len(loud) == 10:
                    break
        assert abs(dominant_hz(b"".join(f.pcm for f in loud), RATE) - 440) < 20
        assert not call.ended.is_set(), "the tap did not disturb the owner"
        with pytest.raises(voxgate.UnknownSessionError, match="unknown session"):
            async for _ in voxgate.tap(transceiver.grpc_target, "nosuchsession",
                                       token=token):
                pass


async def test_a_downlink_tap_hears_what_was_sent_after_the_clear_on_the_calls_clock(
        transceiver, answered, token):
    async with answered() as (caller, call):
        items: list = []
        started = asyncio.Event()

        async def listen() -> None:
            async for item in voxgate.tap(transceiver.grpc_target, call.session_id,
                                          token=token, downlink=True):
                items.append(item)
                started.set()

        listening = asyncio.create_task(listen())
        await asyncio.wait_for(started.wait(), TIMEOUT)
        caller.say(tone(440, 3.0, 48_000))
        await call.play(tone(550, 3.0, RATE), item_id="reply")
        await asyncio.sleep(0.6)
        cleared = await call.clear()
        await asyncio.sleep(0.5)  # nothing more is sent
        assert await caller.delete() == 204
        await asyncio.wait_for(listening, TIMEOUT)

    first = items[0]
    assert isinstance(first, voxgate.Event) and first.kind is voxgate.EventKind.CONNECTED, items[:3]
    sent = [i for i in items if isinstance(i, voxgate.SentAudio)]
    heard = [i for i in items if isinstance(i, voxgate.AudioFrame)]
    clears = [i for i in items if isinstance(i, voxgate.Cleared)]
    assert clears == [cleared], "the tap hears the owner's clear answer"
    # Exactly what played before the clear, at the owner's rate, as one item.
    assert len(sent) * 20 == cleared.item_played_ms, (len(sent), cleared)
    assert 400 <= cleared.item_played_ms <= 1200 and cleared.dropped_ms > 1500, cleared
    assert {(f.sample_rate, len(f.pcm), f.item_id) for f in sent} == {(RATE, RATE // 50 * 2, "reply")}
    assert abs(dominant_hz(b"".join(f.pcm for f in sent), RATE) - 550) < 20
    # One RTP tick per frame, on the same wall clock as the caller's frames.
    ticks = {b.rtp_timestamp - a.rtp_timestamp for a, b in zip(sent, sent[1:])}
    assert ticks == {960}, ticks
    spacing = [b.sent_unix_micros - a.sent_unix_micros for a, b in zip(sent, sent[1:])]
    assert 18_000 <= sorted(spacing)[len(spacing) // 2] <= 22_000, spacing
    overlap = [f for f in heard if sent[0].sent_unix_micros <= f.arrival_unix_micros
               <= sent[-1].sent_unix_micros]
    assert len(overlap) >= len(sent) - 5, "the legs overlap in time: one clock"
    assert first.at_unix_micros <= sent[0].sent_unix_micros, (first, sent[0])
    ended = items[-1]
    assert ended.kind is voxgate.EventKind.ENDED and ended.at_unix_micros > sent[-1].sent_unix_micros


async def test_wrong_token_is_an_auth_error_that_names_no_secret(transceiver, token):
    worker = voxgate.Worker(transceiver.grpc_target, token="not-the-token", worker_id="bad")
    try:
        with pytest.raises(voxgate.AuthError, match="refused the token") as e:
            await worker.wait_registered(TIMEOUT)
        assert "not-the-token" not in str(e.value) and token not in str(e.value)
        with pytest.raises(voxgate.AuthError):
            async for _ in worker.calls():
                pass
    finally:
        await worker.close()
    with pytest.raises(voxgate.AuthError):
        async for _ in voxgate.tap(transceiver.grpc_target, "x", token=None):
            pass


async def test_worker_reconnects_with_backoff_and_calls_see_the_transceiver_vanish(tmp_path, token):
    port = free_tcp_port()
    worker = voxgate.Worker(f"http://127.0.0.1:{port}", token=token, sample_rate=RATE)
    try:
        await worker.start()
        await asyncio.sleep(0.6)  # a few refused connections: the worker keeps trying
        with Transceiver("--grpc-token", token, log_dir=tmp_path, grpc_port=port) as t:
            await worker.wait_registered(TIMEOUT)
            from voxgate_harness.caller import Caller

            caller = await Caller(t.signal_url).connect()
            try:
                call = await (await next_call(worker)).accept()
                await call.wait_connected(TIMEOUT)
                t.kill()
                with pytest.raises(voxgate.TransceiverGoneError, match="transceiver"):
                    async for _ in call.audio():
                        pass
                assert call.ended.is_set() and call.end_reason == "error"
                with pytest.raises(voxgate.TransceiverGoneError):
                    await call.play(b"\0\0" * 320)
            finally:
                await caller.close()
    finally:
        await worker.close()


async def test_a_stream_reset_under_a_call_moves_it_and_an_attach_lost_in_the_break_is_declined(
        tmp_path, token, transport):
    # An L7 proxy between the worker and the transceiver resets the stream the call rides (the
    # worker's Multiplex stream, or the call's own Session stream), and tells the worker 2 s
    # after the transceiver. The transceiver offers the caller again at once, on the Work stream,
    # which lives on. On a Multiplex stream that offer's attach goes into the stream the worker
    # does not know is dead yet; when it hears, the attach fails and the worker declines the
    # offer, so the next attempt comes at once and attaches on a new stream. With the attach
    # timeout at 30 s, a caller left to wait it out fails the test. A Session stream per call
    # opens a new stream for the new offer, which the reset does not touch.
    from voxgate_harness.caller import Caller
    from voxgate_harness.reset_proxy import ResetProxy

    suffix = "/Multiplex" if transport == "multiplex" else "/Session"
    with (Transceiver("--grpc-token", token, "--attach-timeout-secs", "30",
                      log_dir=tmp_path) as t,
          ResetProxy(t.grpc_target, suffix, 2000) as proxy):
        async with voxgate.Worker(proxy.target, token=token, sample_rate=RATE,
                                  capacity=2) as worker:
            await worker.wait_registered(TIMEOUT)
            caller = await Caller(t.signal_url).connect()
            try:
                first = await (await next_call(worker)).accept()
                await first.wait_connected(TIMEOUT)
                proxy.reset()
                attempts = []
                while True:
                    call = await next_call(worker, timeout=10.0)
                    assert call.session_id == caller.session_id
                    attempts.append(call.attempt)
                    try:
                        await call.accept()
                        break
                    except voxgate.TransceiverGoneError:
                        continue
                assert attempts == ([2, 3] if transport == "multiplex" else [2]), attempts
                assert proxy.resets() == 1
                await poll(first.ended.is_set, what="the first call to end")
                assert isinstance(first.error, voxgate.TransceiverGoneError), first.error
                async with call:
                    await call.wait_connected(TIMEOUT)
                    caller.say(tone(440, 1.0, 48_000))
                    got = await asyncio.wait_for(frames(call, 10), TIMEOUT)
                    assert len(got) == 10
            finally:
                await caller.close()


async def test_dispatch_says_which_ingress_the_caller_was_steered_to_and_why(tmp_path, token):
    # Two relay ingresses; this test's loopback peer is a trusted proxy whose header names
    # "us" directly. No relay runs: the dispatch happens at signaling, before any media.
    t = Transceiver(
        "--grpc-token", token,
        "--ingress", "eu=127.0.0.1:9", "--ingress", "us=127.0.0.1:10,[::1]:10",
        "--ingress-header", "X-Edge-Ingress", "--ingress-header-mode", "name",
        "--trusted-proxies", "127.0.0.1/32", log_dir=tmp_path).start()
    pc = None
    try:
        from aiortc import RTCPeerConnection
        from voxgate_harness.caller import _http

        async with voxgate.Worker(t.grpc_target, token=token, sample_rate=RATE) as worker:
            await worker.wait_registered(TIMEOUT)
            pc = RTCPeerConnection()
            pc.addTransceiver("audio")
            await pc.setLocalDescription(await pc.createOffer())
            status, headers, body = await asyncio.to_thread(
                _http, "POST", t.signal_url + "/v1/sessions", pc.localDescription.sdp.encode(),
                {"Content-Type": "application/sdp", "X-Edge-Ingress": "us"})
            assert status == 201, body
            assert "127.0.0.1 10 typ host" in body.decode(), body
            call = await next_call(worker)
            assert (call.ingress, call.ingress_reason) == ("us", "header")
            await call.decline("test")
    finally:
        if pc is not None:
            await pc.close()
        t.stop()


async def test_writes_from_many_tasks_at_once_all_arrive_and_the_call_survives(answered):
    # An agent writes from several tasks at once: its TTS task plays audio while another sends
    # events. gRPC's asyncio API allows one write in flight per stream; a second concurrent
    # write used to fail inside gRPC ("Internal error from Core") and end the call.
    async with answered() as (caller, call):
        chunk = tone(440, 0.1, RATE)

        async def player() -> None:
            for _ in range(50):
                await call.play(chunk)

        async def sender(n: int) -> None:
            for i in range(20):
                await call.send(json.dumps({"sender": n, "i": i}))

        await asyncio.wait_for(asyncio.gather(player(), sender(0), sender(1), sender(2)), TIMEOUT)
        await poll(lambda: len(caller.messages) >= 60, what="60 messages")
        assert call.error is None and not call.ended.is_set()
        got = [json.loads(m) for m in caller.messages]
        for n in range(3):
            assert [m["i"] for m in got if m.get("sender") == n] == list(range(20))
        await poll(lambda: caller.heard_seconds() >= 1.0, what="the played audio")


async def test_worker_stream_survives_load_reports_from_many_tasks_at_once(transceiver, token):
    # Load reports leave from dispatch, from every call's end and from declines, each in its own
    # task; like a call's writes they must not overlap on the Work stream.
    async with voxgate.Worker(transceiver.grpc_target, token=token, capacity=4) as worker:
        await worker.wait_registered(TIMEOUT)
        link = worker._links[0]
        stream = link.stream
        await asyncio.wait_for(
            asyncio.gather(*(worker._report_load() for _ in range(200))), TIMEOUT)
        await asyncio.sleep(0.2)
        assert link.stream is stream and not stream.done() and link.registered.is_set()


async def test_a_worker_at_capacity_reports_its_load_before_it_declines(transceiver, token):
    # A worker serving several transceivers can be offered a call by one after another's call
    # took its last place, before the load report about that reached the first. Its decline
    # must follow a load report on the same stream, or the transceiver offers the session
    # straight back and spends its dispatch attempts on a full worker (the echo bot's e2e test
    # `a_dispatch_past_capacity_is_declined_...` shows that bounce between two transceivers).
    async with voxgate.Worker(transceiver.grpc_target, token=token, capacity=1) as worker:
        await worker.wait_registered(TIMEOUT)
        link = worker._links[0]
        sent = []
        write = link.writer.write

        async def recording(msg):
            sent.append(msg)
            await write(msg)

        link.writer.write = recording
        worker._active.add(object())  # the place another transceiver's call took
        await worker._on_dispatch(link, pb.Dispatch(session_id="42", attempt=1))
        worker._active.clear()
        assert [m.WhichOneof("kind") for m in sent] == ["load", "reject"]
        assert sent[0].load.active == 1
        assert sent[1].reject.session_id == "42" and sent[1].reject.reason == "at_capacity"
        await asyncio.sleep(0.2)
        assert not link.stream.done() and link.registered.is_set()


async def test_a_write_that_fails_on_this_side_hands_the_call_back_to_be_dispatched_again(
        transceiver, caller_factory, token):
    # gRPC can fail a write locally and leave the HTTP/2 stream open. The call ends with the
    # error here, and must also end on the wire: otherwise the transceiver keeps a dead owner,
    # and the caller hears nothing until they hang up.
    async with voxgate.Worker(transceiver.grpc_target, token=token, sample_rate=RATE) as worker:
        await worker.wait_registered(TIMEOUT)
        caller = await caller_factory()
        call = await (await next_call(worker)).accept()
        await call.wait_connected(TIMEOUT)

        async def fails(msg) -> None:
            raise grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), "Internal error from Core")

        call._stream.write = fails
        with pytest.raises(voxgate.TransceiverGoneError, match="Internal error from Core"):
            await call.send("lost")
        assert call.ended.is_set() and call.end_reason == "error"
        again = await next_call(worker)
        assert again.session_id == caller.session_id and again.attempt == 2
        async with again:
            await again.wait_connected(TIMEOUT)


async def test_a_worker_chooses_the_encoder_for_its_audio_and_bad_choices_fail_early(
        transceiver, answered):
    with pytest.raises(ValueError, match="opus_complexity must be 0 to 10"):
        voxgate.Worker(transceiver.grpc_target, opus_complexity=11)
    with pytest.raises(ValueError, match="opus_application must be one of"):
        voxgate.Worker(transceiver.grpc_target, opus_application="celt")
    async with answered(opus_application="lowdelay", opus_complexity=0) as (caller, call):
        said = time.time()
        await call.play(tone(660, 1.0, RATE))
        await caller.wait_heard(said, TIMEOUT)
        await poll(lambda: caller.heard_seconds(after=said) >= 0.8, what="the played tone")
        assert abs(dominant_hz(bytes(caller.heard_pcm[-48_000:]), 48_000) - 660) < 20
        attached = [line for line in transceiver.log_path.read_text().splitlines()
                    if "backend attached" in line and call.session_id in line]
        assert len(attached) == 1
        assert "application=Some(Lowdelay)" in attached[0] and "complexity=Some(0)" in attached[0]


async def test_a_long_answer_played_in_one_call_is_sent_in_chunks_the_transceiver_takes(answered):
    # 10 s at 16 kHz is 320 KB, more than the transceiver takes in one gRPC message (256 KiB).
    async with answered() as (caller, call):
        said = time.time()
        await call.play(tone(550, 10.0, RATE), item_id="long")
        await caller.wait_heard(said, TIMEOUT)
        await poll(lambda: caller.heard_seconds(after=said) >= 1.0, what="the long answer")
        assert call.error is None and not call.ended.is_set()
        assert call.progress.item_id == "long"


async def test_the_callers_network_quality_arrives_every_5_s_and_is_summed_up_at_the_end(
        transceiver, answered, token):
    # Media both ways for the whole call: the caller's receiver reports of the downlink give the
    # RTT and the downlink's jitter, the transceiver's own reports the uplink's.
    async with answered() as (caller, call):
        assert call.quality is None
        heard: list[voxgate.Quality] = []
        call.on_quality(heard.append)
        updates = call.qualities()
        tapped: list[voxgate.Quality | voxgate.Event] = []

        async def tap() -> None:
            async for item in voxgate.tap(transceiver.grpc_target, call.session_id, token=token):
                if isinstance(item, (voxgate.Quality, voxgate.Event)):
                    tapped.append(item)

        tapping = asyncio.create_task(tap())
        caller.say(tone(440, 20.0, 48_000))
        await call.play(tone(550, 20.0, RATE), item_id="long")
        first = await asyncio.wait_for(anext(updates), 8.0)  # 5 s into the session
        assert call.quality is first and heard == [first]
        assert 4_000 <= first.at_ms <= 8_000, first
        q = first
        # The RTT needs a client receiver report of a sender report of ours, and str0m sends
        # audio sender reports every 5 s: the first sample may come before it, the next not.
        if q.rtt_ms is None:
            q = await asyncio.wait_for(anext(updates), 8.0)
            assert q.at_ms - first.at_ms >= 4_000, (first, q)
        assert call.quality is q and heard[-1] is q
        assert q.rtt_ms is not None and 0 <= q.rtt_ms < 100, q
        for d in (q.uplink, q.downlink):
            assert d.jitter_ms is not None and 0 <= d.jitter_ms < 50, q
            assert d.mos is not None and 1 <= d.mos <= 4.5, q
            assert d.packets > 100 and d.loss_total is not None and d.loss_total < 0.05, q
        assert q.mos == min(q.uplink.mos, q.downlink.mos)
        await poll(lambda: any(isinstance(i, voxgate.Quality) for i in tapped), 8.0,
                   "a tap's quality")

        assert await caller.delete() == 204  # the caller hangs up
        await asyncio.wait_for(call.ended.wait(), TIMEOUT)
        s = call.quality_summary
        assert s is not None and s.samples >= 1, s
        assert s.rtt_ms_mean is not None and s.rtt_ms_max >= s.rtt_ms_mean, s
        assert s.uplink_jitter_ms_max is not None and s.downlink_jitter_ms_max is not None, s
        assert 1 <= s.mos_min <= s.mos_mean <= 4.5, s
        consumed = 1 if q is first else 2
        assert [u async for u in updates] == heard[consumed:], "the iterator ends with the call"
        await asyncio.wait_for(tapping, TIMEOUT)
        assert tapped[-1].kind is voxgate.EventKind.ENDED and tapped[-1].quality == s
