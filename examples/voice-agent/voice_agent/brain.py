"""The agent's "brain": a few fixed intents, otherwise it repeats what it understood."""

from __future__ import annotations

import re

_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def reply(text: str) -> str:
    words = _words(text)
    if not words:
        return "Sorry, I did not catch that."
    said = set(words)
    if said & {"book", "reserve", "reservation"} and said & {"table"}:
        people = next((_NUMBERS.get(w) or int(w) for w in words
                       if w in _NUMBERS or w.isdigit()), None)
        who = f" for {people}" if people else ""
        return f"Sure, I booked a table{who}. See you tonight."
    if said & {"hello", "hi", "hey"}:
        return "Hello! How can I help you?"
    if "time" in said:
        return "It is always time for a good meal."
    if said & {"bye", "goodbye"}:
        return "Goodbye!"
    return f"You said: {text.strip()}"
