"""``Front``: the one middleware in front of every route. It does, per request, what three middlewares did:

- the Origin and Host guard (``origins``): 421 for a non-loopback ``Host`` while auth is off, 403 for an origin
  that is neither allowed nor the gateway's own — WebSocket handshakes included;
- CORS (``cors.ClientCors``) for the allowed origins;
- ``X-Catalog-Version`` and ``X-Gateway-Replica`` on every HTTP response (``version_header``), the guard's
  refusals included.

Why one: each middleware layer was a coroutine, a ``Headers`` object and a ``send`` wrapper per request, on every
call. Here the request's raw headers are read in one pass, the headers to add are encoded once per catalog, and a
request without ``Origin`` (every client but a browser) gets a single ``send`` wrapper that adds the version headers
and the ``Vary: Origin`` CORS would add. A request with ``Origin`` goes through Starlette's CORS middleware
unchanged, so browsers see exactly its answers (preflights, ``Access-Control-*``).

A request without ``Origin`` that passed the guard is first offered to the ``fast`` hooks (the MCP POST and the
REST call fast paths, ``McpSurface.fast_post`` and ``rest.fast.RestCalls.fast``): one that answers it saves the
request Starlette's exception and routing layers; the others go on to them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from ...settings import Settings
from .cors import ClientCors
from .errors import error_response
from .origins import AllowedOrigins, host_is_loopback, served_at
from .sending import adding
from .version_header import version_headers

# A hook answering a request below Starlette (the REST and MCP fast paths): True when it did.
Fast = Callable[[Scope, Receive, Send, list[tuple[bytes, bytes]]], Awaitable[bool]]


class Front:
    """Pure ASGI: no response buffering, no per-request objects beyond one closure."""

    def __init__(self, app: ASGIApp, gateway: Any, settings: Settings, fast: Sequence[Fast] = ()):
        self.app = app
        self.fast = fast
        self.gateway = gateway  # gateway.server's Gateway: its catalog and replica id name every response
        self.allowed = AllowedOrigins(settings)
        self.admin_allowed = AllowedOrigins(settings, listed_only=True)
        self.check_host = not settings.auth_enabled
        self.cors = ClientCors(app, settings)  # browsers only: its answers, exactly
        self._added: tuple[Any, Any, list[tuple[bytes, bytes]]] = (None, None, [])

    def added(self) -> list[tuple[bytes, bytes]]:
        """The version headers, encoded once per catalog and replica registry."""
        catalog, replicas = self.gateway.catalog, self.gateway.replicas
        known_catalog, known_replicas, added = self._added
        if catalog is not known_catalog or replicas is not known_replicas:
            added = version_headers(catalog.version, replicas)
            self._added = (catalog, replicas, added)
        return added

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":  # lifespan
            await self.app(scope, receive, send)
            return
        host = origin = None
        for name, value in scope["headers"]:  # the first of each, as Starlette's Headers.get reads them
            if name == b"host":
                if host is None:
                    host = value
            elif name == b"origin" and origin is None:
                origin = value
        # The version when the request arrived: a reload during the request does not change what it used.
        added = self.added() if kind == "http" else None
        refusal = self.refusal(scope, host, origin)
        if refusal is not None:
            await error_response(*refusal)(scope, receive, send if added is None else adding(send, added))
            return
        if added is None:  # a WebSocket handshake that passed the guard: CORS is not for WebSockets
            await self.app(scope, receive, send)
        elif origin is None:  # every non-browser client
            for answered in self.fast:
                if await answered(scope, receive, send, added):
                    return
            await self.app(scope, receive, adding(send, added, vary_origin=True))
        else:
            await self.cors(scope, receive, adding(send, added))

    def refusal(self, scope: Scope, host: bytes | None, origin: bytes | None) -> tuple[int, str] | None:
        """The status and message refusing this request, or None when it may pass."""
        if b"access_token" in scope.get("query_string", b""):
            # OAuth 2.1 drops RFC 6750's query form: a URL is logged (proxies, uvicorn's access log at debug, the
            # browser's history). Refused, and rubbed out of the scope the access log reads.
            scope["query_string"] = b"access_token=[redacted]"
            return 400, "A token in the URL is refused: send it as 'Authorization: Bearer <token>'."
        if self.check_host:
            name = host.decode("latin-1") if host is not None else ""
            if not host_is_loopback(name):
                return 421, (f"Host '{name}' is not a loopback name: with no API keys configured the gateway answers "
                             "to localhost only.")
        if origin:
            text = origin.decode("latin-1")
            server = scope.get("server")
            if text in served_at(tuple(server) if server else None):
                return None
            if scope["path"].startswith("/admin/"):
                if text not in self.admin_allowed:
                    return 403, (f"Origin '{text}' may not use the admin routes: only the gateway's own pages and the "
                                 "origins listed in allowed_origins may.")
            elif text not in self.allowed:
                return 403, f"Origin '{text}' is not allowed; add it to the allowed_origins setting."
        return None
