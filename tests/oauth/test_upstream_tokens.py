"""Each person's own credentials upstream: an HTTP-bound tool with ``auth: {token_exchange}`` reaches its API with a
token the identity provider exchanged for the caller's (the API records whose), never the caller's own token;
``client_credentials`` with the gateway's service account. A real issuer and a real API on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from issuer import Issuer
from oauth_support import AUDIENCE, BearerApi, bearer
from support import running, serving

from gateway.identity.config import parse
from gateway.settings import _api_key, hash_key

API = "https://api.example"  # the audience the API's tokens must name



TOOLS = """\
tools:
  - id: my_profile
    name: My profile
    user_description: The caller's profile at the API.
    ai_description: Returns the caller's profile.
    input_schema: {{type: object, properties: {{echo: {{type: boolean}}}}}}
    binding:
      http:
        url: {api}/me
        query: {{echo: "{{{{ args.echo }}}}"}}
        auth:
          token_exchange: {{client_id: gateway, client_secret: "{{{{ secrets.GW_SECRET }}}}", audience: {aud}}}
  - id: service_profile
    name: Service profile
    user_description: The gateway's own profile at the API.
    ai_description: Returns the service account's profile.
    binding:
      http:
        url: {api}/me
        auth:
          client_credentials: {{client_id: gateway, client_secret: "{{{{ secrets.GW_SECRET }}}}", audience: {aud},
                                client_auth: post}}
"""


CRM_SOURCE = """\
sources:
  - id: crm
    prefix: crm_
    openapi:
      spec: crm.json
      auth:
        token_exchange: {{client_id: gateway, client_secret: "{{{{ secrets.GW_SECRET }}}}", audience: {aud}}}
"""


@pytest.fixture
def upstream(issuer: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[BearerApi, str]]:
    monkeypatch.setenv("GW_SECRET", "gateway-secret")
    api = BearerApi(issuer, API, lambda c: {"sub": c["sub"], "aud": c["aud"], "act": c.get("act")})
    issuer.grants.clear()
    with serving(api.app()) as server:
        (tmp_path / "api.yaml").write_text(TOOLS.format(api=server.url, aud=API), encoding="utf-8")
        document = {"openapi": "3.1.0", "info": {"title": "CRM", "version": "1"}, "servers": [{"url": server.url}],
                    "components": {"securitySchemes": {"crm": {"type": "oauth2", "flows": {}}}},
                    "security": [{"crm": []}],
                    "paths": {"/me": {"get": {"operationId": "whoAmI", "responses": {"200": {"description": "ok"}}}}}}
        (tmp_path / "crm.json").write_text(json.dumps(document), encoding="utf-8")
        (tmp_path / "crm.yaml").write_text(CRM_SOURCE.format(aud=API), encoding="utf-8")
        oauth = parse({"issuer": issuer.url, "audience": AUDIENCE, "jwks": {"refresh_min_s": 0},
                       "rules": [{"scope": "tools", "toolsets": "*"},
                                 {"roles": ["gateway-admin"], "admin": True, "toolsets": "*"}]})
        keys = (_api_key({"name": "robot", "sha256": hash_key("robot-key")}),)
        with running(tmp_path, oauth=oauth, api_keys=keys) as served:
            yield api, served.url


def _call(url: str, tool: str, credential: str, **arguments) -> dict:
    answer = httpx.post(f"{url}/tools/{tool}/call", json=arguments, headers=bearer(credential), timeout=20)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_each_person_reaches_the_api_as_themselves(issuer, upstream):
    """alice's and bob's calls reach the API with tokens the issuer exchanged for theirs — sub alice / bob, aud
    the API, act the gateway — and neither person's own token ever reaches the API. An exchanged token is kept:
    a second call of alice's asks the issuer nothing."""
    api, url = upstream
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    bob = issuer.token(sub="bob", audience=AUDIENCE, scope="tools")
    first = _call(url, "my_profile", alice)["result"]
    assert first == {"sub": "alice", "aud": API, "act": {"sub": "gateway"}, "echo": None}
    assert _call(url, "my_profile", bob)["result"]["sub"] == "bob"
    exchanges = [grant for grant in issuer.grants if grant["grant_type"].endswith("token-exchange")]
    assert [grant["audience"] for grant in exchanges] == [API, API]
    assert _call(url, "my_profile", alice)["result"]["sub"] == "alice"
    assert len([g for g in issuer.grants if g["grant_type"].endswith("token-exchange")]) == 2
    assert api.seen and not {f"Bearer {alice}", f"Bearer {bob}"} & set(api.seen)


def test_the_exchanged_token_is_redacted_from_results(issuer, upstream):
    _api, url = upstream
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    result = _call(url, "my_profile", alice, echo=True)["result"]
    assert result["echo"] == "Bearer [secret upstream token]"


def test_an_api_key_has_no_person_to_exchange_for(upstream):
    api, url = upstream
    answer = _call(url, "my_profile", "robot-key")
    assert answer["is_error"] and "call it with an access token" in answer["text"]
    assert api.seen == []


def test_the_service_account_token_is_shared_and_kept(issuer, upstream):
    _api, url = upstream
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    assert _call(url, "service_profile", alice)["result"]["sub"] == "gateway"
    assert _call(url, "service_profile", "robot-key")["result"]["sub"] == "gateway"
    assert [g["grant_type"] for g in issuer.grants] == ["client_credentials"]
    assert issuer.grants[0]["client_id"] == "gateway"  # client_auth: post sends it in the form


def test_a_refusing_identity_provider_is_an_error_result_without_secrets(issuer, upstream, monkeypatch):
    api, url = upstream
    monkeypatch.setenv("GW_SECRET", "a-wrong-secret-value")
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    answer = _call(url, "my_profile", alice)
    assert answer["is_error"] and "refused: invalid_client" in answer["text"]
    assert "a-wrong-secret-value" not in answer["text"] and alice not in answer["text"]
    assert api.seen == []



def test_an_openapi_source_sends_each_person_an_exchanged_token(issuer, upstream):
    """An OpenAPI document whose operation needs OAuth 2 (its 'crm' scheme), served with the source's auth: the
    generated tool sends alice's exchanged token, and the scheme counts as given (no warning about it)."""
    _api, url = upstream
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    assert _call(url, "crm_whoAmI", alice)["result"]["sub"] == "alice"
    carol = issuer.token(sub="carol", audience=AUDIENCE, roles=["gateway-admin"])
    problems = httpx.get(f"{url}/admin/api/problems", headers=bearer(carol)).json()
    assert "security scheme" not in json.dumps(problems)


@pytest.mark.parametrize("lifetime", ["NaN", "Infinity", "-Infinity", "-5", "0", "true", '"300"'])
def test_a_lifetime_that_is_no_finite_positive_number_is_taken_as_none_said(lifetime):
    """A token endpoint's ``expires_in`` of NaN or Infinity (Python's json reads both) would make a token never
    expire, or always: it counts as not said (the default lifetime)."""
    from gateway.upstream.tokens import DEFAULT_LIFETIME_S, _issued

    body = f'{{"access_token": "t", "expires_in": {lifetime}}}'.encode()
    assert _issued("https://idp.example/token", 200, body, 1000.0).expires_at == 1000.0 + DEFAULT_LIFETIME_S
