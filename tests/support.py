"""Helpers for tests (import as ``from support import ...``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
import uvicorn

from gateway.catalog.build import build_catalog
from gateway.catalog.snapshot import Catalog
from gateway.definitions.load import load_definitions
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

if TYPE_CHECKING:
    from playwright.async_api import Browser

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tool-definitions"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHROMIUM = "/usr/bin/chromium"  # Debian's, driven by Playwright
# Real JavaScript clients and documents (tests/clients/package.json), installed by README's test command with npm ci.
NODE_MODULES = Path(__file__).resolve().parent / "clients" / "node_modules"


class ConsoleToken(httpx.Auth):
    """Admin writes as the console sends them with auth off: with the token ``GET /admin/api/token`` answers
    (``gateway.server.admin.writes``). Any other request goes as it is (a stream stays a stream: only the token's
    answer is read)."""

    @staticmethod
    def _asking(request: httpx.Request) -> httpx.Request | None:
        if request.method == "GET" or not request.url.path.startswith("/admin/") or "x-gateway-token" in request.headers:
            return None
        return httpx.Request("GET", request.url.copy_with(path="/admin/api/token", query=None))

    @staticmethod
    def _use(request: httpx.Request, asked: httpx.Response) -> None:
        if asked.status_code == 200:
            request.headers["X-Gateway-Token"] = asked.json()["token"]

    def sync_auth_flow(self, request: httpx.Request) -> Any:
        asking = self._asking(request)
        if asking is not None:
            asked = yield asking
            asked.read()
            self._use(request, asked)
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> Any:
        asking = self._asking(request)
        if asking is not None:
            asked = yield asking
            await asked.aread()
            self._use(request, asked)
        yield request


CONSOLE = ConsoleToken()


def needs_node_modules(*paths: str) -> Any:
    """Skip a test whose npm packages are not installed, except in CI, where README's command installs them: there
    a missing package fails the test instead of hiding it."""
    missing = [p for p in paths if not (NODE_MODULES / p).exists()]
    return pytest.mark.skipif(bool(missing) and not os.environ.get("CI"),
                              reason=f"npm packages not installed (npm ci --prefix tests/clients): {missing}")
# No background traffic (updates, sync, first-run pages): a browser test talks only to the servers it started.
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync")


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


def accepting(listener: socket.socket, handle: Callable[[socket.socket], None]) -> None:
    """Each connection ``listener`` (listening) accepts handed to ``handle`` in a thread of its own, until the
    listener is closed (a test's TCP proxy)."""
    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def start_server(app: Any, *, lifespan: str = "off", sock: socket.socket | None = None) -> ServerThread:
    """``app`` served on ``sock`` (a ``free_socket()`` whose address the app's settings had to know first), else on
    a fresh one."""
    sock = sock or free_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    # A deadline, not a timing: the federation matrix restarts its 23 upstreams side by side, each with a gateway of
    # its own, and on two loaded cores two of those did not start within 15 s (a CI run).
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        thread.join(0.01)
    return ServerThread(f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread, sock)


@contextmanager
def serving(app: Any, *, lifespan: str = "off", sock: socket.socket | None = None) -> Iterator[ServerThread]:
    running = start_server(app, lifespan=lifespan, sock=sock)
    try:
        yield running
    finally:
        running.stop()


@dataclass
class RunningServer:
    """A gateway served in this process: its base URL and the ``Gateway`` behind it (to read or drive)."""

    url: str
    gateway: Gateway


@contextmanager
def running(definitions: Path, **settings: Any) -> Iterator[RunningServer]:
    """``create_app`` for a definitions directory (settings overridable, no file watching), served by uvicorn on
    a free port of 127.0.0.1 until exit."""
    gateway = Gateway(Settings(definitions=definitions, reload=False, **settings))
    with serving(create_app(gateway), lifespan="on") as server:
        yield RunningServer(server.url, gateway)


def until(condition: Callable[[], Any], what: str, timeout: float = 30, step: float = 0.05) -> Any:
    """``condition()`` once truthy, polled every ``step`` seconds; fails naming ``what`` after ``timeout`` seconds
    (a bound so that a test never hangs, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} ({timeout} s)")
        time.sleep(step)


async def until_async(condition: Callable[[], Any], what: str, timeout: float = 30, step: float = 0.05) -> Any:
    """``until`` for async tests: the event loop runs between polls (anyio, so any backend)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} ({timeout} s)")
        await anyio.sleep(step)


@asynccontextmanager
async def chromium(*extra_args: str) -> AsyncIterator[Browser]:
    """Headless Chromium (``CHROMIUM_ARGS`` and ``extra_args``) until exit."""
    from playwright.async_api import async_playwright  # only the browser tests pay for importing Playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args],
                                                   headless=True)
        try:
            yield browser
        finally:
            await browser.close()


def free_port() -> int:
    """A port of 127.0.0.1 free now (for a subprocess to bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def json_lines(text: str) -> list[Any]:
    """Each line of a JSON-lines log or audit trail, parsed: a line that is not one JSON value fails the test."""
    return [json.loads(line) for line in text.splitlines()]


def serve_process(definitions: Path, *args: str, env: dict[str, str] | None = None,
                  while_running: Callable[[str], None] = lambda url: None) -> str:
    """Run ``tool-gateway serve`` until it answers on 127.0.0.1, call ``while_running(url)``, stop it with SIGINT;
    its log."""
    with tempfile.TemporaryDirectory() as scratch:
        process = GatewayProcess(definitions, "--no-reload", *args, env=env, log=Path(scratch) / "serve.log")
        process.start()
        try:
            while_running(process.url)
        finally:
            log = process.stop()
    return log


class GatewayProcess:
    """``tool-gateway serve`` in a child process on a port of its own, kept across restarts; its output goes to a
    file (a pipe nobody reads would fill and stall a long-running server)."""

    def __init__(self, definitions: Path, *args: str, env: dict[str, str] | None = None, log: Path,
                 port: int | None = None):
        self.definitions = definitions
        self.args = args
        self.env = env or {}
        self.log_path = log
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> None:
        """Start it and wait until ``/healthz`` answers."""
        self.spawn()
        self.wait_ready(timeout_s)

    def spawn(self) -> None:
        """Start the process without waiting (several start side by side, then ``wait_ready`` each)."""
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve", str(self.definitions), "--port", str(self.port), *self.args],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **self.env})

    def wait_ready(self, timeout_s: float = 60) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process.poll() is None, f"the gateway exited at start:\n{self.log()}"
            try:
                httpx.get(f"{self.url}/healthz", timeout=1)
                return
            except httpx.TransportError:
                assert time.monotonic() < deadline, f"the gateway did not start:\n{self.log()}"
                time.sleep(0.1)

    def stop(self) -> str:
        """Stop it as an operator would (SIGINT, then SIGKILL after 20 s); its log."""
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            self.process = None
        return self.log()

    def kill(self) -> None:
        """Kill it at once (SIGKILL): what a crashed replica looks like to the others."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(5)
            self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class RedisServer:
    """A real ``redis-server`` on a free port of 127.0.0.1 (no persistence), restartable on the same port."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self.answers():
            assert self.process.poll() is None, "redis-server exited at start"
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)

    def answers(self) -> bool:
        """Whether it answers PING now (RESP spoken by hand: the tests need no client for this)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


NGINX_TEMPLATE = REPO / "deploy" / "nginx" / "nginx.conf.template"


class Nginx:
    """A real nginx from ``deploy/nginx/nginx.conf.template``: round-robin over ``upstreams`` (ports of
    127.0.0.1), its configuration, logs and temp files under ``directory``."""

    def __init__(self, directory: Path, upstreams: list[int]):
        self.directory = directory
        self.port = free_port()
        servers = "\n        ".join(f"server 127.0.0.1:{port};" for port in upstreams)
        values = {"LISTEN_PORT": str(self.port), "UPSTREAM_SERVERS": servers, "PREFIX": str(directory)}
        lines = NGINX_TEMPLATE.read_text().splitlines(keepends=True)
        text = "".join(line if line.lstrip().startswith("#") else _substitute(line, values) for line in lines)
        self.config = directory / "nginx.conf"
        directory.mkdir(parents=True, exist_ok=True)
        self.config.write_text(text)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.process = subprocess.Popen([binary, "-c", str(self.config), "-p", str(self.directory)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            assert self.process.poll() is None, f"nginx exited at start:\n{self.errors()}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()  # SIGTERM: nginx's fast shutdown
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            self.process = None

    def errors(self) -> str:
        path = self.directory / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _substitute(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    return text
