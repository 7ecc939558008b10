"""A call makes no failed import. A module that is not installed is looked for again at every ``import`` (Python
caches no failure): httpcore tried ``sniffio`` several times per request once anyio stopped installing it, 191 µs
each time, 24% of an HTTP-bound tool's throughput. Once warm, calls of an HTTP-bound tool over REST and MCP (both
2026-07-28's stateless ``tools/call``) and of a Python tool raise no ImportError anywhere in the process."""

from __future__ import annotations

import builtins
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from support import running, serving

MODERN = "2026-07-28"  # a stateless tools/call: no session to open first
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}}
TOOLS = """\
tools:
  - id: echo
    name: Echo
    user_description: Echoes.
    ai_description: Echoes a message.
    input_schema: {{type: object, properties: {{message: {{type: string}}}}, required: [message]}}
    binding:
      http:
        method: POST
        url: {url}/echo
        json: {{message: "{{{{ args.message }}}}"}}
  - id: add
    name: Add
    user_description: Adds.
    ai_description: Adds two numbers.
    binding: {{python: "arith:add"}}
"""


async def _echo(request) -> JSONResponse:
    return JSONResponse(await request.json())


def _calls(url: str) -> None:
    for _ in range(3):
        assert httpx.post(f"{url}/tools/echo/call", json={"message": "hi"}, timeout=20).json()["result"] == {
            "message": "hi"}
        assert httpx.post(f"{url}/tools/add/call", json={"a": 1, "b": 2}, timeout=20).json()["result"] == 3
        for tool, arguments in (("echo", {"message": "hi"}), ("add", {"a": 1, "b": 2})):
            params = {"name": tool, "arguments": arguments, "_meta": ENVELOPE}
            answer = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                    "params": params},
                                headers={"Accept": "application/json, text/event-stream", "Mcp-Method": "tools/call",
                                         "MCP-Protocol-Version": MODERN, "Mcp-Name": tool}, timeout=20)
            assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", ""), answer.text


def test_a_warm_call_makes_no_failed_import(write_definitions, monkeypatch):
    with serving(Starlette(routes=[Route("/echo", _echo, methods=["POST"])])) as upstream:
        root = write_definitions({"tools.yaml": TOOLS.format(url=upstream.url),
                                  "python/arith.py": "def add(a: int, b: int) -> int:\n    return a + b\n"})
        with running(root) as served:
            _calls(served.url)  # warm: what a first call imports once
            failed: list[str] = []
            real_import = builtins.__import__

            def watched(name: str, *args: Any, **kwargs: Any) -> Any:
                try:
                    return real_import(name, *args, **kwargs)
                except ImportError:
                    failed.append(name)
                    raise

            monkeypatch.setattr(builtins, "__import__", watched)
            _calls(served.url)
            monkeypatch.setattr(builtins, "__import__", real_import)
    assert failed == []
