"""The live bridge: REST and MCP calls that name a page's session run client tools in that page (real Chromium)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from mcp import Client
from playwright.async_api import Page

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def connect(page: Page, *tools: str) -> str:
    """Load the tools' scripts in the page and open its bridge session; the session id."""
    await page.evaluate("ids => GatewayTools.load(ids)", list(tools))
    return await page.evaluate("GatewayTools.connect().then(session => { window.session = session; return session.id; })")


async def call(site, tool: str, arguments: dict, session: str) -> dict:
    async with httpx.AsyncClient(base_url=site.gateway, timeout=30) as client:
        response = await client.post(f"/tools/{tool}/call", json=arguments, headers={"X-Gateway-Session": session})
    assert response.status_code == 200
    return response.json()


async def test_rest_call_naming_the_session_runs_the_seed_script_in_the_page(site, app_page: Page):
    """A REST call with X-Gateway-Session runs example-tool's PlusWorkflow script in the page: "<param> answered"."""
    session = await connect(app_page, "example-tool")

    body = await call(site, "example-tool", {"exampleParam": "rest"}, session)

    assert body == {"tool": "example-tool", "is_error": False, "result": "rest answered", "text": "rest answered"}
    runs = await app_page.evaluate("window.runs")
    assert [(r["tool"], r["via"], r["input"]) for r in runs] == [("example-tool", "bridge", '{"exampleParam": "rest"}')]
    assert runs[0]["value"] == '"rest answered"'  # the script's JSON.stringify(result), read as JSON by the gateway


async def test_mcp_call_with_session_meta_runs_in_the_page(site, app_page: Page):
    """An MCP tools/call with _meta["gateway/session"] runs example-tool in the page and answers its value."""
    session = await connect(app_page, "example-tool")

    async with Client(site.gateway + "/mcp") as client:
        result = await client.call_tool("example-tool", {"exampleParam": "mcp"}, meta={"gateway/session": session})

    assert result.is_error is False
    assert [c.text for c in result.content] == ["mcp answered"]
    assert [r["via"] for r in await app_page.evaluate("window.runs")] == ["bridge"]


async def test_client_only_tool_is_listed_on_mcp_for_a_session_and_runs_in_the_page(site, app_page: Page):
    """task_form_read (scope CLIENT) is listed and callable over MCP when the request names a session."""
    session = await connect(app_page, "task_form_read", "task_form_fill")
    await app_page.set_content('<form id="task-form"><input name="title" value="Pump"><input name="customer">'
                               '<select name="priority"><option>low</option><option selected>high</option></select>'
                               '<input name="due_date" value="2026-12-01"><textarea name="description"></textarea>'
                               '</form>')

    async with Client(site.gateway + "/mcp") as client:
        plain = {tool.name for tool in (await client.list_tools()).tools}
        named = {tool.name for tool in (await client.list_tools(meta={"gateway/session": session})).tools}
        result = await client.call_tool("task_form_read", {}, meta={"gateway/session": session})

    assert "task_form_read" not in plain and "task_form_read" in named
    assert result.is_error is False
    assert result.structured_content == {"title": "Pump", "customer": "", "priority": "high",
                                         "due_date": "2026-12-01", "description": ""}


async def test_scope_all_tool_without_session_runs_on_the_server(site, app_page: Page):
    """Without a session, example-tool (scope ALL) runs its Python binding; the page sees no call."""
    await connect(app_page, "example-tool")
    async with httpx.AsyncClient(base_url=site.gateway) as client:
        response = await client.post("/tools/example-tool/call", json={"exampleParam": "server"})

    assert response.json()["result"] == "server answered"
    assert await app_page.evaluate("window.runs") == []


async def test_throwing_handler_gives_an_error_result_with_its_message(site, app_page: Page):
    """A handler that throws becomes an is_error result carrying the thrown message."""
    session = await connect(app_page, "page_throws")

    body = await call(site, "page_throws", {"field": "due"}, session)

    assert body["is_error"] is True
    assert body["error"] == "Tool 'page_throws' failed in the browser: the form has no field due"


async def test_handler_that_never_answers_times_out_cleanly(site, app_page: Page):
    """A call the page never answers ends at the tool's timeout_s as an error result, and the session lives on."""
    session = await connect(app_page, "page_hangs", "example-tool")

    body = await call(site, "page_hangs", {}, session)

    assert body["is_error"] is True
    assert body["error"] == "Tool 'page_hangs' did not finish within 0.5 s."
    assert (await call(site, "example-tool", {"exampleParam": "after"}, session))["result"] == "after answered"


async def test_page_disconnecting_fails_its_pending_call(site, app_page: Page):
    """Closing the page while a call waits on it answers that call at once with an error result."""
    session = await connect(app_page, "page_waits")
    pending = asyncio.create_task(call(site, "page_waits", {}, session))
    await app_page.wait_for_function("window.waiting === 1")  # the call reached the handler

    await app_page.close()
    body = await pending

    assert body["is_error"] is True
    assert body["error"] == "Tool 'page_waits' did not finish: the browser page running it disconnected."


async def test_call_naming_an_unknown_session_is_an_error_result(site):
    """A session id no page holds gives an error result, not a hang."""
    body = await call(site, "task_form_read", {}, "no-such-session")

    assert body["is_error"] is True
    assert "no open page holds the browser session" in body["error"]


async def test_handler_for_a_tool_without_script_is_an_error_result(site, app_page: Page):
    """A page asked to run a client tool it cannot load a handler for answers an error result naming the tool."""
    session = await connect(app_page)
    await app_page.route("**/client/scripts/task_form_read.js", lambda route: route.abort())

    body = await call(site, "task_form_read", {}, session)

    assert body["is_error"] is True
    assert body["error"].startswith("Tool 'task_form_read' failed in the browser: No handler for tool "
                                    "'task_form_read' in this page, and its script could not be loaded")
