"""CORS for the browser pages the settings allow, in front of every surface: a page on an allowed origin may call
REST and MCP, load the client runtime and open the bridge. It lives here, below the surfaces, because ``front.Front``
applies it to all of them; no surface owns it."""

from __future__ import annotations

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from ...settings import Settings
from .origins import AllowedOrigins

# Headers a page may send cross-origin: auth, the REST context headers, and what the MCP client sends.
CORS_HEADERS = ("Authorization", "Content-Type", "If-None-Match", "X-Gateway-Session", "X-Conversation-Id",
                "X-User", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID")
CORS_EXPOSED = ("ETag", "Mcp-Session-Id", "Mcp-Protocol-Version")


class ClientCors(CORSMiddleware):
    """CORS answers for the origins the settings allow (``AllowedOrigins``: ``allowed_origins``, or loopback pages
    while that list is empty and auth is off). The gateway's own pages are same-origin and need none.

    ``front.Front`` hands it the requests that carry an Origin, once its guard has refused every other origin with
    403; it still checks, so that nothing in front of it can make it answer for an origin the settings do not allow.
    """

    def __init__(self, app: ASGIApp, settings: Settings):
        super().__init__(app, allow_methods=("GET", "POST", "DELETE"), allow_headers=CORS_HEADERS,
                         expose_headers=CORS_EXPOSED, max_age=600)
        self.origins = AllowedOrigins(settings)

    def is_allowed_origin(self, origin: str) -> bool:
        return origin in self.origins
