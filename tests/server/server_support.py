"""What the server tests share (import as ``from server_support import ...``): keys, and running a server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import serving

from gateway.runtime import Gateway
from gateway.server import create_app
from gateway.settings import ApiKey, Settings, hash_key

READER_KEY = "reader-key-for-tests"  # may use the "math" toolset only
ADMIN_KEY = "admin-key-for-tests"
API_KEYS = (
    ApiKey("reader", hash_key(READER_KEY), toolsets=("math",)),
    ApiKey("admin", hash_key(ADMIN_KEY), admin=True),
)


@dataclass
class RunningServer:
    url: str
    gateway: Gateway


@contextmanager
def running(definitions: Path, **overrides: Any) -> Iterator[RunningServer]:
    """``create_app`` for a definitions directory (settings overridable, no file watching), served until exit."""
    gateway = Gateway(Settings(definitions=definitions, reload=False, **overrides))
    with serving(create_app(gateway), lifespan="on") as server:
        yield RunningServer(server.url, gateway)
