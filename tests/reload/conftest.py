"""Fixtures for the hot-reload tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from reload_support import PROBE, tool_yaml, write
from support import start_server

from gateway.runtime.gateway import Gateway
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
        server = start_server(create_app(gateway), lifespan="on")
        stops.append(server.stop)
        return Served(server.url, gateway)

    yield start
    for stop in reversed(stops):
        stop()
