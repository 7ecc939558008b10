"""Origin and Host validation for every route: what keeps a web page the user visits from driving the gateway.

A browser names the page that sent a request in ``Origin``. Requests from the gateway's own origin and from
``settings.allowed_origins`` (``scheme://host`` or ``scheme://host:port``, ``:*`` for any port) pass, and so do
loopback pages while auth is off (the gateway then serves the local machine only); any other origin gets 403.
With API keys on, a loopback page — any local program serving one — must be listed like every other origin.
Requests without ``Origin`` (every non-browser client) pass.

Without API keys the gateway listens on loopback only, and a DNS-rebinding page would reach it under its own
host name, as "same origin": so with auth off the ``Host`` must be a loopback name too (else 421, as the MCP
SDK answers). With keys, a page cannot present one the user did not give it.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..settings import Settings
from .errors import error_response

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
LOOPBACK_ORIGINS = tuple(f"{scheme}://{host}:*" for scheme in ("http", "https") for host in LOOPBACK_HOSTS) + tuple(
    f"{scheme}://{host}" for scheme in ("http", "https") for host in LOOPBACK_HOSTS)


class OriginGuard:
    """Pure ASGI middleware (no per-request objects beyond a header lookup)."""

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.allowed = settings.allowed_origins if settings.auth_enabled else (*settings.allowed_origins,
                                                                                *LOOPBACK_ORIGINS)
        self.check_host = not settings.auth_enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):  # a WebSocket handshake is refused with the same HTTP answer
            headers = Headers(scope=scope)
            host = headers.get("host", "")
            if self.check_host and not _host_is_loopback(host):
                await error_response(421, f"Host '{host}' is not a loopback name: with no API keys configured "
                                          "the gateway answers to localhost only.")(scope, receive, send)
                return
            origin = headers.get("origin")
            scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme", "http"))
            if origin and not self.origin_allowed(origin, host, scheme):
                await error_response(403, f"Origin '{origin}' is not allowed; add it to the allowed_origins "
                                          "setting.")(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def origin_allowed(self, origin: str, host: str, scheme: str) -> bool:
        if origin == f"{scheme}://{host}":
            return True
        return any(origin == allowed or (allowed.endswith(":*") and _with_port(origin, allowed[:-1]))
                   for allowed in self.allowed)


def _with_port(origin: str, prefix: str) -> bool:
    return origin.startswith(prefix) and origin[len(prefix):].isdigit()


def _host_is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in LOOPBACK_HOSTS
