"""Fixtures for the hot-reload tests."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from reload_support import PROBE, tool_yaml, wait_until, write

from gateway.runtime import Gateway
from gateway.server.app import create_app
from gateway.settings import Settings


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    """A definitions directory with the probe module and one file declaring the tool ``echo``."""
    root = tmp_path / "defs"
    write(root / "python" / "reload_probe.py", PROBE.format(version="v1"))
    write(root / "main.yaml", tool_yaml("echo"))
    return root


@dataclass
class Served:
    """A real gateway server: its base URL and, for assertions, the gateway object it serves."""

    url: str
    gateway: Gateway


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """Start ``create_app`` under uvicorn on a free port, reload on (settings overridable); stopped at teardown."""
    stops: list[Callable[[], None]] = []

    def start(definitions: Path, **overrides: Any) -> Served:
        gateway = Gateway(Settings(definitions=definitions, **overrides))
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(create_app(gateway), log_level="warning", lifespan="on"))
        thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),), daemon=True)
        thread.start()

        def stop() -> None:
            server.should_exit = True
            thread.join(timeout=15)
            sock.close()

        stops.append(stop)
        wait_until(lambda: server.started or not thread.is_alive(), "the server to start")
        assert server.started, "the gateway server did not start"
        return Served(f"http://127.0.0.1:{sock.getsockname()[1]}", gateway)

    yield start
    for stop in reversed(stops):
        stop()
