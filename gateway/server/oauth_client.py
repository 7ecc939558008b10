"""The browser's part in the gateway's OAuth authorization with an upstream MCP server's authorization server
(``mcp: {auth: oauth}``, ``gateway.upstream.oauth``):

    GET /oauth/connect/<source>   an admin starts it: the gateway finds the server (discovery), registers if it
                                  must, and redirects to the authorization request (PKCE, state, resource)
    GET /oauth/callback           where the authorization server sends the browser back: the code is exchanged
                                  for tokens (kept encrypted), and the upstream's session connects again

The connection being the gateway's own, starting one is for admins (with auth off: loopback callers). The
callback needs no credentials (a redirect carries none): its ``state`` names a flow an admin started, used once
and short-lived. Pages name the source and what went wrong, never a token or a secret.

A ``<source>`` that names a person's own connection (``auth: {authorization_code: {connection}}``) is that
person's flow instead (``gateway.server.connections``), whose ``state`` carries its sealed flow (the sign-in leg)
or names one kept in the shared state (the upstream leg). A page never repeats an authorization server's
``error_description``: anyone can put words of their own in a callback's query.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..runtime.gateway import Gateway
from ..upstream.oauth.errors import DiscoveryFailed, FlowUnknown, TokenFailed
from . import connections
from .connections import PersonConnect, page, said_error
from .http.auth import authenticate


def routes(gateway: Gateway) -> list[BaseRoute]:
    api = OAuthClientApi(gateway)
    return [*connections.routes(gateway), Route("/oauth/connect/{source}", api.connect, methods=["GET"]),
            Route("/oauth/callback", api.callback, methods=["GET"], name="oauth_callback")]


class OAuthClientApi:
    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.people = PersonConnect(gateway)

    async def connect(self, request: Request) -> Response:
        declared = self.people.declared(request.path_params["source"])
        if declared is not None:
            return await self.people.connect(request, declared, str(request.url_for("oauth_callback")))
        caller = await authenticate(self.gateway, request.headers, request.client.host if request.client else None)
        caller.check_admin()
        source = request.path_params["source"]
        clients = self.gateway.mcp_pool.oauth
        authorizer = clients.for_source(source)
        if authorizer is None:
            return page(404, "Unknown source", f"No MCP source '{source}' of this gateway declares auth: oauth.")
        try:
            flow = await authorizer.begin(str(request.url_for("oauth_callback")))
        except (DiscoveryFailed, TokenFailed) as exc:
            return page(502, "Cannot authorize", f"MCP server '{source}': {exc}")
        clients.started(flow)
        return RedirectResponse(flow.url, status_code=302, headers={"cache-control": "no-store"})

    async def callback(self, request: Request) -> Response:
        query = request.query_params
        person_flow = await self.gateway.connections().take_flow(query.get("state", ""))
        if person_flow is not None:
            return await self.people.callback(request, person_flow)
        try:
            flow = self.gateway.mcp_pool.oauth.take(query.get("state", ""))
        except FlowUnknown as exc:
            return page(400, "Unknown authorization", str(exc))
        source = flow.authorizer.source
        if query.get("error"):
            return page(400, "Not authorized", f"MCP server '{source}': its authorization server answered "
                                               f"{said_error(query.get('error'))}.")
        try:
            await flow.authorizer.finish(flow, query.get("code"), query.get("iss"))
        except TokenFailed as exc:
            return page(502, "Not authorized", f"MCP server '{source}': {exc}")
        self.gateway.mcp_pool.authorized(source)
        return page(200, "Authorized", f"The gateway may now use MCP server '{source}'. You can close this page.")

