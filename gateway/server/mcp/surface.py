"""MCP at ``/mcp``: streamable HTTP on the official SDK's low-level ``Server``, fed by the catalog.

The SDK owns the protocol: both revisions it serves (the 2025-11-25 ``initialize`` handshake with sessions, and
the stateless 2026-07-28 per-request envelope), validation of every message, and the transports. This module
authenticates and screens what reaches ``/mcp``, picks the path that answers it, and tells clients when the
catalog changes:

- ``tools/list`` and ``tools/call`` are answered by ``gateway.server.mcp.handlers`` (``ToolHandlers``), on
  either path.
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
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ...catalog.snapshot import Catalog
from ...errors import BadRequest, GatewayError, Unauthorized
from ...runtime.gateway import Gateway
from ...schema.argerrors import got
from ..http.auth import SCOPE_KEY, Caller, authenticate
from ..http.bodies import first_headers, parse_json, receive_body
from ..http.errors import dumps, gateway_error, refused
from ..http.sending import VARY_ORIGIN, adding
from .fast import FastPath
from .handlers import ToolHandlers
from .messages import INVALID_REQUEST, PARSE_ERROR, Types, import_types

if TYPE_CHECKING:
    from .sdk import SdkServer  # imported in a thread once the app starts (``run``)

log = logging.getLogger("gateway.mcp")
BODY_KEY = "gateway.mcp.body"  # where a POST's body waits for the SDK, once read and screened
TALKS_KEY = "gateway.mcp.talks"  # set when a POST calls a tool that may talk to its client (``ToolHandlers.talks``)


class McpSurface:
    """The MCP server for one gateway: an ASGI app (the ``/mcp`` endpoint), with ``run()`` its lifetime."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.handlers = ToolHandlers(gateway)
        # The SDK wraps every message in an OpenTelemetry span; with no tracer provider configured (before the
        # app is built) that span is a no-op costing ~7% of a tools/call, so it is dropped — and then nothing of
        # the SDK's per-request work is left that the fast path would skip. With a provider, every request takes
        # the SDK (and its span).
        self.traced = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        self.fast = FastPath(self.handlers, self.traced, self.loaded_types)
        self.sdk: SdkServer | None = None  # once imported and running (``run``)
        self._types_ready: asyncio.Future[Types] | None = None
        self._sdk_ready: asyncio.Future[SdkServer] | None = None
        gateway.on_change(self.catalog_changed)

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
            sdk = (await asyncio.to_thread(_import_sdk)).SdkServer(self.handlers, self.traced)
            async with sdk.run():
                self.sdk, self.fast.sessions = sdk, sdk.sessions  # the fast path serves a session the SDK holds
                self.fast.log_levels = sdk.log_levels
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
            self.sdk = self.fast.sessions = self.fast.log_levels = None

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
            _step_up(scope[SCOPE_KEY], self.gateway.catalog, message)
        except GatewayError as exc:
            refused(Request(scope), exc)
            await _jsonrpc_error(exc, scope, receive, refusing)
            return True
        scope[BODY_KEY] = body
        talks = self.handlers.talks(message)
        # A fast answer carries them itself, as adding() would place them: no wrapper per message.
        if await self.fast.answer(scope, receive, send, message, headers,
                                  () if added is None else (VARY_ORIGIN, *added), talks):
            return True
        if talks:  # the SDK answers it as SSE where the client takes that
            scope[TALKS_KEY] = True
        return False

    async def _authenticated(self, scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str]) -> bool:
        """Leave the caller in the scope for the handlers; False once a refused key was answered (401)."""
        client = scope.get("client")
        try:
            scope[SCOPE_KEY] = await authenticate(self.gateway, headers, client[0] if client else None, mcp=True)
        except Unauthorized as exc:
            refused(Request(scope), exc)
            await gateway_error(exc)(scope, receive, send)
            return False
        return True

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
    """A refused message, answered as JSON-RPC does when it cannot tell the request's id: ``"id": null`` (a
    step-up's 403 with its challenge)."""
    code = INVALID_REQUEST if isinstance(exc, InvalidRequest) or exc.status != 400 else PARSE_ERROR
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": str(exc)}}
    challenge = getattr(exc, "challenge", None)
    await Response(dumps(body), exc.status, {"WWW-Authenticate": challenge} if challenge else None,
                   media_type="application/json")(scope, receive, send)


def _step_up(caller: Caller, catalog: Catalog, message: Any) -> None:
    """A ``tools/call`` of a tool the caller's token could earn with another scope: a 403 asking for it, at the
    HTTP level, where MCP clients look for a step-up (the authorization spec's scope challenge)."""
    if caller.identity is None or type(message) is not dict or message.get("method") != "tools/call":
        return
    params = message.get("params")
    tool = catalog.tools.get(params.get("name")) if type(params) is dict and type(params.get("name")) is str else None
    if tool is not None:
        caller.step_up(tool)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the already-read body once, then whatever the connection says next."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay

