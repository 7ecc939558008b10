"""The client under test for the MCP conformance suite's client scenarios: the gateway itself.

``python tests/conformance/gateway_client.py <server-url>`` is the command the suite spawns, with the URL of the
scenario's server appended (and ``MCP_CONFORMANCE_SCENARIO`` naming the scenario). It declares that server as an
``mcp`` source of a fresh definitions directory, serves the gateway on it (a free port of 127.0.0.1, auth off),
and through the gateway's own ``/mcp`` lists the tools and calls each once. The scenario server thus meets the
gateway's upstream client: its connect, handshake, listing and calls are what the suite judges. What the server
asks during a call (elicitation) the gateway relays to the client here, which accepts with the requested
schema's defaults, as a user who changes nothing would.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

# Run as a script: tests/, for support, and the checkout's own gateway (not an installed one's, which a worktree's
# run would otherwise test).
sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent.parent)]
from support import running

# A value of each JSON type for a required argument: the scenarios judge that the call arrives, not its values.
SAMPLE_VALUES: dict[str, Any] = {"number": 2, "integer": 2, "string": "conformance", "boolean": True,
                                 "object": {}, "array": []}


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool's required properties, one sample value of each declared type."""
    properties = schema.get("properties") or {}
    return {name: SAMPLE_VALUES.get(properties.get(name, {}).get("type"), "conformance")
            for name in schema.get("required") or []}


async def accept_defaults(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    """The user's answer to a form: every field's default, changed by nobody."""
    properties = (getattr(params, "requested_schema", None) or {}).get("properties") or {}
    return mcp_types.ElicitResult(action="accept", content={name: field["default"] for name, field in properties.items()
                                                            if "default" in field})


async def exercise(mcp_url: str) -> None:
    async with streamable_http_client(mcp_url) as (read, write), \
            ClientSession(read, write, elicitation_callback=accept_defaults) as session:
        await session.initialize()
        listing = await session.list_tools()
        print("tools:", [tool.name for tool in listing.tools])
        for tool in listing.tools:
            result = await session.call_tool(tool.name, arguments_for(tool.input_schema))
            print(tool.name, json.dumps(result.model_dump(mode="json", exclude_none=True)))


def main(server_url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="conformance-client-") as scratch:
        # The gateway keeps an upstream's tool list under its state directory: this run's own, never another's.
        os.environ["TOOL_GATEWAY_STATE_DIR"] = str(Path(scratch) / "state")
        definitions = Path(scratch) / "definitions"
        definitions.mkdir()
        (definitions / "scenario.yaml").write_text(
            f"sources:\n  - id: scenario\n    mcp: {{url: {json.dumps(server_url)}}}\n", encoding="utf-8")
        with running(definitions) as served:
            asyncio.run(exercise(f"{served.url}/mcp"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gateway_client.py <MCP server URL>")
    main(sys.argv[1])
