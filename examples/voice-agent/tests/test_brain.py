from voice_agent.brain import reply


def test_booking_intent_counts_the_people():
    assert reply("Book a table for two.") == "Sure, I booked a table for 2. See you tonight."


def test_unknown_speech_is_repeated():
    assert reply("The weather is nice") == "You said: The weather is nice"


def test_silence_asks_again():
    assert reply("  ") == "Sorry, I did not catch that."
