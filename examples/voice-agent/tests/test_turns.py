"""Turn taking without sockets or models: probabilities in, events out."""

from voice_agent.turns import WINDOW_MS, TurnConfig, TurnDetector


def feed(detector: TurnDetector, probs: list[float]) -> list[tuple[int, str]]:
    return [(i, e) for i, p in enumerate(probs) if (e := detector.push(p))]


def test_speech_then_silence_is_one_turn():
    d = TurnDetector(TurnConfig(onset_windows=2, end_silence_ms=160, min_speech_ms=64))
    silent_windows = 160 // WINDOW_MS
    events = feed(d, [0.0] * 3 + [0.9] * 10 + [0.1] * silent_windows)
    assert events == [(4, "start"), (12 + silent_windows, "end")]


def test_one_loud_window_is_not_speech():
    d = TurnDetector()
    assert feed(d, [0.9, 0.1, 0.9, 0.1, 0.9, 0.0]) == []


def test_a_soft_syllable_between_thresholds_does_not_end_the_turn():
    d = TurnDetector(TurnConfig(end_silence_ms=96))
    events = feed(d, [0.9] * 8 + [0.4] * 20)  # 0.4 is under start, over end threshold
    assert events == [(1, "start")]


def test_a_too_short_utterance_is_discarded():
    d = TurnDetector(TurnConfig(onset_windows=2, min_speech_ms=320, end_silence_ms=64))
    assert [e for _, e in feed(d, [0.9] * 3 + [0.0] * 2)] == ["start", "discard"]
