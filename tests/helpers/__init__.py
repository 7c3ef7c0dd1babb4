"""What several test modules share: where recorded data lives, replayed HTTP,
loopback servers, stand-in wheels, uv. Test modules import from here, never from
each other; fixtures live in ``tests/conftest.py``."""
