"""Real OAuth clients against the gateway's /mcp, with tokens from a real authorization server (oidc-provider):
the official Python SDK's OAuthClientProvider discovers the gateway's metadata from its 401, registers itself,
signs its user in with authorization code + PKCE for the /mcp resource (RFC 8707) and calls tools. Two people see
the toolsets their claims earn; a per-person upstream call carries that person's exchanged token."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import jwt
import pytest
from identity.crm_gateway import gateway_and_crm
from identity.idp import IdentityProvider, needs_idp
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

pytestmark = needs_idp


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
