"""The federation matrix: every upstream of ``matrix.PEERS`` (FastMCP 2/3/4 over HTTP in each mode and stdio, the
``mcp`` SDK's MCPServer, the npm reference servers, a TypeScript SDK example), declared as a ``sources:`` entry of
one gateway, is listed and called through the gateway's REST and MCP — on both revisions our /mcp speaks — and what
it answers is compared block by block with the official client's direct call to it; then it restarts, and the
gateway must carry on. Each check's outcome goes into docs/interop.md's compatibility table (``compat_table.py``)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from harness import Federation, Running, dumped, listed
from matrix import PEERS, Peer
from mcp import Client

REVISIONS = ("legacy", "2026-07-28")  # our /mcp: the 2025-11-25 handshake, and 2026-07-28
LISTING_POLLS = 150  # every 0.2 s: a bound of 30 s for the gateway's listing to follow the upstream's


def peers_for(check: str) -> Any:
    """Every upstream, as a parameter: skipped when not installed, xfail(strict) where the gateway fails it today."""
    params = []
    for peer in PEERS:
        marks = [pytest.mark.skipif(bool(peer.missing), reason=peer.missing or "")]
        if reason := peer.expected_failures.get(check):
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        params.append(pytest.param(peer, id=peer.key, marks=marks))
    return pytest.mark.parametrize("peer", params)


def upstream(federation: Federation, peer: Peer) -> Running:
    running = federation.upstreams[peer.key]
    assert not running.problems, running.problems
    assert running.direct is not None
    return running


async def rest_call(federation: Federation, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.post(f"{federation.url}/tools/{tool}/call", json=arguments)
    assert response.status_code == 200, (tool, response.status_code, response.text)
    return response.json()


async def mcp_calls(federation: Federation, running: Running, mode: str) -> list[dict[str, Any]]:
    async with Client(f"{federation.url}/mcp", mode=mode) as client:
        return [dumped(await client.call_tool(f"{running.peer.key}_{tool}", arguments))
                for tool, arguments in running.calls]


@peers_for("listed")
async def test_listed(federation, peer):
    """REST and MCP (both revisions) list the upstream's tools under its prefix, with its descriptions and
    schemas. (An upstream may add tools once a session is initialized, telling list_changed, as server-everything
    does: the gateway's listing is awaited until it follows, within a bound.)"""
    running = upstream(federation, peer)
    prefix = f"{peer.key}_"
    expected = {prefix + name: tool for name, tool in running.direct.tools.items()}
    async with httpx.AsyncClient(base_url=federation.url, timeout=60) as http:
        for _ in range(LISTING_POLLS):
            on_rest = sorted(tool["id"] for tool in (await http.get("/tools")).json()["tools"]
                             if tool["id"].startswith(prefix))
            if on_rest == sorted(expected):
                break
            await anyio.sleep(0.2)
    assert on_rest == sorted(expected)
    for mode in REVISIONS:
        async with Client(f"{federation.url}/mcp", mode=mode) as client:
            tools = {tool.name: listed(tool) for tool in (await client.list_tools()).tools
                     if tool.name.startswith(prefix)}
        assert tools == expected, mode


@peers_for("called")
async def test_called(federation, peer):
    """Each call goes through REST and MCP (both revisions) and succeeds or fails as the upstream's own answer
    does."""
    running = upstream(federation, peer)
    failed = [answer["isError"] for answer in running.direct.answers]
    on_rest = [await rest_call(federation, f"{peer.key}_{tool}", arguments) for tool, arguments in running.calls]
    assert [answer["is_error"] for answer in on_rest] == failed, on_rest
    for mode in REVISIONS:
        assert [answer["isError"] for answer in await mcp_calls(federation, running, mode)] == failed, mode


@peers_for("content")
async def test_content(federation, peer):
    """What each call answers through the gateway is what the upstream answers directly, block by block (types,
    text, data, MIME types), with the same structuredContent and isError: on MCP (both revisions), and as REST's
    ``content`` (an error as REST's ``text``)."""
    running = upstream(federation, peer)
    for mode in REVISIONS:
        assert await mcp_calls(federation, running, mode) == running.direct.answers, mode
    for (tool, arguments), direct in zip(running.calls, running.direct.answers, strict=True):
        answer = await rest_call(federation, f"{peer.key}_{tool}", arguments)
        if direct["isError"]:  # REST's error result carries the upstream's words as its text, without the blocks
            assert answer["text"] == "\n".join(block["text"] for block in direct["content"]), (tool, answer)
        else:
            assert answer["content"] == direct["content"], (tool, answer)


@peers_for("restart")
def test_restart(federation, restarts, peer):
    """The upstream is killed and started again; the gateway's first call after (an HTTP upstream: as soon as it
    listens; stdio: once the gateway spawned it again) answers as the upstream did before: a session the restarted
    server does not know is renewed and the call sent again (``Running.restarted``)."""
    upstream(federation, peer)
    answer, expected = restarts[peer.key], federation.upstreams[peer.key].direct.answers[0]
    assert isinstance(answer, dict), answer
    assert (answer["is_error"], answer.get("content")) == (expected["isError"], expected["content"]), answer
