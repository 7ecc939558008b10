"""The landing page in Chromium: it shows what runs here and loads nothing but itself; a screenshot is kept in
artifacts/."""

from __future__ import annotations

import pytest
from browser_site import ARTIFACTS

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_the_landing_page_shows_the_catalog_and_loads_nothing_else(site, browser_context):
    """Opening / shows the catalog version, the tool count and the endpoints; the page makes no other request and
    breaks no rule of its Content-Security-Policy."""
    page = await browser_context.new_page()
    requests: list[str] = []
    console: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: console.append(message.text))
    try:
        response = await page.goto(site.gateway + "/")
        assert response is not None and response.status == 200
        catalog = site.gateway_app.catalog
        text = await page.inner_text("main")
        assert catalog.version in text and f"{len(catalog.tools)} tools" in text
        for title in ("REST", "MCP", "Chat", "Browser runtime", "Demo page", "Admin console"):
            assert title in text
        await page.wait_for_load_state("load")
        assert requests[0] == site.gateway + "/"
        assert all(url.startswith(site.gateway + "/") for url in requests)  # at most the browser's own favicon
        assert not [line for line in console if "Content Security Policy" in line]
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "landing-page.png"), full_page=True)
        await page.click("a[href='/client/demo']")
        await page.wait_for_url(site.gateway + "/client/demo")
    finally:
        await page.close()
