"""FastMCP's Python client (a real one, as users run it) against ``/mcp``: results arrive as plain values."""

from __future__ import annotations

from fastmcp import Client
from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def test_fastmcp_reads_a_scalar_or_list_result_as_the_value_itself(server):
    """A tool returning a number or a list travels as ``{"result": …}`` (MCP wants an object); FastMCP's client
    unwraps it to the value itself (``.data == 4.0``, not ``Root(result=4.0)``), while the official client still
    gets structuredContent that matches the outputSchema it was listed with."""
    url = f"{server.url}/mcp"
    async with Client(url) as client:
        assert (await client.call_tool("square_root", {"x": 16})).data == 4.0
        assert (await client.call_tool("sum", {"a": 1, "b": 2})).data == 3
        lights = (await client.call_tool("get_lights", {})).data
        assert isinstance(lights, list) and lights and all(hasattr(light, "color") for light in lights)
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        root = await session.call_tool("square_root", {"x": 16})
    assert root.structured_content == {"result": 4.0}
    Draft202012Validator(listed["square_root"].output_schema).validate(root.structured_content)
