"""An upstream's ``tools/list`` read by the gateway on a streamable-HTTP session (the pooled one, or a build's
own), within the source's bounds, and parsed off the event loop.

The SDK's session reads a tools/list answer whole, however long, and parses it into pydantic models on the loop
it runs on: the gateway's, which serves every other call. 100,000 tools (24 MB) held that loop for seconds. Here
each page is one POST made as ``gateway.upstream.mcp.fastcall`` makes a call (the session's HTTP client and stamps), read
up to ``source_max_bytes``; a large answer's JSON is decoded in a worker thread, and there each tool is validated
on its own (one pydantic call per page would hold the GIL, and so the loop, for the whole page) and its schemas'
depth checked (``source_max_depth``); the tools are counted before they are validated, so a listing past
``source_max_tools`` is refused at the page that passes it. The session then takes the page as if it had listed
it (``_absorb_tool_listing``: the output schemas it checks results with).

Stdio sessions, and the fast path turned off, list through the SDK (``gateway.upstream.mcp.client.all_tools``): bounded
the same but for the bytes, each page parsed whole by the SDK.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from . import fastcall as mcp_fastcall
from .client import MAX_PAGES, FastSession, ListingTooLarge, all_tools, connected, counted, shaped, unreachable
from .config import UpstreamConfig


class Beside:
    """The ``FastCall`` beside a session being entered: ``opened`` (``connected``'s ``on_http``) hears the
    mcp-session-id the upstream's initialize is answered with on the session's HTTP client; ``fast`` makes the
    ``FastCall`` once the client is entered (None for a stdio session)."""

    def __init__(self, url: str | None):
        self.url = url
        self.http: httpx2.AsyncClient | None = None
        self.session_id: str | None = None

    def opened(self, http: httpx2.AsyncClient) -> None:
        self.http = http
        http.event_hooks["response"].append(self._heard)

    async def _heard(self, response: httpx2.Response) -> None:
        self.session_id = response.headers.get("mcp-session-id") or self.session_id

    def fast(self, client: Client) -> mcp_fastcall.FastCall | None:
        if self.http is None or self.url is None:
            return None
        self.http.event_hooks["response"].remove(self._heard)  # initialize was answered
        return mcp_fastcall.FastCall(self.http, self.url, FastSession(client, self.session_id))


def list_once(config: UpstreamConfig, timeout: float, auth: httpx2.Auth | None = None) -> list[mcp_types.Tool]:
    """The upstream's tools through a session of the calling thread's own (it must run no event loop)."""

    async def listing() -> list[mcp_types.Tool]:
        beside = Beside(config.url)
        async with connected(config, on_http=beside.opened, auth=auth) as client:
            fast = beside.fast(client)
            try:
                return await list_tools(client, fast, config)
            finally:
                if fast is not None:
                    fast.close()

    async def bounded() -> list[mcp_types.Tool]:
        try:
            return await asyncio.wait_for(listing(), timeout)
        except (TimeoutError, ListingTooLarge):
            raise
        except Exception as exc:  # noqa: BLE001 — said in words naming the upstream
            raise unreachable(config, exc) from None

    return asyncio.run(bounded())


async def list_tools(client: Client, fast: mcp_fastcall.FastCall | None,
                     config: UpstreamConfig) -> list[mcp_types.Tool]:
    """Every tool the upstream lists, through ``fast`` when it stands beside ``client``'s session."""
    if fast is None or not mcp_fastcall.ENABLED or fast.session.client is not client:
        return await all_tools(client, config)
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        try:
            result = await fast.request("tools/list", {"cursor": cursor} if cursor is not None else {},
                                        config.bounds.bytes)
        except mcp_fastcall.TooLarge:
            raise ListingTooLarge(config.bounds.too_big(config.label)) from None
        except mcp_fastcall.Handover:  # a redirect: the SDK's session follows its own rules
            return await all_tools(client, config)
        listed = result.get("tools")
        counted(config, len(tools) + (len(listed) if isinstance(listed, list) else 0))
        page = await asyncio.to_thread(_page, result, config)
        complete = cursor is None and page.next_cursor is None
        tools += client.session._absorb_tool_listing(page, complete=complete).tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _page(result: dict[str, Any], config: UpstreamConfig) -> mcp_types.ListToolsResult:
    """One answer's tools, each validated on its own (in a worker thread: the loop gets the GIL between them),
    and their schemas' depth checked."""
    listed = result.get("tools")
    if not isinstance(listed, list):
        raise MCPError(code=mcp_types.PARSE_ERROR, message="Failed to parse its tools/list answer: no tools list")
    try:
        tools = [mcp_types.Tool.model_validate(tool) for tool in listed]
        page = mcp_types.ListToolsResult.model_validate({**result, "tools": []})  # the cursor, _meta: as the SDK
    except ValidationError as exc:
        raise MCPError(code=mcp_types.PARSE_ERROR, message=f"Failed to parse its tools/list answer: {exc}") from None
    shaped(config, tools)
    page.tools = tools
    return page
