"""Streaming Silero VAD on the ONNX model that ships inside faster-whisper.

The model takes 512 new samples at 16 kHz plus the 64 before them and carries an LSTM state
(h, c) from window to window; `StreamingVad.push(pcm)` buffers 20 ms frames into windows and
returns one speech probability per completed window.
"""

from __future__ import annotations

import os

import numpy as np

WINDOW = 512
CONTEXT = 64


def silero_model_path() -> str:
    from faster_whisper.utils import get_assets_path

    return os.path.join(get_assets_path(), "silero_vad_v6.onnx")


def load_session():
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    return onnxruntime.InferenceSession(silero_model_path(), providers=["CPUExecutionProvider"],
                                        sess_options=opts)


class StreamingVad:
    """One caller's VAD state (the ONNX session itself is shared and thread-safe)."""

    def __init__(self, session) -> None:
        self._session = session
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def push(self, pcm16: bytes) -> list[float]:
        samples = np.frombuffer(pcm16, dtype=np.int16).astype(np.float32) / 32768.0
        self._pending = np.concatenate([self._pending, samples])
        probs = []
        while len(self._pending) >= WINDOW:
            window, self._pending = self._pending[:WINDOW], self._pending[WINDOW:]
            x = np.concatenate([self._context, window])[None, :]
            out, self._h, self._c = self._session.run(None, {"input": x, "h": self._h,
                                                             "c": self._c})
            self._context = window[-CONTEXT:]
            probs.append(float(np.asarray(out).reshape(-1)[0]))
        return probs
