"""Derived return-value schemas on a running gateway: REST listings and exports, and MCP (official client)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from server_support import RunningServer, running

from gateway.formats import FORMATS

LIGHT_KEYS = ["id", "name", "is_on", "brightness", "color"]


@pytest.fixture(scope="module")
def describing(shared_examples) -> Iterator[RunningServer]:
    """The shipped examples served with ``return_schema: description`` (shared, read-only)."""
    with running(shared_examples, return_schema="description") as served:
        yield served


def _descriptions(url: str, fmt: str) -> dict[str, str]:
    response = httpx.get(f"{url}/tools", params={"format": fmt})
    assert response.status_code == 200
    return {(d.get("function") or d)["name"]: (d.get("function") or d)["description"] for d in response.json()["tools"]}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_description_mode_reaches_every_format_of_the_listing(describing, server, fmt):
    """GET /tools?format=… carries the rendering of change_state's derived schema with description, not without."""
    described = _descriptions(describing.url, fmt)["change_state"]
    assert described.startswith("Changes the state of one light")
    assert "\n\nReturns: {id: integer /* The light's id, for change_state. */; name: string" in described
    assert described.endswith("— A light and its current state.")
    assert "Returns:" not in _descriptions(server.url, fmt)["change_state"]


def test_the_listing_shows_the_derived_output_schema(server):
    """GET /tools gives change_state (no output_schema in its YAML) the schema of its LightModel return type."""
    tools = {t["id"]: t for t in httpx.get(f"{server.url}/tools").json()["tools"]}
    schema = tools["change_state"]["output_schema"]
    assert schema["type"] == "object" and schema["required"] == LIGHT_KEYS
    assert schema["properties"]["color"]["pattern"] == "^#[0-9A-Fa-f]{6}$"
    assert tools["get_lights"]["output_schema"]["items"] == schema


async def test_mcp_gets_derived_output_schemas_and_structured_content(describing):
    """MCP lists the derived outputSchema (a scalar one wrapped as {result}) and results carry structuredContent
    that the official client validates against it."""
    url = f"{describing.url}/mcp"
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert tools["change_state"].output_schema["required"] == LIGHT_KEYS
        assert "Returns: {id: integer" in tools["change_state"].description
        assert tools["square_root"].output_schema["properties"]["result"] == {"type": "number"}
        changed = await session.call_tool("change_state", {"id": 3, "color": "#00FF00"})
        assert changed.is_error is False
        light = changed.structured_content
        assert list(light) == LIGHT_KEYS and light["id"] == 3 and light["color"] == "#00FF00"
        root = await session.call_tool("square_root", {"x": 2.25})
        assert root.structured_content == {"result": 1.5} and root.content[0].text == "1.5"
