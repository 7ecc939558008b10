"""An upstream MCP server that demands OAuth, and the authorization server that issues its tokens, on one port of
127.0.0.1: ``<port> <access token lifetime in seconds>``.

The MCP server is the SDK's (``MCPServer`` with ``AuthSettings`` and a ``TokenVerifier``: its 401s name its
RFC 9728 metadata at ``/.well-known/oauth-protected-resource/mcp``, and tokens lacking scope ``tools`` are
refused). The authorization server is small and strict: RFC 8414 metadata, dynamic registration (RFC 7591),
an authorization endpoint that approves at once (the test plays the admin's browser) but checks the client,
its redirect URI, PKCE S256 (authlib's challenge) and the ``resource``; a token endpoint that checks the client's
secret (client_secret_post), the code, its verifier, redirect URI and resource, and refreshes (rotating the
refresh token). ``GET /counts`` answers how many tokens it issued by grant, and the access tokens it issued.
"""

from __future__ import annotations

import secrets
import sys
import time
from typing import Any
from urllib.parse import urlencode

import uvicorn
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

PORT, LIFETIME_S = int(sys.argv[1]), float(sys.argv[2])
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
SCOPE = "tools"

clients: dict[str, dict[str, Any]] = {}
codes: dict[str, dict[str, Any]] = {}
access: dict[str, AccessToken] = {}
refresh: dict[str, dict[str, Any]] = {}
counts: dict[str, Any] = {"authorization_code": 0, "refresh_token": 0, "issued": []}


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        found = access.get(token)
        return found if found is not None and (found.expires_at or 0) > time.time() else None


server = MCPServer("protected", token_verifier=Verifier(),
                  auth=AuthSettings(issuer_url=BASE, resource_server_url=RESOURCE, required_scopes=[SCOPE]))


@server.tool(structured_output=False)
def whisper(text: str) -> str:
    """Say the text back, quietly."""
    return text.lower()


def refused(error: str, status: int = 400) -> Response:
    return JSONResponse({"error": error}, status)


async def metadata(request: Request) -> Response:
    return JSONResponse({
        "issuer": BASE, "authorization_endpoint": f"{BASE}/authorize", "token_endpoint": f"{BASE}/token",
        "registration_endpoint": f"{BASE}/register", "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"], "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post"], "scopes_supported": [SCOPE]})


async def register(request: Request) -> Response:
    body = await request.json()
    client_id, secret = secrets.token_urlsafe(8), secrets.token_urlsafe(24)
    clients[client_id] = {"secret": secret, "redirect_uris": body.get("redirect_uris") or []}
    return JSONResponse({"client_id": client_id, "client_secret": secret, "redirect_uris": body["redirect_uris"],
                         "token_endpoint_auth_method": "client_secret_post"}, 201)


async def authorize(request: Request) -> Response:
    query = request.query_params
    client = clients.get(query.get("client_id", ""))
    if client is None or query.get("redirect_uri") not in client["redirect_uris"]:
        return refused("invalid_client")
    if query.get("code_challenge_method") != "S256" or not query.get("code_challenge") or \
            query.get("resource") != RESOURCE or not query.get("state"):
        return refused("invalid_request")
    code = secrets.token_urlsafe(16)
    codes[code] = dict(query)
    return RedirectResponse(f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}", 302)


async def token(request: Request) -> Response:
    form = await request.form()
    client = clients.get(str(form.get("client_id", "")))
    if client is None or form.get("client_secret") != client["secret"]:
        return refused("invalid_client", 401)
    if form.get("resource") != RESOURCE:
        return refused("invalid_target")
    grant = form.get("grant_type")
    if grant == "authorization_code":
        asked = codes.pop(str(form.get("code", "")), None)
        if asked is None or asked["client_id"] != form["client_id"] or asked["redirect_uri"] != form.get("redirect_uri") \
                or create_s256_code_challenge(str(form.get("code_verifier", ""))) != asked["code_challenge"]:
            return refused("invalid_grant")
        scope = asked.get("scope") or ""
    elif grant == "refresh_token":
        held = refresh.pop(str(form.get("refresh_token", "")), None)
        if held is None or held["client_id"] != form["client_id"]:
            return refused("invalid_grant")
        scope = held["scope"]
    else:
        return refused("unsupported_grant_type")
    counts[grant] += 1
    issued, renewal = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    counts["issued"].append(issued)
    access[issued] = AccessToken(token=issued, client_id=str(form["client_id"]), scopes=scope.split(),
                                 expires_at=int(time.time() + LIFETIME_S), resource=RESOURCE)
    refresh[renewal] = {"client_id": form["client_id"], "scope": scope}
    return JSONResponse({"access_token": issued, "token_type": "Bearer", "expires_in": LIFETIME_S,
                         "refresh_token": renewal, "scope": scope})


async def issued(request: Request) -> Response:
    return JSONResponse(counts)


mcp_app = server.streamable_http_app()
app = Starlette(routes=[Route("/.well-known/oauth-authorization-server", metadata),
                        Route("/register", register, methods=["POST"]), Route("/authorize", authorize),
                        Route("/token", token, methods=["POST"]), Route("/counts", issued),
                        Mount("/", mcp_app)],
                lifespan=lambda _: mcp_app.router.lifespan_context(mcp_app))

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
