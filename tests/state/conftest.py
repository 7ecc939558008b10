"""A real ``redis-server`` on a free port for the shared-state tests, started and stopped by the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
