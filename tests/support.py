"""Helpers for tests (import as ``from support import ...``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from gateway.catalog import Catalog, build_catalog
from gateway.definitions import load_definitions
from gateway.settings import Settings

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tool-definitions"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def catalog_for(root: Path, **settings: object) -> Catalog:
    """Load and build a catalog from ``root`` with default settings (overridable)."""
    effective = Settings(definitions=root, **settings)
    return build_catalog(load_definitions(root), effective)


@dataclass
class ServerThread:
    """An ASGI app served by uvicorn in a thread on a free port of 127.0.0.1."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def stop(self, *, force: bool = False) -> None:
        """Stop it; ``force`` does not wait for answers still in flight."""
        self.server.should_exit = True
        self.server.force_exit = force
        self.thread.join(timeout=15)
        self.sock.close()


def free_socket() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1, not yet listening."""
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY on accepted connections only for sockets whose proto
    # says TCP, and without it Nagle and delayed ACKs add ~40 ms to every response of a test server.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def start_server(app: Any, *, lifespan: str = "off") -> ServerThread:
    sock = free_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        thread.join(0.01)
    return ServerThread(f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread, sock)


@contextmanager
def serving(app: Any, *, lifespan: str = "off") -> Iterator[ServerThread]:
    running = start_server(app, lifespan=lifespan)
    try:
        yield running
    finally:
        running.stop()


def free_port() -> int:
    """A port of 127.0.0.1 free now (for a subprocess to bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_process(definitions: Path, *args: str, env: dict[str, str] | None = None,
                  while_running: Callable[[str], None] = lambda url: None) -> str:
    """Run ``tool-gateway serve`` until it answers on 127.0.0.1, call ``while_running(url)``, stop it with SIGINT;
    its log."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", str(definitions), "--port", str(port), "--no-reload", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        while_running(url)
    finally:
        process.send_signal(signal.SIGINT)
        log = process.communicate(timeout=20)[0]
    return log
