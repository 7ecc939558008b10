"""A fixture upstream (``tests/fixtures/mcp_upstream/<FIXTURE>``) served on 127.0.0.1:<PORT> answering with JSON
bodies or (``--sse``) with SSE streams, and, on the MCPServer (FastMCP) one, tools that talk during a call:

    python upstream_variants.py PORT FIXTURE [--sse] [--legacy]

``chatty`` logs and reports progress before its answer; ``ask`` asks the client for input (elicitation);
``nap`` sleeps ``seconds`` and counts the naps cut short by a cancellation, ``cancelled`` tells that count;
``mismatched`` returns structured content its output schema refuses.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import Context
from pydantic import BaseModel

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mcp_upstream"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), FIXTURES / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Answer(BaseModel):
    colour: str


class Quotient(BaseModel):
    quotient: float


def talking_tools(server) -> None:
    cut_short: list[float] = []

    @server.tool(structured_output=False)
    async def chatty(ctx: Context) -> str:
        """Logs and reports progress, then answers."""
        await ctx.info("working on it")
        await ctx.report_progress(1, 2)
        return "chatted"

    @server.tool(structured_output=False)
    async def ask(ctx: Context) -> str:
        """Asks the client for a colour."""
        answer = await ctx.elicit("Which colour?", Answer)
        return f"asked: {answer.action}"

    @server.tool(structured_output=False)
    async def nap(seconds: float) -> str:
        """Sleeps; a nap cancelled by the client is counted."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cut_short.append(seconds)
            raise
        return "rested"

    @server.tool(structured_output=False)
    def cancelled() -> str:
        """How many naps a cancellation cut short."""
        return str(len(cut_short))

    @server.tool()
    def mismatched() -> Quotient:
        """Structured content that its own output schema refuses."""
        return {"quotient": "not a number"}  # type: ignore[return-value]


if __name__ == "__main__":
    port, fixture, flags = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    module = load(fixture)
    if fixture.startswith("mcpserver"):
        talking_tools(module.server)
    app = module.server.streamable_http_app(json_response="--sse" not in flags)
    if "--legacy" in flags:
        app = module.legacy_only(app)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
