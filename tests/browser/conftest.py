"""Fixtures of the browser tests: the gateway (create_app under uvicorn), the scripted LLM, a second server for
pages on other origins, and Debian's Chromium driven by Playwright — every part real and on 127.0.0.1.

Chromium resolves every ``*.test`` host name to 127.0.0.1, so the page server's pages live on origins that are
not loopback names: ``http://app.test:<port>`` (in the gateway's ``allowed_origins``) and
``http://evil.test:<port>`` (not), while the gateway itself is ``http://127.0.0.1:<port>``.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from gateway.runtime import Gateway
from gateway.server.app import create_app
from gateway.settings import Settings
from support import EXAMPLES, REPO

# The chat-loop tests' scripted LLM (an OpenAI-compatible server) and their threaded uvicorn runner.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "loop"))
from fake_llm import FakeLLM, Servers, openai_provider  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync", "--disable-quic", "--host-resolver-rules=MAP *.test 127.0.0.1"]
ALLOWED_HOST = "app.test"
DISALLOWED_HOST = "evil.test"
ARTIFACTS = REPO / "artifacts"

APP_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>An app on another origin</title>
<script src="{gateway}/client/gateway-tools.js"></script>
<script>
  window.runs = [];  // every handler run in this page, as the runtime announces it
  window.addEventListener("gatewaytools:executed", function (event) {{ window.runs.push(event.detail); }});
</script>
</head><body><h1>An app that uses the gateway's client tools</h1></body></html>
"""


@dataclass
class Site:
    gateway: str  # http://127.0.0.1:<port>
    gateway_app: Gateway
    pages_port: int
    llm: FakeLLM

    def page_url(self, host: str = ALLOWED_HOST) -> str:
        return f"http://{host}:{self.pages_port}/app.html"


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    running = Servers()
    yield running
    running.stop(list(running.running))


@pytest.fixture(scope="session")
def definitions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped tool-definitions plus the misbehaving client tools of ``tests/browser/tools``."""
    root = tmp_path_factory.mktemp("browser") / "tool-definitions"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(__file__).parent / "tools", root, dirs_exist_ok=True)
    return root


@pytest.fixture(scope="session")
def site(servers: Servers, definitions: Path) -> Iterator[Site]:
    """The gateway (with the scripted LLM as its provider) and the server of pages on other origins."""
    llm = FakeLLM()
    llm.url = servers.start(Starlette(routes=[Route("/v1/chat/completions", llm.handle, methods=["POST"])]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAKE_LLM_KEY", "sk-test-" + uuid.uuid4().hex)
        settings = Settings(definitions=definitions, reload=False, allowed_origins=(f"http://{ALLOWED_HOST}:*",),
                            providers={"default": openai_provider(llm)}, chat={"provider": "default"})
        gateway = Gateway(settings)
        gateway_url = servers.start(create_app(gateway), lifespan="on")

        async def app_page(request: Request) -> HTMLResponse:
            return HTMLResponse(APP_PAGE.format(gateway=gateway_url))

        pages_url = servers.start(Starlette(routes=[Route("/app.html", app_page)]))
        yield Site(gateway_url, gateway, int(pages_url.rsplit(":", 1)[1]), llm)


@pytest.fixture
def llm(site: Site) -> Iterator[FakeLLM]:
    """The scripted LLM, with an empty script and no recorded requests."""
    site.llm.reset()
    yield site.llm
    site.llm.reset()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        await browser.close()


@pytest_asyncio.fixture(loop_scope="session")
async def open_page(browser: Browser) -> AsyncIterator:
    """Open a page (in a fresh browser context) at a URL; every page opened is closed after the test."""
    contexts = []

    async def open_(url: str) -> Page:
        context = await browser.new_context(viewport={"width": 1280, "height": 820})
        contexts.append(context)
        page = await context.new_page()
        await page.goto(url)
        return page

    yield open_
    for context in contexts:
        await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def app_page(site: Site, open_page) -> Page:
    """The test app on the allowed origin, with the runtime loaded from the gateway."""
    page = await open_page(site.page_url())
    await page.wait_for_function("window.GatewayTools !== undefined")
    return page
