"""``X-Catalog-Version`` on every response: which catalog answered, so a client (or a test behind a load
balancer) can tell replicas that serve different versions apart without asking ``/status``."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-catalog-version"


class CatalogVersionHeader:
    """Pure ASGI (no response buffering): adds the header to the response start of every HTTP request."""

    def __init__(self, app: ASGIApp, gateway: object):
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The version when the request arrived: a reload during the request does not change what it used.
        version = self.gateway.catalog.version.encode()  # type: ignore[attr-defined]

        async def send_with_version(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (HEADER, version)]
            await send(message)

        await self.app(scope, receive, send_with_version)
