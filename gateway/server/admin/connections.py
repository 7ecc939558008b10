"""People's own connections to upstreams (``gateway.upstream.connections``), as admins see them:

- ``GET /admin/api/connections``: ``{connections: [{connection, user, person, scope, connected_at, refreshed_at,
  expires_at, refreshable}]}`` — every person's, never a token;
- ``DELETE /admin/api/connections/{name}?person=<person>``: ends one (a write: ``writes``), its refresh token
  revoked at the authorization server where it can be; an ``admin`` event names it.

A person lists and ends their own at ``/oauth/connections`` (``gateway.server.connections``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...runtime.gateway import Gateway
from ..http.auth import Caller
from ..http.errors import error_response, json_response


def routes(gateway: Gateway, *, admin: Callable[..., Awaitable[Caller]]) -> list[Route]:
    people = PeopleConnections(gateway, admin)
    return [Route("/admin/api/connections", people.listing, methods=["GET"]),
            Route("/admin/api/connections/{name}", people.end, methods=["DELETE"])]


class PeopleConnections:
    def __init__(self, gateway: Gateway, admin: Callable[..., Awaitable[Caller]]):
        self.gateway, self.admin = gateway, admin

    async def listing(self, request: Request) -> Response:
        await self.admin(request)
        return json_response({"connections": await self.gateway.connections().listing()})

    async def end(self, request: Request) -> Response:
        caller = await self.admin(request, write=True)
        name, who = request.path_params["name"], request.query_params.get("person", "")
        if not await self.gateway.connections().revoke(name, who, self.gateway.http_client()):
            return error_response(404, f"No connection '{name}' of {who!r}.")
        self.gateway.events.emit("admin", action="end connection", caller=caller.name,
                                 detail={"connection": name, "person": who})
        return Response(status_code=204)
