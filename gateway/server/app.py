"""The Starlette app (``create_app``) and ``serve``, which runs it under uvicorn.

The app is the surfaces side by side — REST (``rest/``), MCP (``mcp/``), the demo API — behind one
middleware (``front.Front``: Origin guard, CORS, version headers) and one JSON error shape. Its lifespan runs the
MCP session manager, then any *services* (long-running companions such as the definitions watcher, given as
``service(gateway) -> async context manager``), and closes the gateway's shared clients last.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route

from .. import observe
from ..observe.logs import configure_logging
from ..runtime.bridge_cluster import bridging
from ..runtime.cluster import replicating
from ..runtime.gateway import Gateway
from ..runtime.reload import reloading
from ..settings import Settings
from ..upstream.address import served_host
from . import chat, client, demo_api, landing, metrics, oauth_client, workers
from .admin import surface as admin
from .http.connections import server_config
from .http.errors import EXCEPTION_HANDLERS
from .http.front import Front
from .mcp.surface import McpSurface
from .rest import openapi
from .rest import surface as rest
from .rest.fast import RestCalls

log = logging.getLogger("gateway.server")
GRACEFUL_SHUTDOWN_S = 10  # what requests in flight get to finish once the server is told to stop
Service = Callable[[Gateway], AbstractAsyncContextManager[Any]]


def create_app(gateway_or_settings: Gateway | Settings, *, services: Sequence[Service] = ()) -> Starlette:
    """The ASGI app serving one gateway (built from ``Settings`` if given those; that raises
    ``DefinitionsInvalid`` when the definitions are wrong)."""
    gateway = gateway_or_settings if isinstance(gateway_or_settings, Gateway) else Gateway(gateway_or_settings)
    observe.attach(gateway)  # before the first request: every call is told to the consumers the settings ask for
    mcp = McpSurface(gateway)
    calls = RestCalls(gateway)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with mcp.run(), AsyncExitStack() as stack:
                # The reloader always runs: it watches only when settings.reload, and takes SIGHUP.
                for service in (reloading, replicating, bridging, *services):
                    await stack.enter_async_context(service(gateway))
                yield
        finally:
            observe.detach(gateway)
            await gateway.aclose()

    app = Starlette(
        # The two call paths first: Starlette tries routes in order, and every request pays for the ones before.
        routes=[Route("/mcp", mcp), *rest.routes(gateway, calls), *admin.routes(gateway), *chat.routes(gateway),
                *client.routes(gateway), *openapi.routes(gateway), Mount("/demo", routes=demo_api.routes()),
                *landing.routes(gateway), *metrics.routes(gateway), *oauth_client.routes(gateway)],
        # One middleware for the Origin/Host guard, CORS and the version headers: a layer per job cost each call.
        # Its hooks answer REST calls and MCP POSTs below the rest of Starlette's layers (rest_fast, McpSurface.fast_post).
        middleware=[Middleware(Front, gateway=gateway, settings=gateway.settings, fast=(mcp.fast_post, calls.fast))],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    app.state.mcp = mcp
    return app


def serve(settings: Settings) -> None:
    """Build the gateway and serve it until interrupted; ``DefinitionsInvalid`` propagates to the CLI."""
    configure_logging(settings)  # every logger, uvicorn's too (log_config=None below), in log_format
    host = bind_host(settings)
    # Ctrl-C during the first build ends the process at once, as SIGTERM's default does: nothing serves yet, and
    # the interpreter's orderly exit after a KeyboardInterrupt could wait on a build thread stuck in admin code (an
    # import that never returns) — seen as a SIGINT that took over 20 s on a loaded machine. uvicorn installs its
    # own handlers when it starts serving.
    previous = signal.signal(signal.SIGINT, _exit_at_once)
    try:
        gateway = Gateway(settings)
    finally:
        signal.signal(signal.SIGINT, previous)
    for warning in gateway.catalog.warnings:
        log.warning("%s", warning)
    app = create_app(gateway)
    log.info("serving %d tool(s) from %s (catalog %s) on http://%s:%d — REST at /tools, MCP at /mcp",
             len(gateway.catalog.tools), settings.definitions, gateway.catalog.version, host, settings.port)
    # Access lines cost a log call per request: only at debug level.
    config = server_config(app, settings, host, log_level=settings.log_level.lower(), log_config=None,
                           access_log=settings.log_level.lower() == "debug", lifespan="on",
                           # A request in flight (an /admin/reload waiting on a stuck build) must not hold SIGTERM.
                           timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    listener = workers.worker_socket()  # a worker of `serve --workers N`: the supervisor's socket, shared
    workers.tell_ready()
    _Server(config, gateway).run(sockets=[listener] if listener is not None else None)


def _exit_at_once(signum: int, frame: Any) -> None:
    os._exit(128 + signum)


class _Server(uvicorn.Server):
    """uvicorn tells the app nothing until open connections drain, so an open live-calls stream (the console's)
    would hold SIGTERM for the whole grace period: it is ended first."""

    def __init__(self, config: uvicorn.Config, gateway: Gateway):
        super().__init__(config)
        self.gateway = gateway

    async def shutdown(self, sockets: Any = None) -> None:
        live = self.gateway.observers.get("live")
        if live is not None:
            live.stop()
        await super().shutdown(sockets)


def bind_host(settings: Settings) -> str:
    """The address to listen on: loopback only unless API keys protect the gateway; says which at start-up."""
    host = served_host(settings)  # the one decision, shared with {{ gateway.base_url }}
    if settings.auth_enabled:
        log.info("auth on: %d API key(s) configured", len(settings.api_keys))
    elif host != settings.host:
        log.warning("auth off: no API keys configured, so listening on %s instead of %s; "
                    "configure api_keys to serve other hosts", host, settings.host)
    else:
        log.info("auth off: no API keys configured; listening on %s (loopback) only", host)
    return host
