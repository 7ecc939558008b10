"""What the server tests share (import as ``from server_support import ...``): keys, and running a server."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

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
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(gateway), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gateway server did not start")
            time.sleep(0.01)
        yield RunningServer(f"http://127.0.0.1:{sock.getsockname()[1]}", gateway)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
