"""Fixtures of the console tests: real gateways (create_app under uvicorn on 127.0.0.1) over private copies of
``tests/console/tools``, and Debian's Chromium driven by Playwright.

Three gateways: ``console`` has auth on (an admin key and a reader key) and watches its definitions, as a
deployment does; ``open_console`` has auth off (admin from loopback, no key); ``readonly_console`` serves a
definitions directory laid out as Kubernetes mounts a ConfigMap (files are links into ``..data``), which the
editor must refuse to write. Tests run as root, so a directory without write permission would not stop them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from console_support import ADMIN_KEY, READER_KEY
from playwright.async_api import Browser, BrowserContext, Page
from support import chromium, serving

from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import ApiKey, Settings, hash_key

TOOLS = Path(__file__).resolve().parent / "tools"


@dataclass
class Console:
    url: str
    gateway: Gateway
    definitions: Path

    def client(self, key: str | None = ADMIN_KEY) -> httpx.AsyncClient:
        """A second client of the same gateway (as an app that calls tools would be)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10)

    def reset(self) -> None:
        """Put the definitions files back as the fixture ships them (tests that edit call this when done)."""
        for name in ("greetings.yaml", "orders.yaml"):
            original = (TOOLS / name).read_text(encoding="utf-8")
            if (self.definitions / name).read_text(encoding="utf-8") != original:
                (self.definitions / name).write_text(original, encoding="utf-8")
        for folder in (".", "python"):
            for extra in set(os.listdir(self.definitions / folder)) - set(os.listdir(TOOLS / folder)):
                path = self.definitions / folder / extra
                if path.is_file():
                    path.unlink()


def _copy(root: Path) -> Path:
    shutil.copytree(TOOLS, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _configmap(root: Path) -> Path:
    """The layout kubelet gives a ConfigMap volume: the files live in a timestamped hidden directory, ``..data``
    links to it, and each visible name links through ``..data``."""
    data = root / "..2026_11_30_12_00_00.000000001"
    _copy(data)
    (root / "..data").symlink_to(data.name)
    for name in os.listdir(data):
        (root / name).symlink_to(f"..data/{name}")
    return root


@pytest.fixture(scope="session")
def servers_stack() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


def _serve(stack: ExitStack, definitions: Path, **settings: object) -> Console:
    gateway = Gateway(Settings(definitions=definitions, **settings))
    server = stack.enter_context(serving(create_app(gateway), lifespan="on"))
    return Console(server.url, gateway, definitions)


@pytest.fixture(scope="session")
def console(servers_stack: ExitStack, tmp_path_factory: pytest.TempPathFactory) -> Console:
    """Auth on, definitions watched (a file changed on disk is reloaded by itself)."""
    keys = (ApiKey("admin", hash_key(ADMIN_KEY), admin=True), ApiKey("reader", hash_key(READER_KEY)))
    return _serve(servers_stack, _copy(tmp_path_factory.mktemp("console") / "defs"), reload=True, api_keys=keys)


@pytest.fixture(scope="session")
def open_console(servers_stack: ExitStack, tmp_path_factory: pytest.TempPathFactory) -> Console:
    """Auth off: the console is open to loopback callers without a key."""
    return _serve(servers_stack, _copy(tmp_path_factory.mktemp("open") / "defs"), reload=False)


@pytest.fixture(scope="session")
def readonly_console(servers_stack: ExitStack, tmp_path_factory: pytest.TempPathFactory) -> Console:
    """Auth off, definitions mounted as a ConfigMap."""
    return _serve(servers_stack, _configmap(tmp_path_factory.mktemp("readonly") / "defs"), reload=False)


@pytest.fixture
def edited(console: Console) -> Iterator[Console]:
    """The auth-on console, its definitions put back as shipped after the test."""
    yield console
    console.reset()
    httpx.post(f"{console.url}/admin/reload", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as browser:
        yield browser


@pytest_asyncio.fixture(loop_scope="session")
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    """A fresh browser profile at 1280×800 (its own sessionStorage), closed after the test."""
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(15_000)
    yield context
    await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def page(context: BrowserContext) -> AsyncIterator[Page]:
    """A page of that profile; an uncaught script error in the console fails the test."""
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    assert not errors, f"script errors in the console: {errors}"
