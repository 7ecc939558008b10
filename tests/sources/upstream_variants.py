"""A fixture upstream (``tests/fixtures/mcp_upstream/<FIXTURE>``) served on 127.0.0.1:<PORT> answering with JSON
bodies or (``--sse``) with SSE streams, and, on the MCPServer (FastMCP) one, tools that talk during a call:

    python upstream_variants.py PORT FIXTURE [--sse] [--legacy] [--affinity]

``chatty`` logs and reports progress before its answer; ``ask`` asks the client for input (elicitation);
``nap`` sleeps ``seconds`` and counts the naps cut short by a cancellation, ``cancelled`` tells that count;
``mismatched`` returns structured content its output schema refuses.

With ``--affinity`` it behaves as a server behind a load balancer with cookie affinity: every answer sets a
cookie, and a request on a session (``mcp-session-id``) without it is refused (403).
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


def affinity(app):
    """The app behind a cookie-affinity load balancer (see the module's docstring)."""

    async def balanced(scope, receive, send):
        headers = dict(scope.get("headers") or ())
        if scope["type"] == "http" and b"mcp-session-id" in headers and b"affinity=up-1" not in headers.get(
                b"cookie", b""):
            await send({"type": "http.response.start", "status": 403, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"no affinity cookie"})
            return

        async def with_cookie(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", b"affinity=up-1")]}
            await send(message)

        await app(scope, receive, with_cookie)

    return balanced


if __name__ == "__main__":
    port, fixture, flags = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    module = load(fixture)
    if fixture.startswith("mcpserver"):
        talking_tools(module.server)
    app = module.server.streamable_http_app(json_response="--sse" not in flags)
    if "--legacy" in flags:
        app = module.legacy_only(app)
    if "--affinity" in flags:
        app = affinity(app)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
