"""MCP at /mcp with the official SDK's clients: both protocol revisions, every example tool, errors, pages."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PaginatedRequestParams
from server_support import running
from support import CONSOLE, EXAMPLES

import gateway.server.mcp.handlers as mcp_handlers

BROWSER_ONLY = {"task_form_read", "task_form_fill"}
SERVER_TOOLS = {"example-tool", "search_stations", "get_station", "add_reading", "get_lights", "change_state",
                "square_root", "sum", "get_time", "diff_time"}

# One call per server-side example tool, and a check of what comes back (text and structured content).
CALLS: dict[str, tuple[dict[str, Any], Any]] = {
    "example-tool": ({"exampleParam": "hello"}, lambda r: r.content[0].text == "hello answered"),
    "search_stations": ({"country": "NO", "limit": 2}, lambda r: "oslo-blindern: Oslo Blindern" in r.content[0].text),
    "get_station": ({"station_id": "valencia"}, lambda r: r.structured_content["name"] == "València"),
    "add_reading": ({"station_id": "tromso", "temperature_c": -7.5}, lambda r: '"temperature_c": -7.5' in
                    r.content[0].text),
    "get_lights": ({}, lambda r: [light["id"] for light in r.structured_content["result"]] == [1, 2, 3]),
    "change_state": ({"id": 2, "is_on": True}, lambda r: '"is_on": true' in r.content[0].text),
    "square_root": ({"x": 2.25}, lambda r: r.content[0].text == "1.5"),
    "sum": ({"a": 1, "b": 2}, lambda r: r.content[0].text == "3.0"),
    "get_time": ({"timezone_name": "Europe/Warsaw"}, lambda r: r.content[0].text[19:] in ("+01:00", "+02:00")),
    "diff_time": ({"start": "2024-03-01T00:00:00+00:00", "end": "2024-03-01T06:00:00+00:00"},
                  lambda r: r.structured_content == {"seconds": 21600.0, "minutes": 360.0, "hours": 6.0,
                                                     "days": 0.25}),
}


@pytest.fixture(scope="module")
def served(shared_examples):
    """The shipped examples, with the HTTP demo tools pointed at this server's own /demo API."""
    with running(shared_examples) as server:
        demo = shared_examples / "http-demo.yaml"
        demo.write_text(demo.read_text().replace("{{ gateway.base_url }}", server.url))
        assert httpx.post(f"{server.url}/admin/reload", auth=CONSOLE).json()["changed"] is True
        yield server


async def test_handshake_session_lists_server_tools_with_titles_annotations_and_schemas(served):
    """A 2025-11-25 session (initialize handshake) is told tools.listChanged and lists exactly the tools that
    may run on the server, with title, description, annotations and (object-rooted) output schemas."""
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.protocol_version == "2025-11-25"
        assert init.capabilities.tools is not None and init.capabilities.tools.list_changed is True
        listing = await session.list_tools()
    tools = {tool.name: tool for tool in listing.tools}
    assert set(tools) == SERVER_TOOLS and listing.next_cursor is None
    total = tools["sum"]
    assert total.title == "Sum" and total.description == "Returns a + b. Use it for exact addition."
    assert total.annotations.read_only_hint is True and total.annotations.open_world_hint is False
    assert total.input_schema["required"] == ["a", "b"]
    assert tools["diff_time"].output_schema["required"] == ["seconds", "minutes", "hours", "days"]
    assert tools["get_lights"].output_schema["properties"]["result"]["type"] == "array"


async def test_handshake_session_calls_every_example_tool(served):
    """Every server-side example tool answers a tools/call with the expected text and structured content."""
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, (arguments, check) in CALLS.items():
            result = await session.call_tool(name, arguments)
            assert result.is_error is False, (name, result.content)
            assert check(result), (name, result)


async def test_bad_arguments_are_an_error_result_the_model_can_read(served):
    """Arguments that fail the schema give isError with the JSON path and what was expected, not a protocol
    error; so does a tool's own refusal."""
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        bad = await session.call_tool("sum", {"a": "one", "b": 2})
        assert bad.is_error is True and bad.structured_content is None
        assert 'at $.a: expected number, got string "one"' in bad.content[0].text
        refused = await session.call_tool("square_root", {"x": -4})
        assert refused.is_error is True and "negative number" in refused.content[0].text


async def test_unknown_tool_is_a_protocol_error_with_suggestions(served):
    """Calling a tool that does not exist is a JSON-RPC invalid-params error naming close matches."""
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        with pytest.raises(MCPError) as raised:
            await session.call_tool("summ", {"a": 1, "b": 2})
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.message == "Unknown tool 'summ'. Did you mean: sum?"


async def test_auto_negotiating_client_speaks_the_stateless_revision(served):
    """The SDK's Client (mode auto) settles on 2026-07-28, lists the same tools and calls every one of them;
    bad arguments and an unknown tool fail the same way as on the handshake revision."""
    async with Client(f"{served.url}/mcp") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.tools.list_changed is True
        assert {tool.name for tool in (await client.list_tools()).tools} == SERVER_TOOLS
        for name, (arguments, check) in CALLS.items():
            result = await client.call_tool(name, arguments)
            assert result.is_error is False and check(result), (name, result)
        bad = await client.call_tool("sum", {"a": 1})
        assert bad.is_error is True and "missing required property 'b'" in bad.content[0].text
        with pytest.raises(MCPError) as raised:
            await client.call_tool("no_such_tool", {})
        assert raised.value.code == INVALID_PARAMS and "Unknown tool 'no_such_tool'" in raised.value.message


async def test_large_listings_come_in_pages(served, monkeypatch):
    """tools/list pages with nextCursor; following the cursors yields every tool once; a bad cursor is refused."""
    monkeypatch.setattr(mcp_handlers, "PAGE_SIZE", 3)
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
            names += [tool.name for tool in page.tools]
            pages += 1
            if (cursor := page.next_cursor) is None:
                break
        assert pages == 4 and sorted(names) == sorted(SERVER_TOOLS)
        with pytest.raises(MCPError) as raised:
            await session.list_tools(params=PaginatedRequestParams(cursor="page-two"))
    assert raised.value.code == INVALID_PARAMS


async def test_naming_a_browser_session_lists_browser_tools_too(served):
    """A tools/list naming a browser bridge session in _meta also lists the tools that run in the browser."""
    async with Client(f"{served.url}/mcp") as client:
        listing = await client.list_tools(meta={"gateway/session": "tab-1"})
    assert {tool.name for tool in listing.tools} == SERVER_TOOLS | BROWSER_ONLY


async def test_browser_tool_without_a_session_is_an_error_result(served):
    """A browser-only tool called without a browser session answers isError saying how to name one."""
    async with Client(f"{served.url}/mcp") as client:
        result = await client.call_tool("task_form_read", {})
    assert result.is_error is True and "browser session" in result.content[0].text


def test_foreign_origin_is_refused_on_mcp(served):
    """A browser page from a foreign origin cannot reach /mcp (403), while loopback pages can."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "page", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    foreign = httpx.post(f"{served.url}/mcp", json=initialize, headers=headers | {"Origin": "https://evil.example"})
    assert foreign.status_code == 403
    local = httpx.post(f"{served.url}/mcp", json=initialize, headers=headers | {"Origin": "http://localhost:3000"})
    assert local.status_code == 200 and local.json()["result"]["serverInfo"]["name"] == "tool-gateway"


def test_examples_are_what_this_module_calls():
    """Every server-side example tool shipped has a call in CALLS, so "every example tool" stays true."""
    import yaml

    shipped = {tool["id"] for path in EXAMPLES.glob("*.yaml") for tool in yaml.safe_load(path.read_text())["tools"]}
    assert shipped - BROWSER_ONLY == set(CALLS) == SERVER_TOOLS


def test_stateless_call_needs_no_prior_listing(start_server, examples_dir):
    """A lone 2026-07-28 tools/call (its envelope in _meta, routing headers set) on a fresh server is answered
    as one JSON response, stamped with the server's identity."""
    served = start_server(examples_dir)
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "sum", "arguments": {"a": 20, "b": 22}, "_meta": envelope}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tools/call", "Mcp-Name": "sum"}
    response = httpx.post(f"{served.url}/mcp", json=body, headers=headers)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    result = response.json()["result"]
    assert result["content"] == [{"type": "text", "text": "42.0"}] and result["isError"] is False
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "tool-gateway"


@pytest.mark.parametrize("session", [["tab-1"], {"id": "tab-1"}, 7])
def test_a_browser_session_that_is_not_a_string_is_invalid_params(served, session):
    """_meta["gateway/session"] must be a string: anything else is a JSON-RPC invalid-params error naming it,
    not an internal error."""
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}, "gateway/session": session}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
    for method, params in (("tools/call", {"name": "task_form_read", "arguments": {}}), ("tools/list", {})):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": envelope}}
        name = {"Mcp-Name": "task_form_read"} if method == "tools/call" else {}
        answer = httpx.post(f"{served.url}/mcp", json=body, headers=headers | {"Mcp-Method": method} | name).json()
        assert answer["error"]["code"] == INVALID_PARAMS, method
        assert "gateway/session" in answer["error"]["message"]
