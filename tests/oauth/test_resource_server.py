"""The gateway as an OAuth 2.1 resource server: protected-resource metadata, challenges, people's toolsets by their
claims, admin by a role, step-up, and who called in the audit trail — against a real issuer on 127.0.0.1."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from oauth_support import AUDIENCE, bearer

from gateway.settings import hash_key

RESOURCE_METADATA = f'resource_metadata="{AUDIENCE}/.well-known/oauth-protected-resource'


def test_the_metadata_documents_say_where_to_get_a_token(issuer, gateway_for):
    """RFC 9728: the gateway's document and the path-based one of /mcp, each naming its resource, the issuer and
    the scopes the rules use; public (no credentials), header bearer only."""
    with gateway_for(issuer, required_scopes=["tools"]) as served:
        root = httpx.get(f"{served.url}/.well-known/oauth-protected-resource")
        mcp = httpx.get(f"{served.url}/.well-known/oauth-protected-resource/mcp")
    assert root.status_code == mcp.status_code == 200
    assert root.json() == {"resource": AUDIENCE, "authorization_servers": [issuer.url],
                           "bearer_methods_supported": ["header"],
                           "resource_signing_alg_values_supported": root.json()["resource_signing_alg_values_supported"],
                           "scopes_supported": ["tools", "finance"]}
    assert mcp.json()["resource"] == f"{AUDIENCE}/mcp"
    assert "none" not in root.json()["resource_signing_alg_values_supported"]
    assert not any(alg.startswith("HS") for alg in root.json()["resource_signing_alg_values_supported"])


def test_without_oauth_there_is_no_metadata(tmp_path):
    from support import running

    with running(tmp_path) as served:
        assert httpx.get(f"{served.url}/.well-known/oauth-protected-resource").status_code == 404


def test_every_401_names_the_metadata(issuer, gateway_for):
    """No token: the challenge names the metadata (path-based on /mcp) and the scope to ask for; a bad token adds
    error="invalid_token" with the reason."""
    with gateway_for(issuer, required_scopes=["tools"]) as served:
        for method, path in (("GET", "/tools"), ("POST", "/tools/whoami/call"), ("GET", "/admin/api/overview"),
                             ("GET", "/metrics"), ("POST", "/v1/chat/completions")):
            refused = httpx.request(method, served.url + path, json={})
            assert refused.status_code == 401, path
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and RESOURCE_METADATA + '"' in challenge, path
            assert 'scope="tools"' in challenge and "error=" not in challenge, path
        mcp = httpx.post(f"{served.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         headers={"Accept": "application/json, text/event-stream"})
        assert mcp.status_code == 401 and RESOURCE_METADATA + '/mcp"' in mcp.headers["www-authenticate"]
        wrong = httpx.get(f"{served.url}/tools", headers=bearer("not.a.token"))
        assert wrong.status_code == 401
        assert 'error="invalid_token"' in wrong.headers["www-authenticate"]


def test_people_see_the_toolsets_their_claims_earn(issuer, gateway_for):
    """alice (scope finance) lists and calls pay, not ticket; bob (group support) the reverse; a tool outside
    one's toolsets is unknown, as for an API key — unless a scope would earn it (step-up, below)."""
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools finance")
    bob = issuer.token(sub="bob", audience=AUDIENCE, scope="tools", groups=["support"])
    with gateway_for(issuer) as served:
        listed = {name: {t["id"] for t in httpx.get(f"{served.url}/tools", headers=bearer(token)).json()["tools"]}
                  for name, token in (("alice", alice), ("bob", bob))}
        assert listed == {"alice": {"whoami", "pay"}, "bob": {"whoami", "ticket"}}
        paid = httpx.post(f"{served.url}/tools/pay/call", json={"amount": 3}, headers=bearer(alice))
        assert paid.json()["result"] == "paid 3.0"
        hidden = httpx.post(f"{served.url}/tools/ticket/call", json={"title": "x"}, headers=bearer(alice))
        assert hidden.status_code == 404 and hidden.json()["did_you_mean"] == []


def test_a_scope_that_would_earn_a_tool_is_asked_for(issuer, gateway_for):
    """bob lacks 'finance', which a rule grants pay for: 403 insufficient_scope naming every scope he needs."""
    bob = issuer.token(sub="bob", audience=AUDIENCE, scope="tools", groups=["support"])
    with gateway_for(issuer) as served:
        refused = httpx.post(f"{served.url}/tools/pay/call", json={"amount": 1}, headers=bearer(bob))
    assert refused.status_code == 403
    challenge = refused.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="tools finance"' in challenge
    assert RESOURCE_METADATA in challenge


def test_a_required_scope_missing_is_a_403_step_up(issuer, gateway_for):
    token = issuer.token(audience=AUDIENCE, scope="finance")
    with gateway_for(issuer, required_scopes=["tools"]) as served:
        refused = httpx.get(f"{served.url}/tools", headers=bearer(token))
    assert refused.status_code == 403 and 'scope="finance tools"' in refused.headers["www-authenticate"]


def test_context_user_and_the_audit_trail_name_the_person(issuer, gateway_for, tmp_path):
    """A tool sees the token's user (X-User cannot override it); the audit line has caller oauth:<user>, the user,
    the client id and the issuer."""
    audit = tmp_path / "audit.jsonl"
    token = issuer.token(sub="alice", audience=f"{AUDIENCE}/mcp", scope="tools", client_id="claude")
    with gateway_for(issuer, settings={"audit_log": str(audit)}) as served:
        called = httpx.post(f"{served.url}/tools/whoami/call", json={},
                            headers={**bearer(token), "X-User": "mallory"})
    assert called.json()["result"] == {"user": "alice", "caller": "oauth:alice", "client_id": "claude",
                                       "issuer": issuer.url}
    line = json.loads(audit.read_text().splitlines()[-1])
    assert {k: line[k] for k in ("caller", "user", "client_id", "issuer")} == {
        "caller": "oauth:alice", "user": "alice", "client_id": "claude", "issuer": issuer.url}


def test_an_admin_role_opens_the_console_api(issuer, gateway_for):
    carol = issuer.token(sub="carol", audience=AUDIENCE, roles=["gateway-admin"])
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools finance")
    with gateway_for(issuer) as served:
        assert httpx.get(f"{served.url}/admin/api/overview", headers=bearer(carol)).status_code == 200
        refused = httpx.get(f"{served.url}/admin/api/overview", headers=bearer(alice))
        assert refused.status_code == 403 and "admin" in refused.json()["error"]
        # admin: true with toolsets "*": carol lists every tool
        assert len(httpx.get(f"{served.url}/tools", headers=bearer(carol)).json()["tools"]) == 3


def test_api_keys_work_beside_tokens(issuer, gateway_for):
    keys = [{"name": "ops", "sha256": hash_key("ops-key"), "toolsets": ["support"]}]
    from gateway.settings import _api_key

    with gateway_for(issuer, settings={"api_keys": tuple(_api_key(k) for k in keys)}) as served:
        listed = httpx.get(f"{served.url}/tools", headers=bearer("ops-key")).json()["tools"]
        assert {t["id"] for t in listed} == {"ticket"}
        token = issuer.token(audience=AUDIENCE, scope="tools")
        assert httpx.get(f"{served.url}/tools", headers=bearer(token)).status_code == 200


def test_no_rules_means_every_valid_token_uses_every_tool(issuer, gateway_for):
    token = issuer.token(audience=AUDIENCE)
    with gateway_for(issuer, rules=None) as served:
        assert len(httpx.get(f"{served.url}/tools", headers=bearer(token)).json()["tools"]) == 3
        assert httpx.get(f"{served.url}/admin/api/overview", headers=bearer(token)).status_code == 403


@pytest.mark.anyio
async def test_the_mcp_sdk_client_with_a_token_sees_its_tools(issuer, gateway_for):
    """The official client on /mcp with alice's token for the MCP resource: her tools only, and calls run as her."""
    token = issuer.token(sub="alice", audience=f"{AUDIENCE}/mcp", scope="tools finance")
    with gateway_for(issuer) as served:
        async with httpx.AsyncClient(headers=bearer(token)) as http, \
                streamable_http_client(f"{served.url}/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            result = await session.call_tool("whoami", {})
    assert tools == {"whoami", "pay"}
    assert json.loads(result.content[0].text)["user"] == "alice"


def test_mcp_asks_for_the_scope_a_tool_needs(issuer, gateway_for):
    """On /mcp, a tools/call of a tool a scope would earn is an HTTP 403 with the step-up challenge (path-based
    metadata), where MCP clients look for it; a tool no scope earns stays an unknown tool."""
    bob = issuer.token(sub="bob", audience=f"{AUDIENCE}/mcp", scope="tools", groups=["support"])
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "pay", "arguments": {"amount": 1}}}
    headers = {**bearer(bob), "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    with gateway_for(issuer) as served:
        refused = httpx.post(f"{served.url}/mcp", json=call, headers=headers)
        unknown = httpx.post(f"{served.url}/mcp", headers=headers, json={**call, "params": {
            "name": "no_such_tool", "arguments": {}}})
    assert refused.status_code == 403
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert 'scope="tools finance"' in refused.headers["www-authenticate"]
    assert f'{AUDIENCE}/.well-known/oauth-protected-resource/mcp"' in refused.headers["www-authenticate"]
    assert unknown.status_code != 403 and "www-authenticate" not in unknown.headers


def test_status_tells_admins_about_the_issuers_keys(issuer, gateway_for):
    carol = issuer.token(sub="carol", audience=AUDIENCE, roles=["gateway-admin"])
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    with gateway_for(issuer) as served:
        admin = httpx.get(f"{served.url}/status", headers=bearer(carol)).json()
        other = httpx.get(f"{served.url}/status", headers=bearer(alice)).json()
    assert admin["oauth"]["issuer"] == issuer.url and admin["oauth"]["keys"] == 2
    assert admin["oauth"]["last_error"] is None and admin["oauth"]["fetches"] >= 1
    assert "oauth" not in other
