"""The MCP TypeScript SDK's OAuth client against the gateway's /mcp, with tokens from a real authorization server
(oidc-provider): tests/clients/oauth_client.mjs runs StreamableHTTPClientTransport with an OAuthClientProvider,
headless — this test is its user's browser (``idp.sign_in``) and hands the code back on its stdin. It discovers the
gateway's metadata from the 401, registers itself, signs in with code + PKCE for the /mcp resource and calls tools;
a tool that a scope would earn makes it ask its user for that scope (step-up), unless it holds a refresh token."""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from identity.crm_gateway import RULES, gateway_and_crm
from identity.idp import NODE, TOKEN_EXCHANGE, IdentityProvider, needs_idp
from support import needs_node_modules

SCRIPT = Path(__file__).resolve().parent.parent / "clients" / "oauth_client.mjs"
pytestmark = [needs_idp, needs_node_modules("@modelcontextprotocol/sdk/dist/esm/client/auth.js")]
# finance is also a scope a user may grant: bob (not in the group) can be asked for it when he calls the ledger.
STEP_UP_RULES = [*RULES, {"scope": "finance", "toolsets": ["finance"]}]
CODE_ONLY = ["authorization_code"]  # a client registered without refresh tokens


class Run:
    """What the script printed, one event a line, in order."""

    def __init__(self, events: list[dict[str, Any]]):
        self.events = events

    def all(self, kind: str) -> list[Any]:
        return [event[kind] for event in self.events if kind in event]

    @property
    def tools(self) -> set[str]:
        [tools] = self.all("tools")
        return set(tools)

    def called(self, name: str) -> dict[str, Any]:
        [event] = [event for event in self.events if event.get("called") == name]
        return event


def run_client(idp: IdentityProvider, mcp_url: str, user: str, calls: Iterable[str], timeout_s: float = 60,
               **plan: Any) -> Run:
    """``user`` signs in through the script, which then calls ``calls`` (no arguments): each authorization URL it
    prints is followed as a browser would, and the redirect's query written back on its stdin. ``plan``: the
    script's ``grant_types`` and ``client_id``."""
    plan["calls"] = [{"name": name} for name in calls]
    events: list[dict[str, Any]] = []
    idp.set_next_user(user)
    # stderr to a file: a pipe nobody reads while the client runs could fill and block it
    with tempfile.TemporaryFile("w+") as stderr, subprocess.Popen(
            [str(NODE), str(SCRIPT), mcp_url, json.dumps(plan)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=stderr, text=True) as process:
        watchdog = threading.Timer(timeout_s, process.kill)  # a hung client ends the loop below (EOF), not the run
        watchdog.start()
        try:
            assert process.stdout is not None and process.stdin is not None
            for line in process.stdout:
                events.append(json.loads(line))
                if "authorize" in events[-1]:
                    process.stdin.write(json.dumps(idp.sign_in(events[-1]["authorize"])) + "\n")
                    process.stdin.flush()
            stderr.seek(0)
            assert process.wait() == 0, f"the client failed: {events}\n{stderr.read()[-3000:]}"
        finally:
            watchdog.cancel()
            process.kill()
            idp.set_next_user("alice")
    return Run(events)


def where(requests: list[list[str]], gateway: str, idp: IdentityProvider) -> list[str]:
    """The client's requests as "METHOD gateway/path" or "METHOD idp/path"."""
    named = {gateway: "gateway", idp.issuer: "idp"}
    return [f"{method} {named[f'{url.scheme}://{url.netloc}']}{url.path}"
            for method, url in ((method, urlsplit(url)) for method, url in requests)]


def token_requests(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """The token requests the idp answered between two ``stats()``, by grant type."""
    return {grant: count - before["token_requests"].get(grant, 0) for grant, count in after["token_requests"].items()
            if count != before["token_requests"].get(grant, 0)}


def test_the_typescript_sdk_signs_in_and_people_see_their_tools(idp, tmp_path, monkeypatch):
    """alice (group finance) and bob (group support) each sign in through the TypeScript SDK: discovery from the
    401, dynamic registration, code + PKCE for the /mcp resource, one token request; each lists the tools their
    groups earn, whoami names them, and the CRM gets an exchanged token of each."""
    monkeypatch.setenv("GATEWAY_SECRET", idp.clients["gateway"]["client_secret"])
    with gateway_and_crm(idp, tmp_path) as (url, crm):
        before = idp.stats()
        alice = run_client(idp, f"{url}/mcp", "alice", ["whoami", "my_deals"])
        after_alice = idp.stats()
        bob = run_client(idp, f"{url}/mcp", "bob", ["whoami", "my_deals"])
    assert alice.tools == {"whoami", "my_deals", "ledger"}
    assert bob.tools == {"whoami", "my_deals", "tickets"}
    for run, user in ((alice, "alice"), (bob, "bob")):
        [token] = run.all("signed_in")
        assert token["sub"] == user and token["aud"] == f"{url}/mcp" and token["scope"] == "tools"
        me = json.loads(run.called("whoami")["content"][0])
        assert me == {"user": user, "caller": f"oauth:{user}", "client_id": token["client_id"]}
        assert json.loads(run.called("my_deals")["content"][0]) == {"deals_of": user}
    assert [seen["sub"] for seen in crm.seen] == ["alice", "bob"]
    assert all(seen["aud"] == crm.url and seen["act"] == {"sub": "gateway"} for seen in crm.seen)
    # The whole sign-in, as the client made it (the browser's hops at the idp aside): the refused request, the
    # gateway's metadata for /mcp (named by the 401), the idp's, one registration; finishAuth discovers both again
    # (the provider keeps no discoveryState), then one code exchange.
    [requests] = alice.all("requests")
    assert where(requests, url, idp) == [
        "POST gateway/mcp", "GET gateway/.well-known/oauth-protected-resource/mcp",
        "GET idp/.well-known/oauth-authorization-server", "POST idp/reg",
        "GET gateway/.well-known/oauth-protected-resource/mcp", "GET idp/.well-known/oauth-authorization-server",
        "POST idp/token"]
    assert after_alice["registrations"] - before["registrations"] == 1
    # one code exchange for alice, and the gateway's token exchange for her my_deals
    assert token_requests(before, after_alice) == {"authorization_code": 1, TOKEN_EXCHANGE: 1}


def test_a_client_without_a_refresh_token_steps_up_to_the_scope_a_tool_needs(idp, tmp_path):
    """bob's token has 'tools'; the ledger needs 'finance' (a scope-only rule): the gateway's 403 insufficient_scope
    makes the TypeScript SDK send bob to authorize "tools finance", and the call then succeeds. The client was
    registered beforehand for any scope: one the SDK registers itself cannot step up (below)."""
    client = idp.register_client(["http://127.0.0.1:9/callback"], token_endpoint_auth_method="none",
                                 grant_types=CODE_ONLY, response_types=["code"])
    with gateway_and_crm(idp, tmp_path, STEP_UP_RULES) as (url, _):
        bob = run_client(idp, f"{url}/mcp", "bob", ["ledger"], grant_types=CODE_ONLY, client_id=client["client_id"])
    assert "ledger" not in bob.tools  # not earned by his first token: step-up is for a call, not the listing
    first, stepped = bob.all("signed_in")
    assert first["scope"] == "tools" and set(stepped["scope"].split()) == {"tools", "finance"}
    assert first["client_id"] == stepped["client_id"] == client["client_id"]
    assert "scope=tools+finance" in bob.all("authorize")[1]
    assert bob.called("ledger") == {"called": "ledger", "content": ["ledger"], "isError": False}


def test_a_client_registered_for_the_first_scope_cannot_step_up(idp, tmp_path):
    """The SDK registers itself with the scope of the first challenge ("tools", the gateway's required scope), so
    when the step-up sends bob to authorize "tools finance", the authorization server refuses a scope the client
    was not registered for, and the call fails with that refusal."""
    with gateway_and_crm(idp, tmp_path, STEP_UP_RULES) as (url, _):
        bob = run_client(idp, f"{url}/mcp", "bob", ["ledger"], grant_types=CODE_ONLY)
    first, again = bob.all("authorize")
    assert "scope=tools&" in first and "scope=tools+finance&" in again
    assert len(bob.all("signed_in")) == 1
    refused = "authorization refused: invalid_scope: requested scope is not allowed"
    assert bob.called("ledger")["error"]["message"] == refused


def test_a_client_holding_a_refresh_token_does_not_step_up(idp, tmp_path):
    """The same step-up with a refresh token held (the SDK's usual registration): SDK 1.32.2 refreshes instead of
    asking its user (a refresh cannot widen the scope), gets the same 403 and gives up — the call fails with the
    gateway's 403 and bob is never asked (typescript-sdk#2255). The gateway's answer is the spec's."""
    with gateway_and_crm(idp, tmp_path, STEP_UP_RULES) as (url, _):
        before = idp.stats()
        bob = run_client(idp, f"{url}/mcp", "bob", ["ledger"])
        after = idp.stats()
    assert len(bob.all("authorize")) == 1 and len(bob.all("signed_in")) == 1
    assert bob.called("ledger")["error"] == {"name": "StreamableHTTPError", "code": 403,
                                             "message": "Streamable HTTP error: Server returned 403 after trying "
                                                        "upscoping"}
    assert token_requests(before, after) == {"authorization_code": 1, "refresh_token": 1}
