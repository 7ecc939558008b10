"""The admin console in Chromium, against a real gateway: sign-in, the catalog, a tool, Try it and live calls.
Every page is screenshotted to artifacts/ and checked with axe-core."""

from __future__ import annotations

import asyncio
import json

import pytest
from console_support import ADMIN_KEY, PHONE, READER_KEY, check_page, sign_in
from playwright.async_api import expect

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_sign_in_keeps_the_key_in_the_tab_and_a_refused_key_is_said(console, page):
    """The console asks for a key; a wrong key and a non-admin key are refused with a message saying so; the
    admin key opens the catalog and lives in sessionStorage only; signing out forgets it."""
    await page.goto(f"{console.url}/admin/")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await check_page(page, "sign-in")

    await page.get_by_label("Admin key").fill("not-a-key")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("refused this key")
    assert await page.evaluate("sessionStorage.length") == 0
    await page.get_by_label("Admin key").fill(READER_KEY)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("may not use the console")

    await page.get_by_label("Admin key").fill(ADMIN_KEY)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Catalog")).to_be_visible()
    await expect(page.locator(".page-head .meta")).to_contain_text(console.gateway.catalog.version)
    assert ADMIN_KEY in await page.evaluate("Object.values(sessionStorage)")
    assert await page.evaluate("localStorage.length") == 0 and "console" not in await page.evaluate("document.cookie")

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0


async def test_the_catalog_searches_and_filters(console, page):
    """The catalog lists every tool with the catalog's version and count; the search box and the toolset filter
    narrow the table."""
    await sign_in(page, console.url)
    rows = page.locator(".results tbody tr")
    await expect(rows).to_have_count(len(console.gateway.catalog.tools))
    await expect(page.locator(".tally")).to_have_text(f"{len(console.gateway.catalog.tools)} tools")
    await check_page(page, "catalog", phone=True)

    await page.get_by_label("Search").fill("track")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("track_order")
    await page.get_by_label("Search").fill("")
    await page.get_by_label("Toolset").select_option("people")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("greetings.yaml")
    await page.get_by_label("Toolset").select_option("")
    await page.get_by_label("Search").fill("no such tool")
    await expect(page.get_by_text("No tool matches.")).to_be_visible()


async def test_the_catalog_ranks_by_the_gateways_tool_search(console, page):
    """"Rank by fit" asks the gateway's tool search (GET /tools/search): the tools that fit the words, best first,
    with their fit — words that are in no tool's id or name still find one by its description and parameters."""
    await sign_in(page, console.url)
    rows = page.locator(".results tbody tr")
    await page.get_by_label("Rank by fit").check()
    await page.get_by_label("Search").fill("deliver pizzas for a customer")
    await expect(page.locator(".tally")).to_contain_text("best fits, best first")
    await expect(rows.first).to_contain_text("place_order")
    await expect(page.locator(".results thead th").first).to_have_text("Fit")
    await check_page(page, "catalog-ranked")
    await page.get_by_label("Rank by fit").uncheck()
    await expect(page.get_by_text("No tool matches.")).to_be_visible()  # no tool's listing fields hold those words


async def test_a_tool_page_shows_its_descriptions_schemas_formats_and_declaration(console, page):
    """A tool's page shows both descriptions, its input schema as a readable list (nested properties, required
    marks, enum values) with a raw JSON toggle, the six provider formats, and file:line, which opens the
    editor at that line."""
    await sign_in(page, console.url)
    await page.get_by_role("link", name="place_order", exact=True).click()
    await expect(page.get_by_role("heading", name="Place an order")).to_be_visible()
    main = page.locator("main")
    await expect(main).to_contain_text("Orders pizzas for delivery.")
    await expect(main).to_contain_text("Places a pizza order for a customer")
    await expect(main.get_by_role("link", name="orders.yaml:4")).to_be_visible()
    address = page.locator("#input-schema li.prop", has=page.locator(".name", has_text="address")).first
    await expect(address.locator(".req").first).to_have_text("required")
    await expect(address.locator("li.prop .name")).to_have_text(["city", "street", "floor"])
    await expect(page.locator("#input-schema")).to_contain_text('"olives"')
    for title in ("MCP", "OpenAI", "OpenAI strict", "OpenAI Responses", "Anthropic", "Gemini"):
        await expect(page.get_by_role("heading", name=title, exact=True)).to_be_visible()
    await check_page(page, "tool")

    await page.locator(".card-head:has(#input-heading)").get_by_role("button", name="Raw JSON").click()
    raw = json.loads(await page.locator("#input-schema pre").inner_text())
    assert raw == console.gateway.catalog.tools["place_order"].input_schema

    await main.get_by_role("link", name="orders.yaml:4").click()  # the declaration, in the editor, selected
    source = page.get_by_label("Contents of orders.yaml")
    await expect(source).to_be_focused()
    assert await source.evaluate("s => s.value.slice(s.selectionStart, s.selectionEnd)") == "  - id: place_order"


async def test_descriptions_are_shown_as_text_never_as_markup(console, page):
    """Markup in a tool's description is shown as the characters it is: no element is made of it, no script runs."""
    await sign_in(page, console.url, route="#/tools/track_order")
    await expect(page.locator("main")).to_contain_text('<img src=x onerror="window.injected=1"> is text.')
    assert await page.locator("main img").count() == 0
    assert await page.evaluate("window.injected") is None


async def test_try_it_calls_a_tool_with_arguments_from_the_generated_form(console, page):
    """The form generated from the input schema — text, an enum, a nested object, an array of enums, a oneOf
    choice — sends exactly what was entered (optional fields left out) and shows the tool's result."""
    await sign_in(page, console.url, route="#/tools/place_order/try")
    form = page.locator("form.try")
    await form.get_by_label("customer").fill("Bo")
    await form.get_by_label("size").select_option("medium")
    await form.get_by_label("quantity").fill("2")
    await form.get_by_label("gift").check()
    await form.get_by_label("deliver_on").fill("2026-12-24")
    await form.get_by_label("city").fill("Bergen")
    await form.get_by_role("checkbox", name="toppings array of string · include").check()
    await form.get_by_role("button", name="Add item to toppings").click()
    await form.get_by_label("toppings item 1").select_option("olives")
    await form.get_by_role("button", name="Add item to toppings").click()
    await form.get_by_label("toppings item 2").select_option("cheese")
    await form.get_by_label("Which kind of payment").select_option(label="card")
    await form.get_by_label("number").fill("4111 1111 1111")
    await check_page(page, "try-it")

    await page.get_by_role("button", name="Call place_order").click()
    await expect(page.locator(".result .outcome")).to_contain_text("ok")
    sent = {"customer": "Bo", "size": "medium", "quantity": 2, "gift": True, "deliver_on": "2026-12-24",
            "address": {"city": "Bergen"},
            "toppings": ["olives", "cheese"], "payment": {"number": "4111 1111 1111"}}
    assert json.loads(await page.locator(".result-json").inner_text()) == {
        "order": sent, "summary": "2 medium for Bo"}
    await check_page(page, "try-it-result", phone=True)

    await page.get_by_role("button", name="Use A large one to Oslo").click()
    await page.get_by_role("button", name="Raw JSON").click()
    example = console.gateway.catalog.tools["place_order"].definition.examples[0]["arguments"]
    assert json.loads(await page.get_by_label("Arguments (JSON)").input_value()) == example
    await page.goto(f"{console.url}/admin/#/tools/track_order/try")
    await page.get_by_label("number").fill("5000")
    await page.get_by_role("button", name="Call track_order").click()
    await expect(page.locator(".result .outcome")).to_contain_text("error")
    await expect(page.locator(".result .error-text")).to_contain_text("No order 5000.")


async def test_live_calls_appear_while_another_client_calls_tools(console, page):
    """With Live calls open, calls another client makes (one ok, one failing) appear as rows as they happen,
    a row opens the call's arguments and result, and the tool's page then counts the calls."""
    await sign_in(page, console.url, route="#/calls")
    await expect(page.locator("#stream-state")).to_have_text("live")
    async with console.client() as client:
        for number in (7, 5001):
            answer = await client.post("/tools/track_order/call", json={"number": number})
            assert answer.status_code == 200
            await asyncio.sleep(0)
    rows = page.locator("table.calls tbody tr")
    failing = rows.filter(has_text="track_order").filter(has_text="error").first
    await expect(failing).to_be_visible()
    await expect(rows.filter(has_text="track_order").filter(has_text="ok").first).to_be_visible()
    await failing.locator("button").click()
    await expect(page.locator(".call-arguments")).to_contain_text('"number": 5001')
    await expect(page.locator(".call-detail")).to_contain_text("No order 5001.")
    await check_page(page, "live-calls")

    await page.goto(f"{console.url}/admin/#/tools/track_order")
    figures = page.locator("section:has(#figures-heading)")
    await expect(figures.locator("dt", has_text="Calls").locator("xpath=following-sibling::dd[1]")).not_to_have_text("0")
    await expect(figures).to_contain_text("No SLO declared")


async def test_with_auth_off_the_console_opens_on_loopback_without_a_key(open_console, page):
    """A gateway without API keys serves the console to a loopback browser directly: no sign-in, no sign-out."""
    await page.goto(f"{open_console.url}/admin/")
    await expect(page.get_by_role("heading", name="Catalog")).to_be_visible()
    await expect(page.locator("#who-text")).to_have_text("Auth off (loopback)")
    await expect(page.get_by_role("button", name="Sign out")).to_be_hidden()


async def test_on_a_phone_the_navigation_folds_behind_a_menu_button(console, context, page):
    """At 390 px the navigation is hidden behind Menu; Menu opens it, and following a link closes it again."""
    await page.set_viewport_size(PHONE)
    await sign_in(page, console.url)
    nav = page.get_by_role("navigation", name="Console")
    await expect(nav).to_be_hidden()
    await page.get_by_role("button", name="Menu").click()
    await expect(nav).to_be_visible()
    await expect(page.get_by_role("button", name="Menu")).to_have_attribute("aria-expanded", "true")
    await nav.get_by_role("link", name="Editor").click()
    await expect(page.get_by_role("heading", name="Editor")).to_be_focused()
    await expect(nav).to_be_hidden()


async def test_the_landing_page_links_to_the_console(console, page):
    """The page at / links to /admin/, and following the link opens the console's sign-in."""
    await page.goto(f"{console.url}/")
    await page.get_by_role("link", name="/admin/").click()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.url == f"{console.url}/admin/"


async def test_a_malformed_address_shows_a_message_not_a_broken_page(console, page):
    """A typed address with a stray '%' (not percent-encoding) reaches the page as it is: the tool is not found,
    said on the page, and no script error occurs."""
    await sign_in(page, console.url)
    await page.goto(f"{console.url}/admin/#/tools/50%zz")
    await expect(page.get_by_role("alert")).to_contain_text("50%zz")
