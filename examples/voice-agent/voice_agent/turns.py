"""Turn taking, Sans-IO: speech probabilities in (one per 32 ms VAD window), events out.

`TurnDetector.push(prob)` returns "start" when the caller starts speaking (ONSET_WINDOWS windows
in a row at or above START_THRESHOLD: short clicks and breaths do not count), and "end" when a
turn is over (END_SILENCE_MS of windows below END_THRESHOLD after at least MIN_SPEECH_MS of
speech). The hysteresis between the two thresholds keeps a soft syllable from ending a turn.
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW_MS = 32  # Silero VAD: 512 samples at 16 kHz


@dataclass
class TurnConfig:
    start_threshold: float = 0.5
    end_threshold: float = 0.35
    onset_windows: int = 2
    end_silence_ms: int = 480
    min_speech_ms: int = 200


class TurnDetector:
    def __init__(self, config: TurnConfig | None = None) -> None:
        self.config = config or TurnConfig()
        self.speaking = False
        self._run = 0  # consecutive speech windows while silent
        self._silence = 0  # consecutive silent windows while speaking
        self._speech_windows = 0

    def push(self, prob: float) -> str | None:
        c = self.config
        if not self.speaking:
            self._run = self._run + 1 if prob >= c.start_threshold else 0
            if self._run >= c.onset_windows:
                self.speaking = True
                self._speech_windows = self._run
                self._silence = 0
                return "start"
            return None
        if prob < c.end_threshold:
            self._silence += 1
        else:
            self._silence = 0
            self._speech_windows += 1
        if self._silence * WINDOW_MS >= c.end_silence_ms:
            self.speaking = False
            self._run = 0
            long_enough = self._speech_windows * WINDOW_MS >= c.min_speech_ms
            return "end" if long_enough else "discard"
        return None
