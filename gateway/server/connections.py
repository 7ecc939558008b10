"""Each person's own connection to an upstream (``auth: {authorization_code: …}``, ``gateway.upstream.connections``):
the browser's part, and the routes that list and end connections.

    GET /oauth/connect/<connection>   the link a call's error gives a person who has not connected: the browser
                                      signs in at the gateway's identity provider first (``oauth.console``'s public
                                      client, PKCE), so that the gateway learns who is there from the provider,
                                      never from the link; then it is sent to the upstream's authorization server
    GET /oauth/callback               both legs come back here (``gateway.server.oauth_client`` routes it): the
                                      first gives the person, the second the code their tokens are exchanged for
    GET /oauth/connections            the caller's own connections (an OAuth access token)
    DELETE /oauth/connections/<name>  the caller ends their own connection

Admins list and end anyone's at ``/admin/api/connections`` (``gateway.server.admin.connections``). Listings name
the connection, the person, the scope and the times; never a token. Pages name what went wrong, never a token or
a secret.
"""

from __future__ import annotations

import hmac
import html
import json
import logging
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..identity.grants import TokenRefused
from ..runtime.gateway import Gateway
from .admin.signin import ConsoleSignIn, SignInUnavailable
from .http.auth import Caller, authenticate
from .http.errors import error_response, json_response

if TYPE_CHECKING:  # the modules themselves on first use: an app declaring no connection never loads httpx
    from ..upstream.connections import Connections, Declared

log = logging.getLogger("gateway.connections")
COOKIE_MAX_AGE_S = 600  # as long as a flow lives (gateway.upstream.connections.FLOW_TTL_S)
ERROR_CODES = frozenset({"invalid_request", "unauthorized_client", "access_denied", "unsupported_response_type",
                         "invalid_scope", "server_error", "temporarily_unavailable", "login_required",
                         "consent_required", "interaction_required", "account_selection_required"})


def routes(gateway: Gateway) -> list[BaseRoute]:
    api = ConnectionsApi(gateway)
    return [Route("/oauth/connections", api.mine, methods=["GET"]),
            Route("/oauth/connections/{name}", api.end_mine, methods=["DELETE"])]


def page(status: int, title: str, message: str) -> Response:
    body = (f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p></body></html>")
    return HTMLResponse(body, status, headers={"cache-control": "no-store", "referrer-policy": "no-referrer"})


class PersonConnect:
    """The two legs of a person's connection (see the module's docstring)."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.sign_in = ConsoleSignIn(gateway.settings.oauth)

    def declared(self, name: str) -> Declared | None:
        return self.gateway.connections().declared(name)

    async def connect(self, request: Request, declared: Declared, redirect_uri: str) -> Response:
        from ..upstream.connections import challenge, digest
        from ..upstream.tokens import TokenUnavailable

        name = str(declared.spec.connection)
        if not self.sign_in.configured or self.gateway.identity is None:
            return page(501, "Cannot connect", f"Connecting an account for '{name}' needs the gateway's sign-in at "
                                               "its identity provider: the setting 'oauth.console' is not set.")
        browser = secrets.token_urlsafe(32)
        try:
            provider = await self.sign_in.answer()
            verifier = secrets.token_urlsafe(48)
            state = self.gateway.connections().sealed_state(
                {"kind": "who", "connection": name, "verifier": verifier, "redirect_uri": redirect_uri,
                 "browser": digest(browser)})
        except (SignInUnavailable, TokenUnavailable) as exc:
            return page(502, "Cannot connect", str(exc))
        query = {"response_type": "code", "client_id": provider["client_id"], "redirect_uri": redirect_uri,
                 "scope": provider["scope"], "resource": provider["resource"], "state": state,
                 "code_challenge": challenge(verifier), "code_challenge_method": "S256"}
        endpoint = provider["authorization_endpoint"]
        response = _redirect(f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}")
        # The browser that started the flow, and only it, may finish it (both legs check): a link to either
        # authorization server, forwarded to someone else, connects nothing for anyone.
        response.set_cookie(_cookie(name), browser, max_age=COOKIE_MAX_AGE_S, path="/oauth/", httponly=True,
                            samesite="lax", secure=request.url.scheme == "https")
        return response

    async def callback(self, request: Request, flow: dict[str, Any]) -> Response:
        from ..upstream.connections import digest, person
        from ..upstream.tokens import TokenRefused as CodeRefused
        from ..upstream.tokens import TokenUnavailable

        query = request.query_params
        name = str(flow.get("connection"))
        cookie = request.cookies.get(_cookie(name), "")
        if not cookie or not hmac.compare_digest(digest(cookie), str(flow.get("browser", ""))):
            return page(400, "Not connected", f"'{name}': this browser did not start this connection; open the "
                                              "link the tool gave in the browser you will connect with.")
        if query.get("error"):
            return page(400, "Not connected", f"'{name}': the authorization server answered "
                                              f"{said_error(query.get('error'))}.")
        code = query.get("code")
        if not code:
            return page(400, "Not connected", f"'{name}': the browser came back without a code")
        connections = self.gateway.connections()
        declared = connections.declared(name)
        if declared is None:
            return page(404, "Not connected", f"No tool declares the connection '{name}' any more.")
        client = self.gateway.http_client()
        try:
            if flow.get("kind") == "who":
                user, issuer = await self._signed_in(flow, code, query.get("iss"))
                return _redirect(await connections.begin(declared, client, person(issuer, user), user,
                                                         str(flow["redirect_uri"]), str(flow["browser"])))
            await connections.finish(flow, client, code, query.get("iss"))
        except TokenRefused as exc:
            return page(403, "Not connected", f"'{name}': the identity provider's token was refused: {exc}")
        except CodeRefused as exc:  # a code used before, or not this client's: the browser's flow is over
            return page(400, "Not connected", f"'{name}': {exc}")
        except (TokenUnavailable, SignInUnavailable) as exc:
            return page(502, "Not connected", f"'{name}': {exc}")
        done = page(200, "Connected", f"Your account for '{name}' is connected: the tools that use it act as you "
                                      "from now on. You can close this page.")
        done.delete_cookie(_cookie(name), path="/oauth/")
        return done

    async def _signed_in(self, flow: dict[str, Any], code: str, issuer: str | None) -> tuple[str, str]:
        """Who signed in at the identity provider: the access token its code is exchanged for, checked as every
        caller's is (``TokenRefused``)."""
        from ..upstream.tokens import TokenRefused as CodeRefused
        from ..upstream.tokens import checked_issuer

        provider = await self.sign_in.answer()
        checked_issuer(issuer, provider["issuer"], provider["authorization_response_iss_parameter_supported"])
        status, body = await _post(self.gateway, provider["token_endpoint"], {
            "grant_type": "authorization_code", "code": code, "redirect_uri": str(flow["redirect_uri"]),
            "client_id": provider["client_id"], "code_verifier": str(flow["verifier"]),
            "resource": provider["resource"]})
        try:
            answer = json.loads(body)
            token = answer["access_token"] if status == 200 else None
        except (ValueError, KeyError, TypeError):
            token = None
        if not isinstance(token, str):
            raise CodeRefused(f"the identity provider did not give a token for the sign-in (HTTP {status})")
        assert self.gateway.identity is not None
        identity = await self.gateway.identity.identity(str(token))
        return identity.user, identity.issuer


def _cookie(name: str) -> str:
    return f"tool_gateway_connect_{name}"


def said_error(code: str | None) -> str:
    """An authorization server's ``error`` as a page shows it: a code RFC 6749 §4.1.2.1 defines, else "an error".
    Never its ``error_description``: anyone can send a browser here with words of their own in the query."""
    return f"'{code}'" if code in ERROR_CODES else "with an error"


async def _post(gateway: Gateway, endpoint: str, form: dict[str, str]) -> tuple[int, bytes]:
    """``form`` posted to the identity provider's token endpoint as the console's public client (no secret)."""
    from ..upstream.tokens import AuthSpec, TokenSource

    public = TokenSource(AuthSpec(grant="authorization_code", client_id=form["client_id"], secret_name="",
                                  token_endpoint=endpoint))
    return await public.send(gateway.http_client(), endpoint, None, form)


def _redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=302, headers={"cache-control": "no-store", "referrer-policy": "no-referrer"})


class ConnectionsApi:
    def __init__(self, gateway: Gateway):
        self.gateway = gateway

    async def _caller(self, request: Request) -> Caller:
        return await authenticate(self.gateway, request.headers, request.client.host if request.client else None)

    def _connections(self) -> Connections:
        return self.gateway.connections()

    async def mine(self, request: Request) -> Response:
        caller = await self._caller(request)
        if caller.identity is None:
            return error_response(403, "Connections are a person's: call with an OAuth access token.")
        from ..upstream.connections import person

        who = person(caller.identity.issuer, caller.identity.user)
        return json_response({"connections": await self._connections().listing(who)})

    async def end_mine(self, request: Request) -> Response:
        caller = await self._caller(request)
        if caller.identity is None:
            return error_response(403, "Connections are a person's: call with an OAuth access token.")
        from ..upstream.connections import person

        name = request.path_params["name"]
        who = person(caller.identity.issuer, caller.identity.user)
        if not await self._connections().revoke(name, who, self.gateway.http_client()):
            return error_response(404, f"You have no connection '{name}'.")
        return Response(status_code=204)
