"""An offline voice agent on voxgate: Silero VAD, faster-whisper tiny.en, Piper (joe), a small
fixed "brain". Every model comes from a PyPI package; nothing is downloaded at run time."""
