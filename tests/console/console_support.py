"""What the console tests share besides fixtures: keys, signing in, and the check every
page gets — axe-core finds no serious or critical accessibility violation — with its screenshot in artifacts/."""

from __future__ import annotations

from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Page
from support import REPO

ADMIN_KEY = "console-admin-key-for-tests"
READER_KEY = "console-reader-key-for-tests"  # a valid key, but not an admin's
ARTIFACTS = REPO / "artifacts"
PHONE = {"width": 390, "height": 844}
_axe = Axe()


async def sign_in(page: Page, url: str, key: str = ADMIN_KEY, route: str = "#/") -> None:
    """Open the console at ``route`` and sign in with ``key``; returns once the page behind the form shows."""
    await page.goto(f"{url}/admin/{route}")
    await page.get_by_label("Admin key").fill(key)
    await page.get_by_role("button", name="Sign in", exact=True).click()  # not "Sign in with <issuer>"
    await page.locator("main h1").filter(has_not_text="Sign in").wait_for()


async def check_page(page: Page, name: str, *, phone: bool = False) -> None:
    """Screenshot ``page`` to artifacts/console-<name>.png (and at a phone's width if asked, which must not
    scroll sideways), and assert axe-core finds nothing serious or critical on it."""
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"console-{name}.png"), full_page=True)
    await _accessible(page, name)
    if phone:
        desktop = page.viewport_size
        await page.set_viewport_size(PHONE)
        try:
            await page.screenshot(path=str(ARTIFACTS / f"console-{name}-phone.png"), full_page=True)
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{name}: the page is {width} px wide on a {PHONE['width']} px phone"
            await _accessible(page, f"{name} (phone)")
        finally:
            await page.set_viewport_size(desktop)


async def _accessible(page: Page, name: str) -> None:
    if not await page.evaluate("typeof window.axe === 'object'"):  # once per document: the pages are hash routes
        await page.evaluate(_axe.axe_script)
    results = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [(v["id"], v["impact"], v["help"], [n["target"] for n in v["nodes"]][:3])
           for v in results["violations"] if v["impact"] in ("serious", "critical")]
    assert not bad, f"{name}: accessibility violations {bad}"
