"""MCP at ``/mcp``: streamable HTTP on the official SDK's low-level ``Server``, fed by the catalog.

The SDK owns the protocol: both revisions it serves (the 2025-11-25 ``initialize`` handshake with sessions, and
the stateless 2026-07-28 per-request envelope), validation of every message, and the transports. This module
only answers ``tools/list`` and ``tools/call`` from ``gateway.catalog`` and tells clients when it changes:

- ``tools/list``: tools whose scope allows server execution (plus browser tools when the request names a
  browser session in ``_meta["gateway/session"]``), filtered by the caller's API key, in pages of
  ``PAGE_SIZE``. Entries come from ``gateway.formats.mcp``, computed once per catalog.
- ``tools/call``: through ``invoke``. Argument and tool failures are ``isError`` results an LLM can read;
  an unknown tool, or one the key may not use, is a JSON-RPC error.
- POSTed messages are screened before the SDK reads them (``screen_message``): a body the gateway refuses
  anywhere (not UTF-8, duplicate keys, lone surrogates) is a parse error, and a request whose id is not a
  string or an integer is an Invalid Request (-32600, ``"id": null``, HTTP 400) on both revisions, where the
  2025-11-25 transport would answer 202 and nothing. A client gone mid-body is one debug line.
- catalog changes: every 2025-11-25 session hears ``notifications/tools/list_changed`` on its GET stream, and
  every 2026-07-28 ``subscriptions/listen`` stream gets the same event from the subscription bus.

Responses are JSON, not SSE (``json_response=True``): a tool call here sends no progress notifications, and a
JSON body costs a fraction of an SSE stream per request. Sessions stay stateful so that 2025-11-25 clients
have a GET stream to hear about changes on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import X_MCP_HEADER_KEY
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, CallToolRequestParams, PaginatedRequestParams
from opentelemetry import trace
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ..argerrors import got
from ..catalog import Catalog, Tool
from ..context import CallContext
from ..errors import BadRequest, GatewayError, Unauthorized
from ..formats import mcp as mcp_format
from ..formats import render_tools
from ..invoke import ToolResult, invoke
from ..runtime import Gateway
from .auth import SCOPE_KEY, Caller, authenticate, unknown_tool
from .bodies import parse_json, read_body
from .errors import dumps, gateway_error, refused
from .mcp_sessions import SharedSessions
from .release import release

log = logging.getLogger("gateway.mcp")
PAGE_SIZE = 500
TRACEPARENT_META = "traceparent"  # _meta key of a W3C trace context (the MCP SDK's own key), before the header
SESSION_META = "gateway/session"  # _meta key naming the browser bridge session that may run client tools
CONVERSATION_META = "gateway/conversation_id"


def _version() -> str:
    return release() or "0"


class _GatewayServer(Server[Any]):
    """The low-level Server, advertising ``tools.listChanged`` to handshake-era clients too.

    The streamable-HTTP manager builds each session's ``initialize`` result from
    ``create_initialization_options()`` without arguments, so the default is where the flag must be set.
    (2026-07-28 clients see it because ``subscriptions/listen`` is served.)
    """

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     experimental_capabilities, extensions)


class McpSurface:
    """The MCP server for one gateway: an ASGI app (the ``/mcp`` endpoint), with ``run()`` its lifetime."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self.server = _GatewayServer(
            "tool-gateway",
            version=_version(),
            title="Tool gateway",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=self.listen,
            get_tool_input_schema=self.input_schema,
            # 2026-07-28 clients may cache listings: not across keys (each sees its toolsets), and never past a
            # reload, which they hear about through subscriptions/listen.
            cache_hints={"tools/list": CacheHint(ttl_ms=0, scope="private")},
        )
        # The SDK wraps every message in an OpenTelemetry span; with no tracer provider configured (before the
        # app is built) that span is a no-op costing ~7% of a tools/call, so it is dropped.
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            self.server.middleware = [m for m in self.server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
        self.server.middleware.append(self.track_connection)
        # Handshake-era connections with a session (and so a GET stream), by the SDK's Connection object.
        self.connections: set[Any] = set()
        self.manager = StreamableHTTPSessionManager(
            self.server, json_response=True, max_request_body_size=gateway.settings.max_body_bytes,
            # Host and Origin are checked app-wide (origins.OriginGuard); given explicitly, the SDK's settings
            # are not rebuilt (a pydantic model) on every request.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        # 2025-11-25 sessions any replica serves, from records in the shared state (gateway.server.mcp_sessions).
        self.sessions = SharedSessions(gateway.state, self.manager, self.connections)
        gateway.on_change(self.catalog_changed)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self.manager.run(), self.sessions.running():
            try:
                yield
            finally:
                self.listen.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate, leave the caller in the scope for the handlers, screen a POSTed message, and hand over
        to the SDK."""
        client = scope.get("client")
        body = None
        try:
            scope[SCOPE_KEY] = authenticate(self.gateway.settings, Headers(scope=scope), client[0] if client else None)
        except Unauthorized as exc:
            refused(Request(scope), exc)
            await gateway_error(exc)(scope, receive, send)
            return
        if scope["method"] == "POST":
            try:
                body = await read_body(Request(scope, receive), self.gateway.settings.max_body_bytes)
                screen_message(body)
            except GatewayError as exc:
                await _jsonrpc_error(exc, scope, receive, send)
                return
            receive = _replay(body, receive)
        await self.sessions.handle(scope, receive, send, body, scope[SCOPE_KEY].name)

    # -- handlers -------------------------------------------------------------------------------------------

    async def list_tools(self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams) -> dict[str, Any]:
        catalog = self.gateway.catalog
        tools = self.visible(catalog, _caller(ctx), _session(ctx, params.meta))
        start = _offset(params.cursor, len(tools))
        entries = self.entries(catalog)
        page: dict[str, Any] = {"tools": [entries[tool.id] for tool in tools[start:start + PAGE_SIZE]],
                                "resultType": "complete"}
        if start + PAGE_SIZE < len(tools):
            page["nextCursor"] = str(start + PAGE_SIZE)
        return page

    async def call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> dict[str, Any]:
        catalog = self.gateway.catalog
        caller = _caller(ctx)
        tool = catalog.tools.get(params.name)
        # A tool the key may not use is unknown to it, as on REST: neither told apart nor suggested.
        if tool is None or tool.id not in self.entries(catalog) or not caller.may_use(tool):
            known = [t.id for t in self.visible(catalog, caller, _session(ctx, params.meta))]
            raise MCPError(INVALID_PARAMS, str(unknown_tool(params.name, known)))
        result = await invoke(catalog, tool.id, params.arguments, _context(ctx, caller, params.meta))
        return self.call_result(tool, result)

    def input_schema(self, name: str) -> Any:
        """For the SDK's ``Mcp-Param-*`` header check (2026-07-28): the listed schema of a tool that declares
        ``x-mcp-header`` parameters; None (nothing to check) for every other tool, without walking its schema."""
        catalog = self.gateway.catalog
        entries = self.entries(catalog)
        annotated = catalog.memo("mcp:x-mcp-header", lambda: {
            tool_id: entry["inputSchema"] for tool_id, entry in entries.items()
            if X_MCP_HEADER_KEY in json.dumps(entry["inputSchema"])})
        return annotated.get(name)

    # -- catalog views --------------------------------------------------------------------------------------

    def entries(self, catalog: Catalog) -> dict[str, dict[str, Any]]:
        """MCP tool entries by id, once per catalog; a tool MCP cannot express is absent (logged once)."""
        return catalog.memo("mcp:entries", lambda: _entries(catalog))

    def visible(self, catalog: Catalog, caller: Caller, session: str | None) -> list[Tool]:
        # Once per catalog and kind of caller (what may_use reads): walking 10,000 tools took ~50 ms a listing.
        key = ("mcp:visible", caller.auth, caller.key is not None, caller.toolsets, bool(session))
        entries = self.entries(catalog)
        return catalog.memo(key, lambda: [
            tool for tool in catalog.tools.values()
            if tool.id in entries and (tool.scope.runs_on_server or session) and caller.may_use(tool)
        ])

    def call_result(self, tool: Tool, result: ToolResult) -> dict[str, Any]:
        body: dict[str, Any] = {"content": [{"type": "text", "text": result.text}], "isError": result.is_error,
                                "resultType": "complete"}
        if result.structured:
            body["structuredContent"] = mcp_format.structured_content(tool, result.value)
        return body

    # -- change notifications -------------------------------------------------------------------------------

    async def track_connection(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: remember each live handshake-era session, to tell it when the tools change.

        The SDK offers a handler no public handle on its connection's lifetime; ``ServerSession`` keeps the
        ``Connection`` as ``_connection`` (mcp 2.3). Its ``exit_stack`` unwinds when the session ends, which is
        when we forget it. Sessionless connections (2026-07-28, stateless) have no stream to notify.
        """
        connection = ctx.session._connection
        if connection.session_id is not None and connection not in self.connections:
            self.connections.add(connection)
            connection.exit_stack.callback(self.connections.discard, connection)
        return await call_next(ctx)

    async def catalog_changed(self, catalog: Catalog) -> None:
        async with anyio.create_task_group() as group:
            for connection in list(self.connections):
                group.start_soon(connection.send_tool_list_changed)  # best effort: never raises
        await self.bus.publish(ToolsListChanged())


def screen_message(body: bytes) -> None:
    """Refuse, before the SDK reads it, a POSTed message the SDK would mishandle.

    The body is parsed as every gateway body is (``parse_json``: UTF-8, no duplicate keys, no lone surrogates).
    A request (it has a ``method``) whose ``id`` is not a string or an integer — MCP allows no null id, and a
    fraction or an object is no id at all — is an Invalid Request: the 2025-11-25 transport would take it for a
    notification and answer 202 with nothing.
    """
    message = parse_json(body)
    if isinstance(message, dict) and "method" in message and "id" in message:
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
            raise InvalidRequest(f"Invalid Request: a request's id must be a string or an integer, not "
                                 f"{got(request_id)}.")


class InvalidRequest(BadRequest):
    """A JSON message that is not a valid JSON-RPC request (JSON-RPC's -32600, not a parse error)."""


async def _jsonrpc_error(exc: GatewayError, scope: Scope, receive: Receive, send: Send) -> None:
    """A refused message, answered as JSON-RPC does when it cannot tell the request's id: ``"id": null``."""
    code = INVALID_REQUEST if isinstance(exc, InvalidRequest) or exc.status != 400 else PARSE_ERROR
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": str(exc)}}
    await Response(dumps(body), exc.status, media_type="application/json")(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the already-read body once, then whatever the connection says next."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _entries(catalog: Catalog) -> dict[str, dict[str, Any]]:
    entries = {}
    for tool in catalog.tools.values():
        rendered = render_tools([tool], "mcp")  # memoised on the tool: a reload re-renders only what changed
        for diagnostic in rendered.diagnostics:
            log.warning("%s", diagnostic)
        if rendered.tools:
            entries[tool.id] = rendered.tools[0]
    return entries


def _caller(ctx: ServerRequestContext[Any]) -> Caller:
    return ctx.request.scope[SCOPE_KEY]


def _session(ctx: ServerRequestContext[Any], meta: Any) -> str | None:
    """The browser bridge session a request names: ``_meta["gateway/session"]``, else ``X-Gateway-Session``."""
    return _meta_text(meta, SESSION_META) or ctx.request.headers.get("x-gateway-session")


def _meta_text(meta: Any, key: str) -> str | None:
    """A gateway ``_meta`` entry, which must be a string when present (else INVALID_PARAMS naming it)."""
    value = (meta or {}).get(key)
    if value is not None and not isinstance(value, str):
        raise MCPError(INVALID_PARAMS, f'_meta["{key}"] must be a string, not {type(value).__name__}.')
    return value


def _context(ctx: ServerRequestContext[Any], caller: Caller, meta: Any) -> CallContext:
    headers = ctx.request.headers
    session = _session(ctx, meta)
    return CallContext(
        conversation_id=_meta_text(meta, CONVERSATION_META) or headers.get("x-conversation-id"),
        user=caller.user(headers.get("x-user")),
        tool_call_id=str(ctx.request_id) if ctx.request_id is not None else None,
        session=session,
        side="client" if session else "server",  # a named page runs scope-all tools
        surface="mcp",
        caller=caller.name,
        traceparent=_meta_text(meta, TRACEPARENT_META) or headers.get("traceparent"),
    )


def _offset(cursor: str | None, total: int) -> int:
    """Where a page starts. A catalog that shrank between pages ends the listing; list_changed follows."""
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise MCPError(INVALID_PARAMS, f"Invalid cursor {cursor!r}: list the tools again from the start.")
    return min(int(cursor), total)

