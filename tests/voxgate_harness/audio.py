"""Test audio: tones as PCM16 mono bytes, and levels."""

from __future__ import annotations

import numpy as np


def tone(hz: float, seconds: float, rate: int, amplitude: float = 0.3) -> bytes:
    n = np.arange(int(seconds * rate))
    return (amplitude * 32767 * np.sin(2 * np.pi * hz * n / rate)).astype(np.int16).tobytes()


def rms(pcm: bytes) -> float:
    x = np.frombuffer(pcm, dtype=np.int16).astype(np.float64)
    return float(np.sqrt(np.mean(x**2))) if len(x) else 0.0


def dominant_hz(pcm: bytes, rate: int) -> float:
    x = np.frombuffer(pcm, dtype=np.int16).astype(np.float64)
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / rate)[int(np.argmax(spectrum))])
