"""Relays through an MCP-bound tool (gateway.upstream.mcp.relay): a real FastMCP 4 upstream whose tool reports progress,
logs and asks its user, called through the gateway by the official ``mcp`` client. What the upstream sends
during the call reaches the client that made it (its progress token mapped to the client's own), the client's
answer goes back up, and a caller that cannot answer is refused in words the upstream's tool reports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_upstreams import Upstream, gateway_serving, http_source, sources_yaml, upstream
from support import catalog_for
from test_mcp_upstream_fastcall import VARIANTS

from gateway.errors import DefinitionsInvalid
from gateway.upstream.mcp import client as mcp_client


@pytest.fixture(scope="module")
def fastmcp() -> Iterator[Upstream]:
    with upstream("fastmcp_http.py") as running:
        yield running


@pytest.fixture
def served(tmp_path, fastmcp, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    root = tmp_path / "defs"
    root.mkdir()
    (root / "up.yaml").write_text(sources_yaml(http_source("fm", fastmcp.url)))
    with gateway_serving(root) as server:
        yield server


async def test_progress_logs_and_a_question_of_the_upstream_reach_the_calling_client(served):
    heard: list[Any] = []

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        heard.append(("log", params.level, params.data))

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        heard.append(("progress", done, total, message))

    async def on_elicit(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        heard.append(("asked", params.message))
        return mcp_types.ElicitResult(action="accept", content={"value": "teal"})

    async with streamable_http_client(f"{served.url}/mcp") as (read, write), \
            ClientSession(read, write, logging_callback=on_log, elicitation_callback=on_elicit) as session:
        await session.initialize()
        result = await session.call_tool("chatty", {}, progress_callback=on_progress)
    assert (result.is_error, result.content[0].text) == (False, "accept: teal"), result.content[0].text
    assert heard == [("progress", 1, 2, "asking"), ("log", "info", {"msg": "about to ask", "extra": None}),
                     ("asked", "Favourite colour?")]


async def test_a_stateless_client_answers_an_upstreams_question_in_another_round(served):
    """A 2026-07-28 client (the SDK's Client settles on it): the upstream's question ends the gateway's round with
    input_required; the client answers and calls again, and the gateway answers the upstream's question with it."""
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"value": "ochre"})

    async with Client(f"{served.url}/mcp", elicitation_callback=on_elicit) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("chatty", {})
    assert (result.is_error, result.content[0].text, asked) == (False, "accept: ochre", ["Favourite colour?"])


async def test_a_2025_upstream_asks_inside_the_call_and_hears_the_answer(tmp_path, monkeypatch):
    """An upstream on the 2025-11-25 revision (the SDK's MCPServer, answering calls as SSE) logs, reports progress
    and asks inside the call's stream: each reaches the calling client, whose answer goes back up in time."""
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    heard: list[Any] = []

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        heard.append(("log", params.level, params.data))

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        heard.append(("progress", done, total))

    async def on_elicit(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        heard.append(("asked", params.message, sorted(params.requested_schema["properties"])))
        return mcp_types.ElicitResult(action="accept", content={"colour": "teal"})

    root = tmp_path / "defs"
    root.mkdir()
    with upstream(str(VARIANTS), "mcpserver_http.py", "--sse", "--legacy") as legacy:
        (root / "up.yaml").write_text(sources_yaml(http_source("old", legacy.url)))
        with gateway_serving(root) as served:
            async with streamable_http_client(f"{served.url}/mcp") as (read, write), \
                    ClientSession(read, write, logging_callback=on_log, elicitation_callback=on_elicit) as session:
                await session.initialize()
                chatted = await session.call_tool("chatty", {}, progress_callback=on_progress)
                asked = await session.call_tool("ask", {})
            assert served.gateway.mcp_pool.connections()[0]._client.protocol_version == "2025-11-25"
    assert (chatted.content[0].text, asked.content[0].text) == ("chatted", "asked: accept")
    assert heard == [("log", "info", "working on it"), ("progress", 1, 2), ("asked", "Which colour?", ["colour"])]


async def test_the_upstream_hears_why_a_caller_cannot_answer(served):
    """A client without the elicitation capability, and a REST caller: the upstream's question is refused with
    the gateway's words, which its tool reports as its error; nothing waits."""
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("chatty", {})
    assert result.is_error and "cannot answer elicitation (it did not declare the elicitation capability)" in \
        result.content[0].text
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        rest = (await http.post("/tools/chatty/call", json={})).json()
    assert rest["is_error"] and "The calling client cannot answer elicitation." in rest["text"]


async def test_only_a_session_that_relays_declares_elicitation_and_sampling(served, fastmcp):
    """The gateway's pooled session (it relays) declares both capabilities; the CLI's one-shot session, with no
    caller to relay to, declares neither (the SDK builds what it sends from its callbacks)."""
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        assert (await http.post("/tools/add/call", json={"a": 1, "b": 2})).json()["text"] == "3"
    pooled = served.gateway.mcp_pool.connections()[0]._client
    declared = pooled.session._build_capabilities(pooled.protocol_version)
    assert declared.elicitation is not None and declared.sampling is not None
    config = served.gateway.mcp_pool.connections()[0].config
    async with mcp_client.connected(config) as one_shot:
        declared = one_shot.session._build_capabilities(one_shot.protocol_version)
    assert declared.elicitation is None and declared.sampling is None


async def test_relay_false_keeps_an_upstreams_calls_on_the_json_fast_path(tmp_path, fastmcp, monkeypatch):
    """``relay: false``: its session declares neither capability, an MCP client's call is answered as JSON (the
    fast path), and what the upstream would ask is refused there, never relayed."""
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    root = tmp_path / "defs"
    root.mkdir()
    (root / "up.yaml").write_text(sources_yaml(http_source("fm", fastmcp.url, ", relay: false")))
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}
    with gateway_serving(root) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
            opened = await http.post("/mcp", headers=headers, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "raw", "version": "1"}}})
            headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
            answer = await http.post("/mcp", headers=headers, json=call)
        pooled = served.gateway.mcp_pool.connections()[0]._client
        declared = pooled.session._build_capabilities(pooled.protocol_version)
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["result"]["content"][0]["text"] == "5"
    assert declared.elicitation is None and declared.sampling is None


def test_relay_must_be_a_boolean(tmp_path):
    """A relay that is not true or false is a load problem at its place in the file."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "up.yaml").write_text(sources_yaml(http_source("fm", "http://127.0.0.1:9/mcp", ", relay: 'yes'")))
    with pytest.raises(DefinitionsInvalid, match=r"up.yaml:3:\d+: sources\[0\].mcp.relay: expected boolean, got string"):
        catalog_for(root)
