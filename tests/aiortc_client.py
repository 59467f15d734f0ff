#!/usr/bin/env python3
"""aiortc as an unmodified WebRTC client of the voxgate transceiver.

POSTs an SDP offer (audio: a 440 Hz sine, 48 kHz mono, 20 ms frames; data channel "oai-events")
to SIGNAL_URL/v1/sessions, applies the answer, waits for connectionState "connected", sends audio
for --seconds, GETs the session JSON, checks counters.audio_packets_in > 0 and DELETEs it (204).

Prints ONE JSON line on stdout: {ok, framesSent, packetsSent, server, deleteStatus, connectMs,
error?}. Exit 0 on success, 1 otherwise (the reason on stderr).

Run with the project venv: .venv/bin/python tests/aiortc_client.py --url http://127.0.0.1:8080
"""

from __future__ import annotations

import argparse
import asyncio
import fractions
import ipaddress
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HARD_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 15.0
ICE_GATHER_TIMEOUT_S = 5.0
HTTP_TIMEOUT_S = 10.0

SAMPLE_RATE = 48_000
FRAME_SAMPLES = SAMPLE_RATE // 50  # 20 ms
TONE_HZ = 440.0


def _loopback_only(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _patch_host_addresses_for_loopback() -> None:
    """aioice never gathers 127.0.0.1 as a host candidate. Against a server on loopback (and on a
    machine whose only interface may be lo) gather exactly 127.0.0.1, so the ICE checks go
    127.0.0.1 -> 127.0.0.1 deterministically."""
    import aioice.ice

    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"] if use_ipv4 else []


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="signaling base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--token", default=None, help="bearer token")
    p.add_argument("--seconds", type=float, default=3.0, help="how long to send audio once connected")
    p.add_argument("--expect-status", type=int, default=None,
                   help="only POST the offer and check the HTTP status (e.g. 401)")
    p.add_argument("--no-loopback-patch", action="store_true",
                   help="do not restrict ICE host candidates to 127.0.0.1 for a loopback URL")
    return p


# --------------------------------------------------------------------------------------------
# HTTP (urllib, run in a thread so the event loop keeps running)


class HttpResult:
    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _http_blocking(method: str, url: str, body: bytes | None, headers: dict[str, str]) -> HttpResult:
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            return HttpResult(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as e:  # non-2xx: still a response
        return HttpResult(e.code, {k.lower(): v for k, v in (e.headers or {}).items()}, e.read() or b"")


async def http(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> HttpResult:
    try:
        return await asyncio.to_thread(_http_blocking, method, url, body, headers or {})
    except urllib.error.URLError as e:
        raise RuntimeError(f"{method} {url} failed: {e.reason}") from None
    except OSError as e:
        raise RuntimeError(f"{method} {url} failed: {e}") from None


# --------------------------------------------------------------------------------------------
# Audio source


def make_sine_track():
    import av
    import numpy as np
    from aiortc.mediastreams import AudioStreamTrack

    class SineTrack(AudioStreamTrack):
        """440 Hz sine, 48 kHz mono s16, 20 ms frames, paced in real time."""

        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self._pts = 0
            self._start: float | None = None
            self.frames_sent = 0
            self._phase_step = 2.0 * np.pi * TONE_HZ / SAMPLE_RATE

        async def recv(self):
            if self.readyState != "live":
                from aiortc.mediastreams import MediaStreamError

                raise MediaStreamError
            if self._start is None:
                self._start = time.monotonic()
            else:
                self._pts += FRAME_SAMPLES
                wait = self._start + self._pts / SAMPLE_RATE - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            n = np.arange(self._pts, self._pts + FRAME_SAMPLES, dtype=np.float64)
            samples = (0.3 * 32767.0 * np.sin(self._phase_step * n)).astype(np.int16)
            frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = SAMPLE_RATE
            frame.pts = self._pts
            frame.time_base = fractions.Fraction(1, SAMPLE_RATE)
            self.frames_sent += 1
            return frame

    return SineTrack()


# --------------------------------------------------------------------------------------------


async def wait_ice_gathering(pc) -> None:
    if pc.iceGatheringState == "complete":
        return
    done = asyncio.Event()

    @pc.on("icegatheringstatechange")
    def _on_gathering() -> None:
        if pc.iceGatheringState == "complete":
            done.set()

    try:
        await asyncio.wait_for(done.wait(), ICE_GATHER_TIMEOUT_S)
    except asyncio.TimeoutError:
        pass  # use what was gathered


async def run_session(args: argparse.Namespace, result: dict) -> None:
    from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

    base = args.url.rstrip("/")
    auth = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    host = urllib.parse.urlsplit(base).hostname or ""
    if _loopback_only(host) and not args.no_loopback_patch:
        _patch_host_addresses_for_loopback()

    result["stage"] = "offer"
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    track = make_sine_track()
    log: list[str] = []
    result["log"] = log
    connected = asyncio.Event()
    failed = asyncio.Event()
    dc_open = asyncio.Event()

    @pc.on("connectionstatechange")
    def _on_state() -> None:
        log.append(f"connectionState={pc.connectionState}")
        if pc.connectionState == "connected":
            connected.set()
        elif pc.connectionState in ("failed", "closed"):
            failed.set()

    try:
        sender = pc.addTrack(track)
        dc = pc.createDataChannel("oai-events")

        @dc.on("open")
        def _on_open() -> None:
            dc_open.set()

        await pc.setLocalDescription(await pc.createOffer())
        result["stage"] = "ice-gathering"
        await wait_ice_gathering(pc)  # aiortc gathers inside setLocalDescription; kept for safety
        offer_sdp = pc.localDescription.sdp

        result["stage"] = "post"
        post_url = base + "/v1/sessions"
        t0 = time.monotonic()
        resp = await http("POST", post_url, offer_sdp.encode(), {"Content-Type": "application/sdp", **auth})
        result["postStatus"] = resp.status
        location = resp.header("Location")

        if args.expect_status is not None:
            if resp.status == 201 and location:  # an unexpected session: end it
                try:
                    d = await http("DELETE", urllib.parse.urljoin(base + "/", location), None, auth)
                    result["deleteStatus"] = d.status
                except RuntimeError:
                    pass
            if resp.status != args.expect_status:
                raise RuntimeError(f"POST {post_url}: expected status {args.expect_status}, got {resp.status}: {resp.text()[:300]}")
            result["ok"] = True
            result["stage"] = "done"
            return

        if resp.status != 201:
            raise RuntimeError(f"POST {post_url}: expected 201, got {resp.status}: {resp.text()[:300]}")
        if not location:
            raise RuntimeError(f"POST {post_url}: 201 without a Location header")
        result["location"] = location
        session_url = urllib.parse.urljoin(base + "/", location)

        result["stage"] = "set-remote-description"
        await pc.setRemoteDescription(RTCSessionDescription(sdp=resp.text(), type="answer"))

        result["stage"] = "connecting"
        if pc.connectionState != "connected":
            waiters = [asyncio.ensure_future(connected.wait()), asyncio.ensure_future(failed.wait())]
            done, pending = await asyncio.wait(waiters, timeout=CONNECT_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
            for w in pending:
                w.cancel()
            if not connected.is_set():
                raise RuntimeError(
                    f"not connected after {CONNECT_TIMEOUT_S:.0f} s (connectionState={pc.connectionState}, "
                    f"iceConnectionState={pc.iceConnectionState})"
                    if not failed.is_set()
                    else f"connectionState={pc.connectionState} (iceConnectionState={pc.iceConnectionState})"
                )
        result["connectMs"] = round((time.monotonic() - t0) * 1000)

        result["stage"] = "hold"
        await asyncio.sleep(args.seconds)
        result["dataChannelOpen"] = dc_open.is_set()
        if dc_open.is_set():
            try:
                dc.send(json.dumps({"type": "voxgate.test.hello", "client": "aiortc"}))
            except Exception as e:  # noqa: BLE001 - informational only
                log.append(f"data channel send failed: {e}")

        result["stage"] = "stats"
        result["framesSent"] = track.frames_sent
        packets_sent = 0
        stats = await sender.getStats()
        for s in stats.values():
            if getattr(s, "type", None) == "outbound-rtp" and getattr(s, "kind", "audio") == "audio":
                packets_sent += getattr(s, "packetsSent", 0) or 0
        result["packetsSent"] = packets_sent

        result["stage"] = "get-session"
        g = await http("GET", session_url, None, auth)
        if g.status != 200:
            raise RuntimeError(f"GET {session_url}: expected 200, got {g.status}: {g.text()[:300]}")
        try:
            result["server"] = json.loads(g.body)
        except json.JSONDecodeError:
            raise RuntimeError(f"GET {session_url}: body is not JSON: {g.text()[:300]}") from None

        result["stage"] = "delete"
        d = await http("DELETE", session_url, None, auth)
        result["deleteStatus"] = d.status

        result["stage"] = "checks"
        problems = []
        if not packets_sent > 0:
            problems.append(f"packetsSent={packets_sent}")
        counters = result["server"].get("counters") if isinstance(result["server"], dict) else None
        audio_in = counters.get("audio_packets_in") if isinstance(counters, dict) else None
        if not (isinstance(audio_in, (int, float)) and audio_in > 0):
            problems.append(f"server counters.audio_packets_in={audio_in}")
        if d.status != 204:
            problems.append(f"DELETE status {d.status} (expected 204)")
        if problems:
            raise RuntimeError("; ".join(problems))
        result["ok"] = True
        result["stage"] = "done"
    finally:
        try:
            await asyncio.wait_for(pc.close(), 5.0)
        except Exception:  # noqa: BLE001
            pass


async def amain(args: argparse.Namespace) -> int:
    result: dict = {"ok": False}
    try:
        await asyncio.wait_for(run_session(args, result), HARD_TIMEOUT_S)
    except asyncio.TimeoutError:
        result["error"] = f"[{result.get('stage')}] hard timeout after {HARD_TIMEOUT_S:.0f} s"
    except Exception as e:  # noqa: BLE001
        result["error"] = f"[{result.get('stage')}] {e}"
    if not result.get("ok"):
        result["ok"] = False
        result.setdefault("error", f"[{result.get('stage')}] failed")
        print(f"aiortc_client: FAIL: {result['error']}", file=sys.stderr)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


def main() -> int:
    args = build_parser().parse_args()
    if args.seconds < 0:
        print("aiortc_client: FAIL: --seconds must be >= 0", file=sys.stderr)
        return 1
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
