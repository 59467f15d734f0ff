"""Test harness shared by the Python test suites (sdk/python/tests, examples/voice-agent/tests):
the real transceiver binary on free loopback ports (`transceiver.py`) and a real WebRTC caller
built on aiortc (`caller.py`). Each suite's conftest.py puts this folder's parent on sys.path."""
