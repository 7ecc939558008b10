"""Real OAuth clients against the gateway's /mcp, with tokens from a real authorization server (oidc-provider):
the official Python SDK's OAuthClientProvider discovers the gateway's metadata from its 401, registers itself,
signs its user in with authorization code + PKCE for the /mcp resource (RFC 8707) and calls tools. Two people see
the toolsets their claims earn; a per-person upstream call carries that person's exchanged token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from identity.idp import IdentityProvider, needs_idp
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support import free_socket, serving

from gateway.identity.config import parse
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

pytestmark = needs_idp

TOOLS = """\
tools:
  - id: whoami
    name: Who am I
    user_description: Says who the gateway thinks is calling.
    ai_description: Returns the caller as the gateway sees it.
    binding: {{python: people:whoami}}
    toolsets: [common]
  - id: ledger
    name: Ledger
    user_description: The finance ledger.
    ai_description: Reads the ledger.
    binding: {{python: people:ledger}}
    toolsets: [finance]
  - id: tickets
    name: Tickets
    user_description: The support queue.
    ai_description: Reads the support queue.
    binding: {{python: people:tickets}}
    toolsets: [support]
  - id: my_deals
    name: My deals
    user_description: The caller's deals at the CRM.
    ai_description: Returns the caller's deals.
    toolsets: [common]
    binding:
      http:
        url: {crm}/deals
        auth:
          token_exchange: {{client_id: gateway, client_secret: "{{{{ secrets.GATEWAY_SECRET }}}}", resource: {crm}}}
"""
CODE = '''\
def whoami(context) -> dict:
    return {"user": context.user, "caller": context.caller, "client_id": context.client_id}


def ledger() -> str:
    return "ledger"


def tickets() -> str:
    return "tickets"
'''
RULES = [{"scope": "tools", "toolsets": ["common"]},
         {"groups": ["finance"], "toolsets": ["finance"]},
         {"groups": ["support"], "toolsets": ["support"]},
         {"roles": ["gateway-admin"], "admin": True, "toolsets": "*"}]


class Crm:
    """An upstream API protected by the same identity provider: it checks each token's signature and audience
    (itself) and records whose it is."""

    def __init__(self, idp: IdentityProvider):
        self.keys = jwt.PyJWKClient(idp.jwks_url)
        self.issuer = idp.issuer
        self.url = ""
        self.seen: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def deals(request: Request) -> JSONResponse:
            token = request.headers.get("authorization", "").removeprefix("Bearer ")
            key = self.keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=["RS256", "ES256"], audience=self.url, issuer=self.issuer)
            self.seen.append({"sub": claims["sub"], "aud": claims["aud"], "act": claims.get("act"), "token": token})
            return JSONResponse({"deals_of": claims["sub"]})

        return Starlette(routes=[Route("/deals", deals)])


@contextmanager
def gateway_and_crm(idp: IdentityProvider, root: Path) -> Iterator[tuple[str, Crm]]:
    """The gateway on a port chosen first (its audience is its own URL, as a client checks), and the CRM."""
    crm = Crm(idp)
    with serving(crm.app()) as crm_server:
        crm.url = crm_server.url
        (root / "people.yaml").write_text(TOOLS.format(crm=crm.url), encoding="utf-8")
        (root / "python").mkdir(exist_ok=True)
        (root / "python" / "people.py").write_text(CODE, encoding="utf-8")
        sock = free_socket()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        oauth = parse({"issuer": idp.issuer, "audience": url, "rules": RULES, "required_scopes": ["tools"]})
        gateway = Gateway(Settings(definitions=root, reload=False, oauth=oauth))
        with serving(create_app(gateway), lifespan="on", sock=sock):
            yield url, crm


class Memory:
    """The SDK's TokenStorage, in memory: one per signed-in person."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def provider(idp: IdentityProvider, mcp_url: str, storage: Memory) -> OAuthClientProvider:
    """The SDK's provider with a headless user: the authorization URL is followed as a browser would, and the
    code it ends with is handed back."""
    pending: list[str] = []

    async def redirect(url: str) -> None:
        pending.append(url)

    async def callback() -> AuthorizationCodeResult:
        import anyio

        answer = await anyio.to_thread.run_sync(idp.sign_in, pending.pop())
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    metadata = OAuthClientMetadata(client_name="test client", redirect_uris=["http://127.0.0.1:9/callback"],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none", scope="tools")
    return OAuthClientProvider(server_url=mcp_url, client_metadata=metadata, storage=storage,
                               redirect_handler=redirect, callback_handler=callback)


async def session_of(idp: IdentityProvider, url: str, user: str) -> tuple[set[str], dict[str, Any], str, Memory]:
    """``user`` signs in through the SDK's provider: the tools listed, whoami's answer and my_deals' answer."""
    idp.set_next_user(user)
    storage = Memory()
    try:
        async with httpx2.AsyncClient(auth=provider(idp, f"{url}/mcp", storage), timeout=20) as http, \
                streamable_http_client(f"{url}/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            me = json.loads((await session.call_tool("whoami", {})).content[0].text)
            deals = (await session.call_tool("my_deals", {})).content[0].text
    finally:
        idp.set_next_user("alice")
    return tools, me, deals, storage


@pytest.mark.anyio
async def test_the_python_sdk_signs_in_and_people_see_their_tools(idp, tmp_path, monkeypatch):
    """alice (group finance) and bob (group support) each sign in through the SDK: discovery from the 401,
    dynamic registration, code + PKCE for the /mcp resource; each lists the tools their groups earn, whoami names
    them, and the CRM receives for each an exchanged token of theirs — never the token their client holds."""
    monkeypatch.setenv("GATEWAY_SECRET", idp.clients["gateway"]["client_secret"])
    with gateway_and_crm(idp, tmp_path) as (url, crm):
        alice = await session_of(idp, url, "alice")
        bob = await session_of(idp, url, "bob")
    assert alice[0] == {"whoami", "my_deals", "ledger"}
    assert bob[0] == {"whoami", "my_deals", "tickets"}
    assert alice[1]["user"] == "alice" and alice[1]["caller"] == "oauth:alice"
    assert bob[1]["user"] == "bob" and bob[1]["client_id"] == bob[3].client.client_id
    assert json.loads(alice[2]) == {"deals_of": "alice"} and json.loads(bob[2]) == {"deals_of": "bob"}
    assert [seen["sub"] for seen in crm.seen] == ["alice", "bob"]
    assert all(seen["aud"] == crm.url and seen["act"] == {"sub": "gateway"} for seen in crm.seen)
    held = {alice[3].tokens.access_token, bob[3].tokens.access_token}
    assert not held & {seen["token"] for seen in crm.seen}
    claims = jwt.decode(alice[3].tokens.access_token, options={"verify_signature": False})
    assert claims["aud"] == f"{url}/mcp"  # RFC 8707: the client asked for the MCP endpoint's resource
