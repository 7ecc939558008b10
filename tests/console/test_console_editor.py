"""The console's Problems page and editor in Chromium, against a real gateway that watches its definitions:
problems found on disk, Check, Save, a save refused after a change on disk, a new file, a read-only mount."""

from __future__ import annotations

import re

import pytest
from console_support import check_page, sign_in
from playwright.async_api import expect

pytestmark = pytest.mark.asyncio(loop_scope="session")

GOOD = """\
tools:
  - id: greet
    name: Greet
    user_description: Says hello.
    ai_description: Returns a greeting for a name.
    binding:
      python: console_tools:greet
    toolsets: [people]
"""
BAD = GOOD.replace("python: console_tools:greet", "pyhton: console_tools:greet")  # line 7, column 7
LOUDER = GOOD + """\
  - id: greet_loudly
    name: Greet loudly
    user_description: Says hello, loudly.
    ai_description: Returns a greeting for a name.
    binding:
      python: console_tools:greet
    toolsets: [people]
"""


async def served_ids(console) -> set[str]:
    async with console.client() as client:
        answer = await client.get("/tools")
        assert answer.status_code == 200
        return {tool["id"] for tool in answer.json()["tools"]}


async def test_a_bad_edit_on_disk_shows_as_a_problem_with_its_line_until_fixed(edited, page):
    """A file broken on disk (the gateway reloads it by itself) shows on the Problems page as file:line:col with
    the file's lines around it and the column marked; once the file is fixed the problem goes away."""
    await sign_in(page, edited.url, route="#/problems")
    await expect(page.get_by_text("No problems: every file builds.")).to_be_visible()
    (edited.definitions / "greetings.yaml").write_text(BAD, encoding="utf-8")

    problem = page.locator("li.problem").filter(has_text="greetings.yaml:7:7")
    await expect(problem).to_be_visible(timeout=30_000)
    await expect(problem).to_contain_text("unknown key 'pyhton'")
    await expect(problem.locator(".ex-line.hit")).to_contain_text("pyhton: console_tools:greet")
    await expect(problem.locator(".ex-line.hit mark")).to_have_text("p")
    await expect(problem.locator(".ex-line.hit .ln")).to_have_text("7")
    await expect(page.locator("#problem-count")).to_have_text("1")
    await expect(page.locator("table tbody tr").first).to_contain_text("failed")
    await check_page(page, "problems")

    (edited.definitions / "greetings.yaml").write_text(GOOD, encoding="utf-8")
    await expect(page.get_by_text("No problems: every file builds.")).to_be_visible(timeout=30_000)
    await expect(page.locator("#problem-count")).to_be_hidden()


async def test_edit_check_fix_save_and_the_gateway_serves_it(edited, page):
    """In the editor, Check lists a draft's problems and marks their lines in the gutter without saving; Save
    refuses a draft that would not build; a fixed draft checks clean, saves, and GET /tools then serves it."""
    await sign_in(page, edited.url, route="#/editor/greetings.yaml")
    source = page.get_by_label("Contents of greetings.yaml")
    await expect(source).to_have_value((edited.definitions / "greetings.yaml").read_text(encoding="utf-8"))
    await check_page(page, "editor", phone=True)
    on_disk = (edited.definitions / "greetings.yaml").read_text(encoding="utf-8")

    await source.fill(BAD)
    await page.get_by_role("button", name="Check").click()
    await expect(page.locator(".editor-problems")).to_contain_text("greetings.yaml:7:7")
    await expect(page.locator('.gutter .gl.bad[data-line="7"]')).to_be_visible()
    await expect(page.locator(".gutter .gl.bad")).to_have_count(1)
    await check_page(page, "editor-problems")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("alert")).to_contain_text("Not saved: the catalog would not build")
    assert (edited.definitions / "greetings.yaml").read_text(encoding="utf-8") == on_disk

    await source.fill(LOUDER)
    await page.get_by_role("button", name="Check").click()
    await expect(page.get_by_role("status").filter(has_text="No problems")).to_be_visible()
    await expect(page.locator(".gutter .gl.bad")).to_have_count(0)
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    assert (edited.definitions / "greetings.yaml").read_text(encoding="utf-8") == LOUDER
    assert "greet_loudly" in await served_ids(edited)


async def test_a_change_on_disk_since_the_file_was_opened_refuses_the_save(edited, page):
    """When the file changed on disk after the editor opened it, Save is refused with a message saying so, the
    other change is kept, and Reload from disk shows it."""
    await sign_in(page, edited.url, route="#/editor/greetings.yaml")
    source = page.get_by_label("Contents of greetings.yaml")
    await expect(source).not_to_have_value("")
    theirs = GOOD.replace("name: Greet", "name: Greet (their edit)")
    (edited.definitions / "greetings.yaml").write_text(theirs, encoding="utf-8")

    await source.fill(GOOD.replace("name: Greet", "name: Greet (my edit)"))
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("alert")).to_contain_text("changed on disk since you opened it")
    assert (edited.definitions / "greetings.yaml").read_text(encoding="utf-8") == theirs
    await check_page(page, "editor-conflict")

    await page.get_by_role("button", name="Reload from disk").click()
    await expect(source).to_have_value(theirs)


async def test_a_new_file_from_a_template_opens_in_the_editor_and_is_served(edited, page):
    """New file creates a definitions file from a template, opens it, and the gateway serves its tool."""
    before = await served_ids(edited)
    await sign_in(page, edited.url, route="#/editor")
    await page.get_by_label("Path").fill("weather.yaml")
    await page.get_by_label("Template").select_option("http")
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_label("Contents of weather.yaml")).to_have_value(re.compile("binding:"))
    assert (edited.definitions / "weather.yaml").is_file()
    assert len(await served_ids(edited) - before) == 1

    await page.get_by_label("Path").fill("weather.yaml")
    await page.get_by_role("button", name="Create").click()
    await expect(page.get_by_role("alert")).to_contain_text("weather.yaml exists already")


async def test_a_configmap_mount_makes_the_editor_read_only_and_says_why(readonly_console, page):
    """Over definitions mounted as a Kubernetes ConfigMap, the editor shows the file but cannot change it: a
    banner gives the reason, the text is read-only, and Check, Save and Create are disabled."""
    await page.goto(f"{readonly_console.url}/admin/#/editor/greetings.yaml")
    await expect(page.get_by_role("note")).to_contain_text("ConfigMap")
    source = page.get_by_label("Contents of greetings.yaml")
    await expect(source).to_have_value(re.compile("id: greet"))
    await expect(source).not_to_be_editable()
    for name in ("Check", "Save", "Create"):
        await expect(page.get_by_role("button", name=name)).to_be_disabled()
    await check_page(page, "editor-read-only")



async def test_the_line_numbers_follow_the_text_when_it_scrolls(edited, page):
    """Scrolling a file longer than the editor scrolls its line numbers with it: the gutter shows the lines
    the text shows."""
    await sign_in(page, edited.url, route="#/editor/orders.yaml")
    source = page.get_by_label("Contents of orders.yaml")
    lines = len((edited.definitions / "orders.yaml").read_text(encoding="utf-8").split("\n"))
    await expect(page.locator(".gutter .gl")).to_have_count(lines)
    await source.evaluate("s => { s.scrollTop = s.scrollHeight; s.dispatchEvent(new Event('scroll')); }")
    top = await source.evaluate("s => s.scrollTop")
    assert top > 0
    await expect(page.locator(".gutter")).to_have_js_property("scrollTop", top)


async def test_with_auth_off_the_console_checks_a_draft_with_the_token_it_read(open_console, page):
    """With auth off, admin writes need the console token (``writes``): the console reads it from the
    gateway and sends it, so Check works from the gateway's own page without a key."""
    await page.goto(f"{open_console.url}/admin/#/editor/greetings.yaml")
    await expect(page.get_by_label("Contents of greetings.yaml")).not_to_have_value("")
    await page.get_by_role("button", name="Check").click()
    await expect(page.get_by_role("status").filter(has_text="No problems")).to_be_visible()
