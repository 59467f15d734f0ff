"""The real `transceiver` binary (target/debug, built by cargo) on free loopback ports."""

from __future__ import annotations

import errno
import os
import random
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEALTH_TIMEOUT_S = 15.0


def transceiver_bin() -> Path:
    """$VOXGATE_TRANSCEIVER_BIN, or debug/transceiver in cargo's target dir ($CARGO_TARGET_DIR)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = Path(os.environ.get("VOXGATE_TRANSCEIVER_BIN", target / "debug" / "transceiver"))
    if not path.is_file():
        raise RuntimeError(f"{path} missing: run `cargo build -p voxgate-transceiver --bins` first")
    return path


# Ports for the servers a test starts: picked below the kernel's ephemeral range, so no outgoing
# connection can take one between the pick and the server's bind, and claimed across processes
# with an exclusive file in the directory voxgate_testkit::ports (the Rust tests) uses too.
_CLAIM_DIR = Path(tempfile.gettempdir()) / "voxgate-test-ports"
_CLAIM_LIFETIME_S = 15 * 60
_LOWEST = 10_000


def _candidate_range() -> tuple[int, int]:
    try:
        low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32_768, 60_999
    return (_LOWEST, low) if low >= _LOWEST + 5_000 else (max(high + 1, _LOWEST), 65_535)


def _binds(port: int, kind: int) -> bool:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            with socket.socket(family, kind) as s:
                if kind == socket.SOCK_STREAM:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
        except OSError as e:
            if family == socket.AF_INET6 and e.errno == errno.EADDRNOTAVAIL:
                continue  # no IPv6 loopback here: nothing can collide on it
            return False
    return True


def _claim(port: int) -> bool:
    _CLAIM_DIR.mkdir(exist_ok=True)
    path = _CLAIM_DIR / str(port)
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            try:
                if time.time() - path.stat().st_mtime <= _CLAIM_LIFETIME_S:
                    return False
                path.unlink()
            except FileNotFoundError:
                pass
    return False


def _free_port(*kinds: int) -> int:
    low, high = _candidate_range()
    for _ in range(500):
        port = random.randrange(low, high)
        if all(_binds(port, k) for k in kinds) and _claim(port):
            return port
    raise RuntimeError(f"no free loopback port in {low}..{high}")


def free_tcp_port() -> int:
    return _free_port(socket.SOCK_STREAM)


def _free_udp_port() -> int:
    # The media loop also listens for ICE-TCP on its UDP port.
    return _free_port(socket.SOCK_DGRAM, socket.SOCK_STREAM)


class Transceiver:
    """Starts the transceiver (one media loop) and waits for /healthz; `stop()` ends it."""

    def __init__(self, *extra_args: str, log_dir: Path, env: dict[str, str] | None = None,
                 grpc_port: int | None = None) -> None:
        self.extra_args = list(extra_args)
        self.grpc_port = grpc_port
        self.log_dir = log_dir
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.signal_url = ""
        self.grpc_target = ""
        self.log_path = log_dir / "transceiver.log"

    def start(self) -> Transceiver:
        last = ""
        for _ in range(3):  # a port picked free can be taken before the server binds it
            signal_port, media_port = free_tcp_port(), _free_udp_port()
            grpc_port = self.grpc_port or free_tcp_port()
            self.signal_url = f"http://127.0.0.1:{signal_port}"
            self.grpc_target = f"127.0.0.1:{grpc_port}"
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.log_path, "ab")
            # Tests stop the server with SIGTERM and expect a prompt exit, not a drain.
            env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info"), "NO_COLOR": "1",
                   "VOXGATE_DRAIN_TIMEOUT_SECS": "0", **self.env}
            self.proc = subprocess.Popen(
                [str(transceiver_bin()), "--signal-listen", f"127.0.0.1:{signal_port}",
                 "--media-listen", f"127.0.0.1:{media_port}", "--grpc-listen", self.grpc_target,
                 "--loops", "1", *self.extra_args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()
            deadline = time.monotonic() + HEALTH_TIMEOUT_S
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(self.signal_url + "/healthz", timeout=1) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
                time.sleep(0.05)
            last = self.log_tail()
            self.stop()
        raise RuntimeError(f"transceiver did not become healthy:\n{last}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: the transceiver vanishes as if the machine died."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Transceiver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
