"""The real `h2-reset-proxy` binary (voxgate-testkit, target/debug, built by cargo): an HTTP/2
proxy in front of a transceiver's gRPC listener that resets chosen streams on demand, as an L7
proxy timing a long stream out does, while the connection and its other streams live on.

`reset()` resets every stream open now whose path ends with the proxy's suffix; the worker's side
of each is reset `worker_side_after_ms` after the transceiver's, which holds open the window in
which the transceiver knows of the break and the worker not.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from voxgate_harness.transceiver import ROOT


def reset_proxy_bin() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = target / "debug" / "h2-reset-proxy"
    if not path.is_file():
        raise RuntimeError(f"{path} missing: run `cargo build --workspace --bins` first")
    return path


class ResetProxy:
    """`with ResetProxy(upstream, "/Multiplex", 500) as p:` point workers at `p.target`."""

    def __init__(self, upstream: str, path_suffix: str, worker_side_after_ms: int) -> None:
        self.proc = subprocess.Popen(
            [str(reset_proxy_bin()), upstream, path_suffix, str(worker_side_after_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        first = self._read()
        if not first.startswith("listening "):
            self.close()
            raise RuntimeError(f"h2-reset-proxy did not start: {first!r}")
        self.target = first.removeprefix("listening ")

    def reset(self) -> None:
        """Resets the matching streams open now (returns once the proxy has been told)."""
        self._ask("reset")

    def resets(self) -> int:
        """Matching streams reset so far."""
        return int(self._ask("count").removeprefix("resets "))

    def _ask(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._read()

    def _read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("h2-reset-proxy exited")
        return line.strip()

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> ResetProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
