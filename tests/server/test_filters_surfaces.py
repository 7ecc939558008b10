"""Invocation filters on every surface of a real server and on the CLI: they run inside the one call path."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
import yaml
from filter_tools import SETTINGS_FILTERS, surfaces_dir
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from server_support import running
from support import CONSOLE
from websockets.asyncio.client import connect

from gateway.cli.main import main

SCHEMA = {"type": "object", "properties": {"echo": {"type": "string"}, "secret": {"type": "string"}}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """A server of the filter tools, with a settings filter that redacts an address from every result."""
    with running(surfaces_dir(tmp_path_factory.mktemp("filters")), filters=SETTINGS_FILTERS) as server:
        yield server


def rest(served, tool: str) -> httpx.Response:
    return httpx.post(f"{served.url}/tools/{tool}/call", json={"text": "alice@example.com hi"}, timeout=30)


def test_rest_calls_go_through_the_filters(served) -> None:
    """On REST a filter changes arguments, answers for the tool or refuses, and the settings filter redacts."""
    shouted = rest(served, "shouted").json()
    assert shouted["is_error"] is False and shouted["result"]["echo"] == "ALICE@EXAMPLE.COM HI"
    assert "alice@example.com" not in rest(served, "answered").text + rest(served, "schema").text
    assert rest(served, "answered").json()["result"]["echo"] == "from the filter"
    refused = rest(served, "refused").json()
    assert refused["is_error"] is True and refused["text"] == "not today"
    assert rest(served, "surfaced").json()["result"]["echo"] == "rest"


def test_a_failing_filter_is_a_200_error_result_on_rest(served) -> None:
    """A filter that raises is an error result with a log reference, never a 500."""
    response = rest(served, "crashing")
    assert response.status_code == 200
    body = response.json()
    assert body["is_error"] is True and "myfilters:crash" in body["text"] and "ref " in body["text"]


def test_rest_result_text_carries_the_schema_with_attach_output_schema(served) -> None:
    """``attach_output_schema``: REST ``text`` is ``{value, schema}``, ``result`` stays the tool's value."""
    body = rest(served, "schema").json()
    assert json.loads(body["text"]) == {"value": body["result"], "schema": SCHEMA}
    assert body["result"]["secret"] == "key-1234 of [redacted]"


async def test_mcp_calls_go_through_the_filters(served) -> None:
    """Over MCP the same filters run: changed arguments, refusals and failures as isError, the schema attached
    to the text while structuredContent stays the value."""
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        arguments = {"text": "alice@example.com hi"}
        shouted = await session.call_tool("shouted", arguments)
        assert shouted.is_error is False and "ALICE@EXAMPLE.COM HI" in shouted.content[0].text
        refused = await session.call_tool("refused", arguments)
        assert refused.is_error is True and refused.content[0].text == "not today"
        crashing = await session.call_tool("crashing", arguments)
        assert crashing.is_error is True and "ref " in crashing.content[0].text
        schema = await session.call_tool("schema", arguments)
        assert json.loads(schema.content[0].text)["schema"] == SCHEMA
        assert schema.structured_content == {"echo": "[redacted] hi", "secret": "key-1234 of [redacted]"}
        surfaced = await session.call_tool("surfaced", arguments)
        assert json.loads(surfaced.content[0].text)["echo"] == "mcp"


def test_cli_call_goes_through_the_filters(tmp_path: Path, capsys) -> None:
    """``tool-gateway call`` runs settings and tool filters; a refusing filter exits 1 with its message."""
    definitions = surfaces_dir(tmp_path)
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({"filters": list(SETTINGS_FILTERS)}))
    arguments = '{"text": "alice@example.com hi"}'
    assert main(["--settings", str(settings), "call", "shouted", arguments, "-d", str(definitions)]) == 0
    assert json.loads(capsys.readouterr().out) == {"echo": "ALICE@EXAMPLE.COM HI", "secret": "key-1234 of [redacted]"}
    assert main(["--settings", str(settings), "call", "refused", arguments, "-d", str(definitions)]) == 1
    assert "not today" in capsys.readouterr().err
    assert main(["--settings", str(settings), "call", "surfaced", arguments, "-d", str(definitions)]) == 0
    assert json.loads(capsys.readouterr().out)["echo"] == "cli"


def test_cli_validate_reports_a_filter_problem_where_it_is(tmp_path: Path, capsys) -> None:
    """``tool-gateway validate`` names a wrong tool filter by file:line:col and a wrong settings filter by name."""
    definitions = surfaces_dir(tmp_path)
    text = (definitions / "tools.yaml").read_text().replace("myfilters:shout", "myfilters:shuot")
    (definitions / "tools.yaml").write_text(text)
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({"filters": ["nosuch"]}))
    assert main(["--settings", str(settings), "validate", str(definitions)]) == 1
    err = capsys.readouterr().err
    assert "tools.yaml:7:" in err and "no attribute 'shuot'" in err
    assert "setting 'filters' [0]" in err and "unknown filter 'nosuch'" in err


def test_a_served_gateway_reloads_its_filters(tmp_path: Path, start_server) -> None:
    """Editing a filter's module and reloading serves the new filter; a filter broken by an edit is reported by
    the reload, and the last good catalog keeps serving."""
    definitions = surfaces_dir(tmp_path)
    server = start_server(definitions)
    assert rest(server, "answered").json()["result"]["echo"] == "from the filter"
    module = definitions / "python" / "myfilters.py"
    module.write_text(module.read_text().replace("from the filter", "from the edited filter"))
    assert httpx.post(f"{server.url}/admin/reload", timeout=30, auth=CONSOLE).json()["ok"] is True
    assert rest(server, "answered").json()["result"]["echo"] == "from the edited filter"
    module.write_text(module.read_text().replace("async def answer(", "async def renamed("))
    failed = httpx.post(f"{server.url}/admin/reload", timeout=30, auth=CONSOLE).json()
    assert failed["ok"] is False and "no attribute 'answer'" in json.dumps(failed)
    assert rest(server, "answered").json()["result"]["echo"] == "from the edited filter"


BROWSER_TOOL = '''
  - id: page_echo
    name: Page echo
    user_description: Echoes in the page.
    ai_description: Echoes in the page.
    scope: client
    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
    binding: {browser: {script: scripts/page_echo.js}}
    filters: ["myfilters:shout"]
'''


async def test_calls_run_in_a_browser_page_go_through_the_filters(tmp_path: Path, start_server) -> None:
    """A call run by a page over the browser bridge passes the same filters: the page receives the arguments a
    filter changed, and the settings filter redacts what the page answered."""
    definitions = surfaces_dir(tmp_path)
    (definitions / "scripts").mkdir()
    (definitions / "scripts" / "page_echo.js").write_text("GatewayTools.register('page_echo', {execute: x => x});\n")
    (definitions / "tools.yaml").write_text((definitions / "tools.yaml").read_text() + BROWSER_TOOL)
    server = start_server(definitions, filters=SETTINGS_FILTERS)
    async with connect(server.url.replace("http", "ws", 1) + "/client/bridge") as page, \
            httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        session = json.loads(await page.recv())["session"]
        call = asyncio.create_task(http.post("/tools/page_echo/call", json={"text": "hi"},
                                             headers={"X-Gateway-Session": session}))
        sent = json.loads(await page.recv())
        assert json.loads(sent["input"]) == {"text": "HI"}
        await page.send(json.dumps({"type": "result", "id": sent["id"], "value": "HI alice@example.com"}))
        body = (await call).json()
    assert body["is_error"] is False and body["result"] == "HI [redacted]"
