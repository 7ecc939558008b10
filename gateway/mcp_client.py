"""One session with an upstream MCP server through the official client: entering ``mcp.Client`` for an
``UpstreamConfig`` (streamable HTTP with its headers, or a spawned stdio server with its env, secrets filled in
at connect time), listing every page of its tools, and its failures in words that name it.

``gateway.mcp_pool`` holds such sessions for the gateway; ``list_once`` and ``call_once`` open one for a single
request where no gateway runs (the first build, before the server's loop starts; the CLI).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from . import secrets as secret_store
from .mcp_config import UpstreamConfig

SSE_READ_TIMEOUT_S = 300.0  # a listen or GET stream stays open this long without a byte (the SDK's default)
CALL_READ_TIMEOUT_S = 3600.0  # the tool's own timeout (invoke) bounds a call; this only lifts the client's
MAX_PAGES = 100  # a paginator that never ends cannot hold a build


class UpstreamUnavailable(Exception):
    """The upstream cannot be reached now; the message names it and says why (never a secret)."""


def fingerprint(tools: list[mcp_types.Tool]) -> str:
    dumped = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
    return hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()


def reason(exc: BaseException) -> str:
    """What went wrong, in words, from the first leaf of an exception group (the SDK's task groups wrap)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.ConnectError):
        return "could not connect (is it running?)"
    if isinstance(exc, httpx2.TimeoutException | TimeoutError) or (
            isinstance(exc, MCPError) and exc.error.code == mcp_types.REQUEST_TIMEOUT):  # the client gave up waiting
        return "it did not answer in time"
    if isinstance(exc, httpx2.HTTPError):
        return f"HTTP error: {type(exc).__name__}: {exc}"
    if isinstance(exc, MCPError):
        return f"it answered with error {exc.error.code}: {exc.error.message}"
    if isinstance(exc, secret_store.SecretsMissing):
        return str(exc)
    if isinstance(exc, OSError):
        return f"could not start it: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


def forgotten(exc: MCPError) -> bool:
    """Whether the upstream refused a request for not knowing its session (it restarted, or expired it): HTTP
    404, which the SDK reports as "Session terminated" or as the server's own error ("Session not found")."""
    message = exc.error.message.lower()
    return exc.error.code == mcp_types.INVALID_REQUEST and "session" in message and any(
        word in message for word in ("terminated", "not found", "expired", "invalid"))


async def all_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@contextlib.asynccontextmanager
async def connected(config: UpstreamConfig, on_message: Callable[[Any], Any] | None = None
                     ) -> AsyncIterator[Client]:
    """An entered ``mcp.Client`` for ``config``: enter and leave it in one task."""
    headers, env = config.rendered()
    common: dict[str, Any] = {"mode": "auto", "cache": None, "read_timeout_seconds": config.connect_timeout_s,
                              "message_handler": on_message,
                              "client_info": mcp_types.Implementation(name="tool-gateway", version="1")}
    if config.url is None:
        assert config.command is not None
        parameters = StdioServerParameters(command=config.command, args=list(config.args), env=env or None,
                                           cwd=config.cwd)
        async with Client(parameters, **common) as client:
            yield client
        return
    timeout = httpx2.Timeout(config.connect_timeout_s, read=SSE_READ_TIMEOUT_S)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http, \
            Client(streamable_http_client(config.url, http_client=http), **common) as client:
        yield client


def list_once(config: UpstreamConfig, timeout: float) -> list[mcp_types.Tool]:
    """The upstream's tools through a session of the calling thread's own (it must run no event loop)."""

    async def listing() -> list[mcp_types.Tool]:
        async with connected(config) as client:
            return await all_tools(client)

    async def bounded() -> list[mcp_types.Tool]:
        try:
            return await asyncio.wait_for(listing(), timeout)
        except TimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 — said in words naming the upstream
            raise UpstreamUnavailable(f"{config.label} is unreachable: {reason(exc)}") from None

    return asyncio.run(bounded())


async def call_once(config: UpstreamConfig, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
    """One call through a session of its own: where no gateway runs (the CLI's ``call``)."""
    try:
        async with connected(config) as client:
            return await client.call_tool(name, arguments, read_timeout_seconds=CALL_READ_TIMEOUT_S)
    except MCPError:
        raise
    except Exception as exc:  # noqa: BLE001 — said in words naming the upstream
        raise UpstreamUnavailable(f"{config.label} is unreachable: {reason(exc)}") from None
