"""MCP at ``/mcp``: streamable HTTP on the official SDK's low-level ``Server``, fed by the catalog.

The SDK owns the protocol: both revisions it serves (the 2025-11-25 ``initialize`` handshake with sessions, and
the stateless 2026-07-28 per-request envelope), validation of every message, and the transports. This module
only answers ``tools/list`` and ``tools/call`` from ``gateway.catalog.build`` and tells clients when it changes:

- ``tools/list``: tools whose scope allows server execution (plus browser tools when the request names a
  browser session in ``_meta["gateway/session"]``), filtered by the caller's API key, in pages of
  ``PAGE_SIZE``. Entries come from ``gateway.formats.mcp``, computed once per catalog.
- ``tools/call``: through ``invoke``. Argument and tool failures are ``isError`` results an LLM can read;
  an unknown tool, or one the key may not use, is a JSON-RPC error.
- POSTed messages are screened before the SDK reads them (``screen_message``): a body the gateway refuses
  anywhere (not UTF-8, duplicate keys, lone surrogates) is a parse error, and a request whose id is not a
  string or an integer is an Invalid Request (-32600, ``"id": null``, HTTP 400) on both revisions, where the
  2025-11-25 transport would answer 202 and nothing. A client gone mid-body is one debug line.
- a call of a tool that may talk to its client while it runs (``Tool.talks``: progress, logs, elicitation,
  sampling, relays of an upstream's) goes to the SDK, which answers it as SSE when the client accepts that
  (``gateway.server.mcp.sdk``, ``gateway.server.mcp.channel``); ``logging/setLevel`` sets what its logs send.
- a single ``tools/call`` or ``tools/list`` request in the plainest form real clients send is answered by the
  fast path (``gateway.server.mcp.fast``) with the same handlers, checks and bytes, without the SDK's per-request
  machinery; everything else goes to the SDK.
- catalog changes: every 2025-11-25 session hears ``notifications/tools/list_changed`` on its GET stream, and
  every 2026-07-28 ``subscriptions/listen`` stream gets the same event from the subscription bus.
- prompts, resources and completion (``Catalog.content``) are the SDK's to answer, with the handlers of
  ``gateway.server.mcp.content``; the fast path stays tools-only.

The SDK's server side (``gateway.server.mcp.sdk``) costs ~0.5 s of CPU to import, so it is imported in a thread
when the app starts, and only a request that needs it waits for it: REST and the fast path serve at once.
The fast path needs only ``mcp_types`` (imported first, in the same thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ... import __version__
from ...catalog.build import Catalog, Tool
from ...client_channel import SILENT, ClientChannel
from ...context import CallContext
from ...errors import BadRequest, GatewayError, Unauthorized
from ...formats import mcp as mcp_format
from ...formats import render_tools
from ...invoke import invoke
from ...results import ToolResult
from ...runtime.gateway import Gateway
from ...schema.argerrors import got
from ..http.auth import SCOPE_KEY, Caller, authenticate, unknown_tool
from ..http.bodies import first_headers, parse_json, receive_body
from ..http.errors import dumps, gateway_error, refused
from ..http.sending import VARY_ORIGIN, adding
from .fast import FastPath
from .messages import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ProtocolError, Types, import_types

if TYPE_CHECKING:
    from .sdk import SdkServer  # imported in a thread once the app starts (``run``)

log = logging.getLogger("gateway.mcp")
PAGE_SIZE = 500
TRACEPARENT_META = "traceparent"  # _meta key of a W3C trace context (the MCP SDK's own key), before the header
SESSION_META = "gateway/session"  # _meta key naming the browser bridge session that may run client tools
CONVERSATION_META = "gateway/conversation_id"
BODY_KEY = "gateway.mcp.body"  # where a POST's body waits for the SDK, once read and screened
TALKS_KEY = "gateway.mcp.talks"  # set when a POST calls a tool that may talk to its client (``McpSurface.talks``)
X_MCP_HEADER_KEY = "x-mcp-header"  # the SDK's schema annotation for Mcp-Param-* headers (mcp.shared.inbound)


class McpSurface:
    """The MCP server for one gateway: an ASGI app (the ``/mcp`` endpoint), with ``run()`` its lifetime."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        # The SDK wraps every message in an OpenTelemetry span; with no tracer provider configured (before the
        # app is built) that span is a no-op costing ~7% of a tools/call, so it is dropped — and then nothing of
        # the SDK's per-request work is left that the fast path would skip. With a provider, every request takes
        # the SDK (and its span).
        self.traced = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        self.fast = FastPath(self)
        self.sdk: SdkServer | None = None  # once imported and running (``run``)
        self._types_ready: asyncio.Future[Types] | None = None
        self._sdk_ready: asyncio.Future[SdkServer] | None = None
        gateway.on_change(self.catalog_changed)

    version = __version__  # the release named to MCP clients

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The SDK's lifetime: imported in a thread, then run in a task of its own until the app stops."""
        stop = asyncio.Event()
        self._types_ready = asyncio.get_running_loop().create_future()
        self._sdk_ready = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._serve_sdk(stop), name="mcp-sdk")
        try:
            yield
        finally:
            stop.set()
            if not self._sdk_ready.done():
                task.cancel()  # still importing: nothing runs yet that needs a graceful end
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _serve_sdk(self, stop: asyncio.Event) -> None:
        assert self._types_ready is not None and self._sdk_ready is not None
        try:
            types = await asyncio.to_thread(import_types)
            self.fast.types_loaded(types)
            self._types_ready.set_result(types)
            sdk = (await asyncio.to_thread(_import_sdk)).SdkServer(self)
            async with sdk.run():
                self.sdk = sdk
                self._sdk_ready.set_result(sdk)
                await stop.wait()
        except BaseException as exc:
            if isinstance(exc, Exception):  # said now, not at shutdown: every /mcp request needing it will fail
                log.critical("the MCP SDK could not be started; /mcp requests that need it fail: %r", exc)
            for future in (self._types_ready, self._sdk_ready):
                if future.done():
                    continue
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                else:
                    future.cancel()
            raise
        finally:
            self.sdk = None

    async def loaded_sdk(self) -> SdkServer:
        """The SDK's server, once imported and running (the first requests after a start wait for it)."""
        return self.sdk or await _awaited(self._sdk_ready)

    async def loaded_types(self) -> Types:
        """What the fast path needs of ``mcp_types``, once imported (the first requests after a start wait)."""
        return self.fast.types or await _awaited(self._types_ready)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate, leave the caller in the scope for the handlers, screen a POSTed message, answer it on
        the fast path when it can, and hand over to the SDK otherwise. A POST ``front.Front`` already took
        (``fast_post``) arrives here only for the SDK, its body in the scope."""
        if scope["method"] == "POST":
            if BODY_KEY not in scope and await self._take(scope, receive, send, None):
                return
            receive = _replay(scope[BODY_KEY], receive)
        elif not await self._authenticated(scope, receive, send, first_headers(scope)):
            return
        sdk = await self.loaded_sdk()
        await sdk.handle(scope, receive, send, scope.get(BODY_KEY), scope[SCOPE_KEY].name, TALKS_KEY in scope)

    async def fast_post(self, scope: Scope, receive: Receive, send: Send, added: list[tuple[bytes, bytes]]) -> bool:
        """``front.Front``'s hook: a POST to ``/mcp`` that the fast path answers (or that is refused: a bad key or
        body) is answered below Starlette's exception and routing layers; any other goes on through them to
        ``__call__``, with its caller and body left in the scope."""
        if scope["method"] != "POST" or scope["path"] != "/mcp" or scope.get("root_path"):
            return False
        return await self._take(scope, receive, send, added)

    async def _take(self, scope: Scope, receive: Receive, send: Send, added: list[tuple[bytes, bytes]] | None) -> bool:
        """Authenticate and screen a POST, answering a refusal, then answer it on the fast path; False (its caller
        and body left in the scope) when the SDK is to answer it. ``added``: the headers ``Front`` adds to every
        answer when it left them to this (``fast_post``), None when its ``send`` adds them."""
        headers = first_headers(scope)
        refusing = send if added is None else adding(send, added, vary_origin=True)
        if not await self._authenticated(scope, receive, refusing, headers):
            return True
        try:
            body = await receive_body(scope, receive, headers.get("content-length", ""),
                                      self.gateway.settings.max_body_bytes)
            message = screen_message(body)
        except GatewayError as exc:
            await _jsonrpc_error(exc, scope, receive, refusing)
            return True
        scope[BODY_KEY] = body
        if self.talks(message):  # the SDK's, to answer as SSE: the fast path answers JSON only
            scope[TALKS_KEY] = True
            return False
        # A fast answer carries them itself, as adding() would place them: no wrapper per message.
        return await self.fast.answer(scope, send, message, headers, () if added is None else (VARY_ORIGIN, *added))

    async def _authenticated(self, scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str]) -> bool:
        """Leave the caller in the scope for the handlers; False once a refused key was answered (401)."""
        client = scope.get("client")
        try:
            scope[SCOPE_KEY] = authenticate(self.gateway.settings, headers, client[0] if client else None)
        except Unauthorized as exc:
            refused(Request(scope), exc)
            await gateway_error(exc)(scope, receive, send)
            return False
        return True

    # -- handlers (the SDK's and the fast path's) -----------------------------------------------------------

    def list_view(self, caller: Caller, headers: Mapping[str, str], params: Any) -> tuple[Catalog, tuple[Any, ...], int]:
        """What a ``tools/list`` lists: the catalog, which of its ``visible`` lists, and where the page starts."""
        catalog = self.gateway.catalog
        key = _visible_key(caller, _session(headers, params.meta))
        return catalog, key, _offset(params.cursor, len(self.visible(catalog, key, caller)))

    def page_key(self, key: tuple[Any, ...], start: int) -> tuple[Any, ...] | None:
        """How a page is known in the catalog's memo, for one that starts where this surface's pages start (not
        for one at a cursor a client made up: those would be unbounded)."""
        return None if start % PAGE_SIZE else ("mcp:page", key, start, PAGE_SIZE)

    def list_page(self, catalog: Catalog, key: tuple[Any, ...], start: int, caller: Caller) -> dict[str, Any]:
        tools = self.visible(catalog, key, caller)
        entries = self.entries(catalog)
        page: dict[str, Any] = {"tools": [entries[tool.id] for tool in tools[start:start + PAGE_SIZE]],
                                "resultType": "complete"}
        if start + PAGE_SIZE < len(tools):
            page["nextCursor"] = str(start + PAGE_SIZE)
        return page

    def talks(self, message: Any) -> bool:
        """Whether a POSTed message calls a tool that may talk to its client while it runs."""
        talking = self.talking(self.gateway.catalog)
        if not talking or type(message) is not dict or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        name = params.get("name") if type(params) is dict else None
        return type(name) is str and name in talking

    async def call_tool(self, caller: Caller, headers: Mapping[str, str], request_id: Any, params: Any,
                        client: ClientChannel = SILENT) -> dict[str, Any]:
        catalog = self.gateway.catalog
        tool = catalog.tools.get(params.name)
        # A tool the key may not use is unknown to it, as on REST: neither told apart nor suggested.
        if tool is None or tool.id not in self.entries(catalog) or not caller.may_use(tool):
            key = _visible_key(caller, _session(headers, params.meta))
            known = [t.id for t in self.visible(catalog, key, caller)]
            raise ProtocolError(INVALID_PARAMS, str(unknown_tool(params.name, known)))
        result = await invoke(catalog, tool.id, params.arguments,
                              _context(headers, caller, request_id, params.meta, client))
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

    def talking(self, catalog: Catalog) -> frozenset[str]:
        """The ids of the tools whose calls may talk to their client (``Tool.talks``), once per catalog."""
        return catalog.memo("mcp:talking", lambda: frozenset(tool.id for tool in catalog.tools.values() if tool.talks))

    def visible(self, catalog: Catalog, key: tuple[Any, ...], caller: Caller) -> list[Tool]:
        # Once per catalog and kind of caller (what may_use reads): walking 10,000 tools took ~50 ms a listing.
        entries = self.entries(catalog)
        session = key[-1]
        return catalog.memo(key, lambda: [
            tool for tool in catalog.tools.values()
            if tool.id in entries and (tool.scope.runs_on_server or session) and caller.may_use(tool)
        ])

    def call_result(self, tool: Tool, result: ToolResult) -> dict[str, Any]:
        body: dict[str, Any] = {"content": result.blocks(), "isError": result.is_error, "resultType": "complete"}
        if result.structured:
            body["structuredContent"] = mcp_format.structured_content(tool, result.value)
        return body

    async def catalog_changed(self, catalog: Catalog) -> None:
        if self.sdk is not None:  # before the SDK runs, no session or listen stream exists to tell
            await self.sdk.catalog_changed()


async def _awaited(future: asyncio.Future[Any] | None) -> Any:
    if future is None:
        raise RuntimeError("the MCP surface is not running: serve the app with its lifespan")
    return await asyncio.shield(future)


def _import_sdk() -> Any:
    from . import sdk as mcp_sdk

    return mcp_sdk


def screen_message(body: bytes) -> Any:
    """The POSTed message, refused before the SDK reads it when the SDK would mishandle it.

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
    return message


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


def _visible_key(caller: Caller, session: str | None) -> tuple[Any, ...]:
    """What of a caller decides which tools it sees (what ``may_use`` reads, and whether it names a session)."""
    return "mcp:visible", caller.auth, caller.key is not None, caller.toolsets, bool(session)


def _session(headers: Mapping[str, str], meta: Any) -> str | None:
    """The browser bridge session a request names: ``_meta["gateway/session"]``, else ``X-Gateway-Session``."""
    return _meta_text(meta, SESSION_META) or headers.get("x-gateway-session")


def _meta_text(meta: Any, key: str) -> str | None:
    """A gateway ``_meta`` entry, which must be a string when present (else INVALID_PARAMS naming it)."""
    value = (meta or {}).get(key)
    if value is not None and not isinstance(value, str):
        raise ProtocolError(INVALID_PARAMS, f'_meta["{key}"] must be a string, not {type(value).__name__}.')
    return value


def _context(headers: Mapping[str, str], caller: Caller, request_id: Any, meta: Any,
             client: ClientChannel) -> CallContext:
    session = _session(headers, meta)
    return CallContext(
        conversation_id=_meta_text(meta, CONVERSATION_META) or headers.get("x-conversation-id"),
        user=caller.user(headers.get("x-user")),
        tool_call_id=str(request_id) if request_id is not None else None,
        session=session,
        side="client" if session else "server",  # a named page runs scope-all tools
        surface="mcp",
        caller=caller.name,
        traceparent=_meta_text(meta, TRACEPARENT_META) or headers.get("traceparent"),
        client=client,
    )


def _offset(cursor: str | None, total: int) -> int:
    """Where a page starts. A catalog that shrank between pages ends the listing; list_changed follows."""
    if cursor is None:
        return 0
    # ASCII digits, and few: str.isdigit takes '²', and int() refuses 4,300 digits or more (an internal error).
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 12:
        raise ProtocolError(INVALID_PARAMS, f"Invalid cursor {cursor[:40]!r}: list the tools again from the start.")
    return min(int(cursor), total)
