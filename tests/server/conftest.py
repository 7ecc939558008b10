"""Real gateway servers on free 127.0.0.1 ports, each in a thread with its own event loop."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from server_support import API_KEYS

from gateway.runtime import Gateway
from gateway.server import create_app
from gateway.settings import Settings


@dataclass
class RunningServer:
    url: str
    gateway: Gateway
    loop: asyncio.AbstractEventLoop

    def run(self, coroutine: Any) -> Any:
        """Run a coroutine on the server's loop (where the gateway lives) and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def arun(self, coroutine: Any) -> Any:
        """``run`` for async tests: await the result without blocking the test's own loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))


@pytest.fixture
def start_server() -> Iterator[Callable[..., RunningServer]]:
    """Start ``create_app`` under uvicorn for a definitions directory (settings overridable); stopped at teardown."""
    stops: list[Callable[[], None]] = []

    def start(definitions: Path, **overrides: Any) -> RunningServer:
        gateway = Gateway(Settings(definitions=definitions, reload=False, **overrides))
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(create_app(gateway), log_level="warning", lifespan="on"))
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(sockets=[sock]),), daemon=True)
        thread.start()

        def stop() -> None:
            server.should_exit = True
            thread.join(timeout=15)
            loop.close()
            sock.close()

        stops.append(stop)
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gateway server did not start")
            time.sleep(0.01)
        return RunningServer(f"http://127.0.0.1:{sock.getsockname()[1]}", gateway, loop)

    yield start
    for stop in reversed(stops):
        stop()


@pytest.fixture
def server(start_server: Callable[..., RunningServer], examples_dir: Path) -> RunningServer:
    """The shipped example tools, served without auth."""
    return start_server(examples_dir)


@pytest.fixture
def auth_server(start_server: Callable[..., RunningServer], examples_dir: Path) -> RunningServer:
    """The shipped example tools behind API keys: a math-only reader and an admin."""
    return start_server(examples_dir, api_keys=API_KEYS)
