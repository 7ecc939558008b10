"""``X-Catalog-Version`` and ``X-Gateway-Replica`` on every response: which catalog answered, and which replica,
so a client (an operator, a test behind a load balancer) can tell replicas apart without asking ``/status``.

The replica is ``gateway.cluster.Replicas.id`` (the id ``/status`` lists); it is absent while the app runs
without its lifespan (no registry then)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-catalog-version"
REPLICA_HEADER = b"x-gateway-replica"


class CatalogVersionHeader:
    """Pure ASGI (no response buffering): adds the headers to the response start of every HTTP request."""

    def __init__(self, app: ASGIApp, gateway: object):
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The version when the request arrived: a reload during the request does not change what it used.
        added = [(HEADER, self.gateway.catalog.version.encode())]  # type: ignore[attr-defined]
        replicas = self.gateway.replicas  # type: ignore[attr-defined]
        if replicas is not None:
            added.append((REPLICA_HEADER, replicas.id.encode()))

        async def send_with_version(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *added]
            await send(message)

        await self.app(scope, receive, send_with_version)
