"""The MCP SDK's side of ``/mcp``: the low-level ``Server``, its streamable-HTTP session manager, the
subscription bus of 2026-07-28 listen streams, and the shared session records (``mcp.sessions``).

Imported when the app starts, in a thread (``McpSurface.run``): its import is most of what the SDK costs. The
tool handlers are ``mcp.handlers``' (the fast path's too), adapted here to the SDK's request context; a
``ProtocolError`` they raise is the SDK's ``MCPError``.

Responses are JSON, not SSE (``json_response=True``): a JSON body costs a fraction of an SSE stream per request.
The exception is a call of a tool that may talk to its client while it runs (``Tool.talks``: progress, logs,
elicitation, sampling; ``gateway.server.mcp.channel``), answered as SSE when its client accepts that: the
manager and its session transports read the choice per request (``_JSON_ANSWER``, set by ``handle``). Sessions
stay stateful so that 2025-11-25 clients have a GET stream to hear about changes on, and a place to POST their
answers to the server's requests.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import anyio
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import CallToolRequestParams, PaginatedRequestParams, ServerCapabilities, SetLevelRequestParams
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ...catalog.snapshot import EMPTY, Content
from ...runtime.cluster import DEFAULT_HEARTBEAT_S
from ..http.auth import SCOPE_KEY
from .channel import LogLevels, McpChannel
from .content import CACHE_HINTS as CONTENT_CACHE_HINTS
from .content import McpContent
from .fast import CACHE_HINTS, JSON_RESPONSES, SERVER_NAME, SERVER_TITLE, SERVER_VERSION, ProtocolError
from .handlers import ToolHandlers
from .sessions import SharedSessions

# The session manager says at INFO that it started (now a moment after the app, amid requests), and then once
# per session opened or refused: noise at that rate. Its warnings (a session refused for another credential, too
# many sessions) still show.
logging.getLogger("mcp.server.streamable_http_manager").setLevel(logging.WARNING)

# Whether the POST being served is answered as JSON (else SSE): set by ``SdkServer.handle`` for each request, read
# by the manager (2026-07-28) and the session transports (2025-11-25) where the SDK reads its one setting.
_JSON_ANSWER: ContextVar[bool | None] = ContextVar("gateway.mcp.json_answer", default=None)


class _Manager(StreamableHTTPSessionManager):
    """The SDK's session manager, answering each request as ``_JSON_ANSWER`` says (its setting otherwise)."""

    @property
    def json_response(self) -> bool:  # type: ignore[override]
        chosen = _JSON_ANSWER.get()
        return self.__dict__["json_response"] if chosen is None else chosen

    @json_response.setter
    def json_response(self, value: bool) -> None:
        self.__dict__["json_response"] = value

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None:
            transport.__class__ = _Transport  # the SDK builds it; it only gains the per-request choice
        return transport


class _Transport(StreamableHTTPServerTransport):
    """A session's transport, answering each POST as ``_JSON_ANSWER`` says.

    Its message router (a task of the session's, spawned in ``connect``) reads the same flag to drop what is
    related to a JSON-answered request, which has no wire for it: there the flag is False, so that what an SSE
    call sends reaches its stream. Nothing is sent related to a JSON-answered call (``McpChannel`` stays silent
    there), which the router would take for its answer.
    """

    @property
    def is_json_response_enabled(self) -> bool:  # type: ignore[override]
        chosen = _JSON_ANSWER.get()
        return self.__dict__["is_json_response_enabled"] if chosen is None else chosen

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        self.__dict__["is_json_response_enabled"] = value

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Any]:
        _JSON_ANSWER.set(False)  # in the session's own task, whose router and handlers it spawns inherit it
        async with super().connect() as streams:
            yield streams


class _GatewayServer(Server[Any]):
    """The low-level Server, advertising ``listChanged`` (tools, prompts, resources) to handshake-era clients too.

    The streamable-HTTP manager builds each session's ``initialize`` result from
    ``create_initialization_options()`` without arguments, so the default is where the flag must be set.
    (2026-07-28 clients see it because ``subscriptions/listen`` is served.)
    """

    served: Callable[[], Content] = staticmethod(lambda: EMPTY)  # the catalog's prompts and resources now

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(notification_options or NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True),
                                                     experimental_capabilities, extensions)

    def get_capabilities(self, notification_options: NotificationOptions | None = None,
                         experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                         extensions: dict[str, dict[str, Any]] | None = None, *,
                         protocol_version: str | None = None) -> ServerCapabilities:
        """The SDK's, declaring prompts, resources and completions only while the catalog serves some: asked per
        ``initialize`` and per ``server/discover``, so a session opened after a reload that added the first prompt
        is told (their handlers stay registered: a client asking anyway gets an empty list)."""
        capabilities = super().get_capabilities(notification_options, experimental_capabilities, extensions,
                                                protocol_version=protocol_version)
        content = self.served()
        unserved = {name: None for name, served in (("prompts", content.prompts), ("resources", content.resources),
                                                    ("completions", content.prompts or content.resources))
                    if not served}
        return capabilities.model_copy(update=unserved) if unserved else capabilities


class SdkServer:
    """The SDK's server for one ``McpSurface``, answering tools with its ``handlers``, with ``run()`` its lifetime;
    ``traced``: ``McpSurface.traced``."""

    def __init__(self, handlers: ToolHandlers, traced: bool):
        self.handlers = handlers
        gateway = handlers.gateway
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self.log_levels = LogLevels()
        self.content = McpContent(gateway, self.bus)
        with warnings.catch_warnings():  # logging is deprecated on 2026-07-28 only; 2025 clients still set levels
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server = _GatewayServer(
                SERVER_NAME,
                version=SERVER_VERSION,
                title=SERVER_TITLE,
                on_list_tools=self.list_tools,
                on_call_tool=self.call_tool,
                on_set_logging_level=self.set_logging_level,
                on_subscriptions_listen=self.listen,
                on_list_prompts=self.content.list_prompts,
                on_get_prompt=self.content.get_prompt,
                on_list_resources=self.content.list_resources,
                on_list_resource_templates=self.content.list_resource_templates,
                on_read_resource=self.content.read_resource,
                on_subscribe_resource=self.content.subscribe,
                on_unsubscribe_resource=self.content.unsubscribe,
                on_completion=self.content.complete,
                get_tool_input_schema=handlers.input_schema,
                # 2026-07-28 clients may cache listings: not across keys (each sees its toolsets), and never past a
                # reload, which they hear about through subscriptions/listen.
                cache_hints={method: CacheHint(ttl_ms=ttl, scope=scope)
                             for method, (ttl, scope) in {**CACHE_HINTS, **CONTENT_CACHE_HINTS}.items()},
            )
        self.server.served = lambda: gateway.catalog.content
        if not traced:  # see McpSurface.traced
            self.server.middleware = [m for m in self.server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
        self.server.middleware.append(self.track_connection)
        # Handshake-era connections with a session (and so a GET stream), by the SDK's Connection object; the
        # fast path reads a held session's negotiated version off ``held``.
        self.connections: set[Any] = set()
        self.held: dict[str, Any] = {}
        settings = gateway.settings
        self.manager = _Manager(
            self.server, json_response=JSON_RESPONSES, max_request_body_size=settings.max_body_bytes,
            session_idle_timeout=settings.mcp_session_idle_s,
            # Host and Origin are checked app-wide (front.Front); given explicitly, the SDK's settings
            # are not rebuilt (a pydantic model) on every request.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        # 2025-11-25 sessions any replica serves, from records in the shared state (gateway.server.mcp.sessions).
        self.sessions = SharedSessions(gateway.state, self.manager, self.connections, self.held,
                                       float(settings.cluster.get("heartbeat_s", DEFAULT_HEARTBEAT_S)),
                                       settings.mcp_sessions_per_key)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self.manager.run(), self.sessions.running():
            try:
                yield
            finally:
                self.listen.close()

    async def handle(self, scope: Scope, receive: Receive, send: Send, body: bytes | None, owner: str | None,
                     talks: bool) -> None:
        """Serve one ``/mcp`` request (``body``: a POST's, already read and screened); ``talks``: it calls a tool
        that may talk to its client, answered as SSE if the client accepts it, where all else is JSON."""
        chosen = _JSON_ANSWER.set(not (talks and check_accept_headers(Request(scope))[1]))
        try:
            await self.sessions.handle(scope, receive, send, body, owner)
        finally:
            _JSON_ANSWER.reset(chosen)

    async def list_tools(self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams) -> dict[str, Any]:
        caller = ctx.request.scope[SCOPE_KEY]
        try:
            return self.handlers.list_page(*self.handlers.list_view(caller, ctx.request.headers, params), caller)
        except ProtocolError as exc:
            raise MCPError(exc.code, exc.message) from None

    async def call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> dict[str, Any]:
        try:
            channel = McpChannel(ctx, self.log_levels, params)
            result = await self.handlers.call_tool(ctx.request.scope[SCOPE_KEY], ctx.request.headers, ctx.request_id,
                                                   params, channel, ctx.session.client_capabilities)
        except ProtocolError as exc:
            raise MCPError(exc.code, exc.message, exc.data) from None
        # A 2026-07-28 tool that asked its client something ends this round with the question (mcp_channel.Rounds).
        return channel.rounds.result() if channel.rounds is not None and channel.rounds.pending else result

    async def set_logging_level(self, ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> dict[str, Any]:
        """``logging/setLevel`` (2025 revisions): what the session's tools log below it is not sent."""
        self.log_levels.set(ctx.session._connection, params.level)  # see track_connection for _connection
        return {}

    async def track_connection(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: remember each live handshake-era session, to tell it when the tools change.

        The SDK offers a handler no public handle on its connection's lifetime; ``ServerSession`` keeps the
        ``Connection`` as ``_connection`` (mcp 2.3). Its ``exit_stack`` unwinds when the session ends, which is
        when we forget it. Sessionless connections (2026-07-28, stateless) have no stream to notify.
        """
        connection = ctx.session._connection
        if connection.session_id is not None and connection not in self.connections:
            self.connections.add(connection)
            self.held[connection.session_id] = connection
            connection.exit_stack.callback(self.connections.discard, connection)
            connection.exit_stack.callback(self.held.pop, connection.session_id, None)
        return await call_next(ctx)

    async def catalog_changed(self) -> None:
        async with anyio.create_task_group() as group:
            for connection in list(self.connections):
                group.start_soon(connection.send_tool_list_changed)  # best effort: never raises
        await self.bus.publish(ToolsListChanged())
        await self.content.catalog_changed(self.connections)
