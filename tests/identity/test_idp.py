"""The test authorization server works as the other identity tests assume: both discovery documents, JWT access
tokens that verify against its JWKS with the resource as audience and the user's claims, client credentials, token
exchange, refresh, PKCE enforced, dynamic registration, and the test-only routes."""

from __future__ import annotations

import asyncio

import httpx2
import jwt
import pytest
from identity.idp import (
    ACCESS_TOKEN_TYPE,
    TOKEN_EXCHANGE,
    USERS,
    IdentityProviderError,
    confidential_client,
    needs_idp,
    running_idp,
)
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from support import serving

pytestmark = needs_idp
RESOURCE = "http://127.0.0.1:8123/mcp"
OTHER = "http://127.0.0.1:9345/api"


def verified(idp, token: str, audience: str) -> dict:
    """The token's claims once PyJWT has checked its signature (key by ``kid`` from the JWKS), issuer and audience."""
    key = jwt.PyJWKClient(idp.jwks_url).get_signing_key_from_jwt(token)
    return jwt.decode(token, key, algorithms=["RS256", "ES256"], audience=audience, issuer=idp.issuer)


def test_both_discovery_documents_describe_the_server(idp):
    for document in ("openid-configuration", "oauth-authorization-server"):
        metadata = idp.discovery(document)
        assert metadata["issuer"] == idp.issuer and metadata["jwks_uri"] == idp.jwks_url
        assert metadata["code_challenge_methods_supported"] == ["S256"]
        assert {"authorization_code", "refresh_token", "client_credentials", TOKEN_EXCHANGE} <= set(
            metadata["grant_types_supported"])
        assert metadata["registration_endpoint"] == f"{idp.issuer}/reg"
    keys = idp.http.get("/jwks").json()["keys"]
    assert {key["alg"] for key in keys} == {"RS256", "ES256"} and not any("d" in key for key in keys)


def test_a_registered_public_client_gets_a_jwt_for_the_resource_with_the_users_claims(idp):
    client = idp.register_client(["http://127.0.0.1:3030/callback"], token_endpoint_auth_method="none",
                                 grant_types=["authorization_code", "refresh_token"], client_name="a test client")
    assert "client_secret" not in client
    tokens = idp.authorize(client, user="alice", scopes=["tools", "finance"], resource=RESOURCE)
    claims = verified(idp, tokens["access_token"], RESOURCE)
    assert claims["sub"] == "alice" and claims["client_id"] == client["client_id"]
    assert set(claims["scope"].split()) == {"tools", "finance"} and tokens["token_type"] == "Bearer"
    assert (claims["groups"], claims["roles"], claims["email"]) == (["finance"], ["analyst"], USERS["alice"]["email"])
    assert claims["exp"] > claims["iat"]
    assert jwt.get_unverified_header(tokens["access_token"])["typ"] == "at+jwt"


def test_without_a_login_hint_the_next_user_signs_in(idp):
    client = idp.clients["gateway"]
    idp.set_next_user("bob")
    try:
        tokens = idp.authorize(client, scopes=["tools"], resource=RESOURCE)
    finally:
        idp.set_next_user("alice")
    claims = verified(idp, tokens["access_token"], RESOURCE)
    assert claims["sub"] == "bob" and claims["groups"] == ["support"]
    assert idp.stats()["next_user"] == "alice"


def test_an_unknown_user_is_refused_at_the_redirect(idp):
    client = idp.clients["gateway"]
    with pytest.raises(IdentityProviderError, match="access_denied"):
        idp.authorization_code(client, user="mallory", resource=RESOURCE)


def test_a_wrong_pkce_verifier_is_refused(idp):
    client = idp.clients["gateway"]
    code, verifier = idp.authorization_code(client, user="alice", resource=RESOURCE)
    refused = idp.token(client, grant_type="authorization_code", code=code, code_verifier=verifier[::-1],
                        redirect_uri=client["redirect_uris"][0], resource=RESOURCE)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"


def test_an_authorization_request_without_pkce_is_refused(idp):
    client = idp.clients["gateway"]
    url = idp.authorization_url(client, challenge="", resource=RESOURCE).replace("&code_challenge_method=S256", "")
    refused = idp.sign_in(url)
    assert refused["error"] == "invalid_request" and "PKCE" in refused["error_description"]


def test_a_request_without_scope_gets_the_default_scope(idp):
    client = idp.clients["gateway"]
    tokens = idp.authorize(client, user="alice", scopes=(), resource=RESOURCE)
    assert verified(idp, tokens["access_token"], RESOURCE)["scope"] == "tools"


def test_the_native_clients_loopback_redirect_matches_on_any_port(idp):
    client = idp.clients["gateway"]
    tokens = idp.authorize(client, user="carol", resource=RESOURCE, redirect_uri="http://127.0.0.1:41234/callback")
    assert verified(idp, tokens["access_token"], RESOURCE)["roles"] == ["gateway-admin"]


def test_a_refresh_token_gives_a_new_access_token(idp):
    client = idp.clients["gateway"]
    tokens = idp.authorize(client, user="alice", scopes=["tools"], resource=RESOURCE)
    again = idp.refresh(client, tokens["refresh_token"], resource=RESOURCE)
    assert again["access_token"] != tokens["access_token"]
    claims = verified(idp, again["access_token"], RESOURCE)
    assert claims["sub"] == "alice" and claims["scope"] == "tools"


def test_client_credentials_give_a_jwt_for_the_resource(idp):
    client = idp.clients["gateway"]
    tokens = idp.client_credentials(client["client_id"], client["client_secret"], ["read"], OTHER)
    claims = verified(idp, tokens["access_token"], OTHER)
    assert claims["sub"] == "gateway" and claims["client_id"] == "gateway" and claims["scope"] == "read"
    with pytest.raises(IdentityProviderError, match="invalid_client"):
        idp.client_credentials(client["client_id"], "wrong", ["read"], OTHER)


def test_token_exchange_keeps_the_subject_and_changes_the_audience(idp):
    client = idp.clients["gateway"]
    users_token = idp.authorize(client, user="bob", scopes=["tools", "read"], resource=RESOURCE)["access_token"]
    exchanged = idp.token_exchange(client["client_id"], client["client_secret"], users_token, OTHER)
    assert exchanged["issued_token_type"] == ACCESS_TOKEN_TYPE
    claims = verified(idp, exchanged["access_token"], OTHER)
    assert claims["sub"] == "bob" and claims["aud"] == OTHER and claims["act"] == {"sub": "gateway"}
    assert set(claims["scope"].split()) == {"tools", "read"} and claims["groups"] == ["support"]
    narrowed = idp.token_exchange(client["client_id"], client["client_secret"], users_token, OTHER, scopes=["read"])
    assert verified(idp, narrowed["access_token"], OTHER)["scope"] == "read"


def test_token_exchange_refuses_a_token_it_did_not_sign(idp):
    client = idp.clients["gateway"]
    users_token = idp.authorize(client, user="alice", resource=RESOURCE)["access_token"]
    head, body, signature = users_token.split(".")
    forged = ".".join([head, body, signature[::-1]])
    with pytest.raises(IdentityProviderError, match="invalid_request") as refused:
        idp.token_exchange(client["client_id"], client["client_secret"], forged, OTHER)
    assert forged not in str(refused.value)


def test_a_resource_off_127_0_0_1_is_refused(idp):
    client = idp.clients["gateway"]
    with pytest.raises(IdentityProviderError, match="invalid_target"):
        idp.client_credentials(client["client_id"], client["client_secret"], ["read"], "https://example.com/api")


def test_a_resource_configured_for_es256_gets_tokens_signed_with_the_ec_key(tmp_path):
    es256 = "http://127.0.0.1:7001/es"
    with running_idp(tmp_path / "idp.log", users={"dave": {"groups": ["ops"]}}, clients=[confidential_client("svc")],
                     resources={es256: {"alg": "ES256", "scope": "ops"}}) as idp:
        client = idp.clients["svc"]
        assert "ops" in idp.discovery()["scopes_supported"]
        tokens = idp.authorize(client, scopes=["ops"], resource=es256)
        header = jwt.get_unverified_header(tokens["access_token"])
        ec_key = next(key for key in idp.http.get("/jwks").json()["keys"] if key["alg"] == "ES256")
        assert header["alg"] == "ES256" and header["kid"] == ec_key["kid"]
        claims = verified(idp, tokens["access_token"], es256)
        assert claims["sub"] == "dave" and claims["groups"] == ["ops"] and claims["scope"] == "ops"
        other = idp.client_credentials("svc", client["client_secret"], ["tools"], RESOURCE)["access_token"]
        assert jwt.get_unverified_header(other)["alg"] == "RS256"


def test_a_resource_configured_for_opaque_tokens_gets_them_and_they_introspect(tmp_path):
    opaque = "http://127.0.0.1:7002/opaque"
    with running_idp(tmp_path / "idp.log", clients=[confidential_client("svc")],
                     resources={opaque: {"format": "opaque"}}) as idp:
        client = idp.clients["svc"]
        token = idp.authorize(client, user="bob", scopes=["tools"], resource=opaque)["access_token"]
        assert token.count(".") == 0
        introspected = idp.http.post(idp.discovery()["introspection_endpoint"], data={"token": token},
                                     auth=("svc", client["client_secret"])).json()
        assert introspected["active"] is True and introspected["sub"] == "bob" and introspected["aud"] == opaque
        assert introspected["scope"] == "tools" and introspected["groups"] == ["support"]


def test_stats_count_jwks_fetches_and_token_requests_by_grant(idp):
    before = idp.stats()
    client = idp.clients["gateway"]
    tokens = idp.client_credentials(client["client_id"], client["client_secret"], ["read"], OTHER)
    verified(idp, tokens["access_token"], OTHER)
    after = idp.stats()
    assert after["jwks_fetches"] == before["jwks_fetches"] + 1
    counted = after["token_requests"].get("client_credentials", 0) - before["token_requests"].get("client_credentials", 0)
    assert counted == 1


class MemoryStorage:
    """The SDK client's token storage, in memory."""

    def __init__(self):
        self.tokens = self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def protected_resource(idp) -> Starlette:
    """The smallest RFC 9728 resource server: a 401 naming its metadata, the metadata, and a 200 for a token from
    ``idp`` whose audience is this very URL."""

    async def metadata(request: Request) -> Response:
        resource = str(request.base_url).rstrip("/") + "/mcp"
        return JSONResponse({"resource": resource, "authorization_servers": [idp.issuer], "scopes_supported": ["tools"]})

    async def guarded(request: Request) -> Response:
        resource = str(request.url)
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            claims = verified(idp, token, resource) if scheme.lower() == "bearer" else None
        except jwt.InvalidTokenError:
            claims = None
        if claims is None:
            where = str(request.base_url) + ".well-known/oauth-protected-resource/mcp"
            return Response(status_code=401, headers={"www-authenticate": f'Bearer resource_metadata="{where}"'})
        return JSONResponse({"sub": claims["sub"], "scope": claims["scope"]})

    return Starlette(routes=[Route("/.well-known/oauth-protected-resource/mcp", metadata), Route("/mcp", guarded)])


async def test_the_mcp_sdks_oauth_client_completes_the_flow_headlessly(idp):
    """The Python SDK's OAuthClientProvider discovers the resource's metadata and this server's, registers,
    authorises (with the next user, as it sends no login_hint) and calls the resource with the token."""
    redirect = "http://127.0.0.1:3031/callback"
    answers: dict[str, str] = {}

    async def browse(url: str) -> None:
        answers.update(await asyncio.to_thread(idp.sign_in, url))

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=answers["code"], state=answers.get("state"), iss=answers.get("iss"))

    with serving(protected_resource(idp)) as resource:
        auth = OAuthClientProvider(f"{resource.url}/mcp", OAuthClientMetadata(
            redirect_uris=[redirect], client_name="sdk", grant_types=["authorization_code", "refresh_token"]),
            MemoryStorage(), redirect_handler=browse, callback_handler=callback)
        idp.set_next_user("carol")
        try:
            async with httpx2.AsyncClient(auth=auth, timeout=30) as client:
                answer = await client.get(f"{resource.url}/mcp")
        finally:
            idp.set_next_user("alice")
    assert answer.status_code == 200 and answer.json() == {"sub": "carol", "scope": "tools"}
