"""The real `transceiver` binary (target/debug, built by cargo) on free loopback ports."""

from __future__ import annotations

import os
import socket
import subprocess
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


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info"), "NO_COLOR": "1",
                   **self.env}
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
