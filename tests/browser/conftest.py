"""Fixtures of the browser tests: the gateway (create_app under uvicorn), the scripted LLM, a second server for
pages on other origins, and Debian's Chromium driven by Playwright — every part real and on 127.0.0.1.

Chromium resolves every ``*.test`` host name to 127.0.0.1, so the page server's pages live on origins that are
not loopback names: ``http://app.test:<port>`` (in the gateway's ``allowed_origins``) and
``http://evil.test:<port>`` (not), while the gateway itself is ``http://127.0.0.1:<port>``.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from browser_site import ALLOWED_HOST, APP_PAGE, TEST_ORIGIN_ARGS, Site  # puts fake_llm on the path
from fake_llm import FakeLLM, Servers, openai_provider
from playwright.async_api import Browser, BrowserContext, Page
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from support import EXAMPLES, chromium

from gateway.runtime.gateway import Gateway
from gateway.server.app import create_app
from gateway.settings import Settings


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
    llm.url = servers.start(llm.openai_app())
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
    async with chromium(*TEST_ORIGIN_ARGS) as browser:
        yield browser


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser_context(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport={"width": 1280, "height": 820})
    yield context
    await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def open_page(browser_context: BrowserContext) -> AsyncIterator:
    """Open a page at a URL; every page opened is closed after the test (which ends its bridge session)."""
    pages: list[Page] = []

    async def open_(url: str) -> Page:
        page = await browser_context.new_page()
        pages.append(page)
        await page.goto(url)
        return page

    yield open_
    for page in pages:
        await page.close()


@pytest_asyncio.fixture(loop_scope="session")
async def app_page(site: Site, open_page) -> Page:
    """The test app on the allowed origin, with the runtime loaded from the gateway."""
    page = await open_page(site.page_url())
    await page.wait_for_function("window.GatewayTools !== undefined")
    return page
