"""Each person's own connection to an upstream (``auth: {authorization_code: …}``): a CRM API that trusts only its
own authorization server, which knows people by their CRM accounts. Two real issuers on 127.0.0.1: the gateway's
identity provider (the console's public client signs the browser in) and the CRM's (the gateway its confidential
client). The browser is httpx following the redirects by hand, so each leg is seen.

A person not connected gets an error result with the link; opening it signs the browser in at the gateway's
identity provider, then at the CRM's; from then on that person's calls carry their own CRM token — refreshed when
it expires, ended by them or by an admin, listed without it, and kept encrypted (in a file, or in Redis for a
cluster, where a connection made at one replica serves calls at another)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from issuer import Issuer, issuing
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from oauth_support import AUDIENCE, BearerApi, bearer, connect
from oauth_support import link as _link
from support import RedisServer, running, serving

from gateway.errors import DefinitionsInvalid
from gateway.identity.config import parse
from gateway.settings import _api_key, hash_key

CRM = "https://crm.example/api"  # the resource the CRM's tokens name
# A JWT in the clear: base64url of '{"' (its header), then the dots between its parts. Sealed bytes are base64url
# too, with no dot: they may hold "eyJ" by chance (a 1,292-byte record: about 1 in 200 for each check), never this.
JWT = re.compile(rb"eyJ[\w-]+\.[\w-]+\.")
KEY = "a-long-passphrase-that-seals-the-connections"

TOOLS = """\
tools:
  - id: crm_me
    name: My CRM account
    user_description: Who the CRM thinks the caller is.
    ai_description: Returns the caller's CRM account.
    input_schema: {{type: object, properties: {{echo: {{type: boolean}}}}}}
    binding:
      http:
        url: {api}/me
        query: {{echo: "{{{{ args.echo }}}}"}}
        auth:
          authorization_code:
            connection: crm
            client_id: gateway-crm
            client_secret: "{{{{ secrets.CRM_SECRET }}}}"
            issuer: {crm_issuer}
            resource: {crm}
            scope: contacts
"""



OTHER = """\
tools:
  - id: ping
    name: Ping
    user_description: Answers.
    ai_description: Answers pong.
    binding: {http: {url: "https://ping.example/"}}
"""


@pytest.fixture(scope="module")
def crm() -> Iterator[Issuer]:
    with issuing(Issuer(clients={"gateway-crm": "crm-secret"})) as crm:
        yield crm


@pytest.fixture
def world(issuer: Issuer, crm: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CRM_SECRET", "crm-secret")
    monkeypatch.setenv("CONNECTIONS_KEY", KEY)
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    crm.revoked.clear()
    api = BearerApi(crm, CRM, lambda claims: {"account": claims["sub"], "scope": claims["scope"]})
    with serving(api.app()) as server:
        definitions = tmp_path / "definitions"
        definitions.mkdir()
        (definitions / "crm.yaml").write_text(TOOLS.format(api=server.url, crm_issuer=crm.url, crm=CRM),
                                              encoding="utf-8")
        yield api, definitions


def _settings(issuer: Issuer) -> dict:
    oauth = parse({"issuer": issuer.url, "audience": AUDIENCE, "jwks": {"refresh_min_s": 0},
                   "console": {"client_id": "gateway-console", "scopes": ["tools"]},
                   "rules": [{"scope": "tools", "toolsets": "*"},
                             {"roles": ["gateway-admin"], "admin": True, "toolsets": "*"}]})
    keys = (_api_key({"name": "robot", "sha256": hash_key("robot-key")}),
            _api_key({"name": "ops", "sha256": hash_key("ops-key"), "admin": True}))
    return {"oauth": oauth, "api_keys": keys, "upstream_oauth_key_secret": "CONNECTIONS_KEY"}


@contextmanager
def gateway(issuer: Issuer, definitions: Path, **extra) -> Iterator[str]:
    with running(definitions, **_settings(issuer), **extra) as served:
        yield served.url


def _call(url: str, credential: str, **arguments) -> dict:
    answer = httpx.post(f"{url}/tools/crm_me/call", json=arguments, headers=bearer(credential), timeout=20)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_person_connects_once_and_then_calls_as_their_own_account(issuer, crm, world):
    """alice's first call is an error result with the link; she opens it (signing in at both); her next calls
    reach the CRM as her CRM account with her own token, which is asked for once. bob is still not connected,
    and the CRM never sees a gateway token."""
    api, definitions = world
    with gateway(issuer, definitions) as url:
        alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
        bob = issuer.token(sub="bob", audience=AUDIENCE, scope="tools")
        first = _call(url, alice)
        assert first["is_error"] and "alice has not connected their account for 'crm'" in first["text"]
        assert api.seen == []
        page = connect(_link(first["text"], url), issuer, crm, "alice", "alice@crm")
        assert page.status_code == 200 and "connected" in page.text
        crm_authorize = [g for g in crm.grants if g["grant_type"] == "authorization_code"]
        assert len(crm_authorize) == 1 and crm_authorize[0]["client"] == "gateway-crm"
        result = _call(url, alice)["result"]
        assert result == {"account": "alice@crm", "scope": "contacts", "echo": None}
        assert _call(url, alice)["result"]["account"] == "alice@crm"
        assert len([g for g in crm.grants if g["grant_type"] in ("authorization_code", "refresh_token")]) == 1
        assert "bob has not connected" in _call(url, bob)["text"]
        assert api.seen and not {f"Bearer {alice}", f"Bearer {bob}"} & set(api.seen)


def test_a_half_done_flow_forwarded_to_another_browser_connects_nothing(issuer, crm, world):
    """mallory signs in, then sends alice (signed in at the CRM as alice@crm) the CRM's authorization request
    her flow led to — or the identity provider's answer. Alice's browser is not the one that started it: a 400
    page, and mallory's calls never act as alice's CRM account."""
    _api, definitions = world
    with gateway(issuer, definitions) as url:
        mallory = issuer.token(sub="mallory", audience=AUDIENCE, scope="tools")
        issuer.signed_in, crm.signed_in = "mallory", "alice@crm"
        with httpx.Client() as hers, httpx.Client() as alices:
            to_idp = hers.get(f"{url}/oauth/connect/crm").headers["location"]
            provider_answer = hers.get(to_idp).headers["location"]
            forwarded = alices.get(provider_answer)
            assert forwarded.status_code == 400 and "did not start" in forwarded.text
            to_crm = hers.get(provider_answer).headers["location"]  # mallory's own browser goes on
            back = alices.get(to_crm).headers["location"]  # alice authorizes at the CRM...
            finished = alices.get(back)  # ...and her browser brings the code back
            assert finished.status_code == 400 and "did not start" in finished.text
        assert "mallory has not connected" in _call(url, mallory)["text"]


def test_who_connects_is_who_signed_in_not_who_the_link_was_given_to(issuer, crm, world):
    """The link names no person: alice's link opened by a browser signed in as mallory connects mallory's CRM
    account to mallory — alice stays unconnected, and never acts as mallory's account (nor the reverse)."""
    _api, definitions = world
    with gateway(issuer, definitions) as url:
        alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
        mallory = issuer.token(sub="mallory", audience=AUDIENCE, scope="tools")
        link = _link(_call(url, alice)["text"], url)
        assert "?" not in link
        connect(link, issuer, crm, "mallory", "mallory@crm")
        assert "alice has not connected" in _call(url, alice)["text"]
        assert _call(url, mallory)["result"]["account"] == "mallory@crm"


@pytest.fixture
def short_lived(issuer: Issuer, crm: Issuer, world) -> Iterator[tuple[str, str]]:
    """A gateway and alice's token, alice connected to a CRM whose tokens live 20 s: within the gateway's 30 s
    margin, so each call refreshes first."""
    _api, definitions = world
    crm.lifetime_s = 20
    try:
        with gateway(issuer, definitions) as url:
            alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
            connect(_link(_call(url, alice)["text"], url), issuer, crm, "alice", "alice@crm")
            yield url, alice
    finally:
        crm.lifetime_s = 300


def test_an_expired_token_is_refreshed_and_the_rotated_one_kept(crm, short_lived):
    """Each refresh sends the refresh token the last one rotated in (the CRM refuses a used one): calls keep
    working."""
    url, alice = short_lived
    for _ in range(3):
        assert _call(url, alice)["result"]["account"] == "alice@crm"
    refreshes = [g for g in crm.grants if g["grant_type"] == "refresh_token"]
    assert len(refreshes) >= 3 and len({g["refresh_token"] for g in refreshes}) == len(refreshes)


def test_an_outage_at_refresh_keeps_the_connection(crm, short_lived):
    """A 503 temporarily_unavailable at refresh is an error result for this call, not the connection's end."""
    url, alice = short_lived
    crm.outage = True
    try:
        answer = _call(url, alice)
        assert answer["is_error"] and "temporarily_unavailable" in answer["text"]
        assert "connect again" not in answer["text"]
    finally:
        crm.outage = False
    assert _call(url, alice)["result"]["account"] == "alice@crm"


def test_a_refused_refresh_asks_the_person_to_connect_again(crm, short_lived):
    url, alice = short_lived
    crm.refresh_tokens.clear()  # the CRM forgot every grant (an admin there revoked them)
    answer = _call(url, alice)
    assert answer["is_error"] and "refused by its authorization server" in answer["text"]
    assert "/oauth/connect/crm" in answer["text"]


def test_people_end_their_own_connection_and_admins_anyones(issuer, crm, world):
    """The listing names connection, person, scope and times — never a token; alice ends hers (the CRM is told to
    revoke its refresh token), an admin ends bob's; then both are asked to connect again."""
    _api, definitions = world
    with gateway(issuer, definitions) as url:
        alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
        bob = issuer.token(sub="bob", audience=AUDIENCE, scope="tools")
        for token, name in ((alice, "alice"), (bob, "bob")):
            connect(_link(_call(url, token)["text"], url), issuer, crm, name, f"{name}@crm")
            _call(url, token)
        listing = httpx.get(f"{url}/admin/api/connections", headers=bearer("ops-key"))
        assert listing.status_code == 200
        shown = listing.json()["connections"]
        assert [(c["connection"], c["user"], c["scope"], c["refreshable"]) for c in shown] == [
            ("crm", "alice", "contacts", True), ("crm", "bob", "contacts", True)]
        for secret in [*crm.refresh_tokens, "crm-secret", KEY]:
            assert secret not in listing.text
        assert "access_token" not in listing.text and "eyJ" not in listing.text
        assert httpx.get(f"{url}/admin/api/connections", headers=bearer(alice)).status_code == 403
        mine = httpx.get(f"{url}/oauth/connections", headers=bearer(alice)).json()["connections"]
        assert [c["user"] for c in mine] == ["alice"]

        live = set(crm.refresh_tokens)
        assert httpx.delete(f"{url}/oauth/connections/crm", headers=bearer(alice)).status_code == 204
        assert set(crm.revoked) & live  # the CRM was told
        assert "alice has not connected" in _call(url, alice)["text"]
        assert httpx.delete(f"{url}/oauth/connections/crm", headers=bearer(alice)).status_code == 404

        bobs = next(c["person"] for c in shown if c["user"] == "bob")
        assert httpx.delete(f"{url}/admin/api/connections/crm", params={"person": bobs},
                            headers=bearer(alice)).status_code == 403
        assert httpx.delete(f"{url}/admin/api/connections/crm", params={"person": bobs},
                            headers=bearer("ops-key")).status_code == 204
        assert "bob has not connected" in _call(url, bob)["text"]


def test_an_api_key_is_nobodys_account(issuer, world):
    api, definitions = world
    with gateway(issuer, definitions) as url:
        answer = _call(url, "robot-key")
        assert answer["is_error"] and "call it with an OAuth access token" in answer["text"]
        assert api.seen == []
        assert httpx.get(f"{url}/oauth/connections", headers=bearer("robot-key")).status_code == 403


def test_tokens_are_sealed_at_rest_and_never_in_results_or_logs(issuer, crm, world, tmp_path, caplog):
    """What the gateway keeps on disk holds no token, no secret and no user name in the clear; a result that
    echoes the Authorization header shows it redacted; the logs hold no token."""
    _api, definitions = world
    caplog.set_level(logging.DEBUG)
    with gateway(issuer, definitions) as url:
        alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
        connect(_link(_call(url, alice)["text"], url), issuer, crm, "alice", "alice@crm")
        echoed = _call(url, alice, echo=True)["result"]["echo"]
        assert echoed == "Bearer [secret upstream token]"
    files = list((tmp_path / "state" / "connections").glob("*"))
    assert len(files) == 1
    stored = files[0].read_bytes()
    refresh = next(iter(crm.refresh_tokens))
    for clear in (refresh.encode(), b"alice", b"crm-secret", KEY.encode()):
        assert clear not in stored
    assert not JWT.search(stored)
    assert refresh not in caplog.text and "eyJ" not in caplog.text.replace(alice, "")


def test_the_callback_refuses_what_it_did_not_start(issuer, crm, world):
    """An unknown state, either leg's answer used twice, an authorization server's error (shown by its code only:
    anyone can write a description into a callback's query): each a page saying so, no token."""
    _api, definitions = world
    with gateway(issuer, definitions) as url, httpx.Client() as browser:
        assert browser.get(f"{url}/oauth/callback", params={"state": "forged", "code": "x"}).status_code == 400
        issuer.signed_in, crm.signed_in = "alice", "alice@crm"
        back = browser.get(browser.get(f"{url}/oauth/connect/crm").headers["location"]).headers["location"]
        to_crm = browser.get(back)
        assert to_crm.status_code == 302  # on to the CRM
        again = browser.get(back)  # the sign-in's answer again: its code was used
        assert again.status_code == 400 and "did not give a token" in again.text
        from_crm = browser.get(to_crm.headers["location"]).headers["location"]
        assert browser.get(from_crm).status_code == 200
        assert browser.get(from_crm).status_code == 400  # the upstream's answer again: its state is used up
        state = parse_qs(urlsplit(browser.get(f"{url}/oauth/connect/crm").headers["location"]).query)["state"][0]
        refused = browser.get(f"{url}/oauth/callback", params={
            "state": state, "error": "access_denied", "error_description": "Your account is locked: call +1 555"})
        assert refused.status_code == 400 and "access_denied" in refused.text and "555" not in refused.text


def test_a_connection_needs_a_key_to_seal_it(issuer, world):
    """Without upstream_oauth_key_secret the definitions are refused, at the auth's line, saying what to set."""
    _api, definitions = world
    settings = _settings(issuer) | {"upstream_oauth_key_secret": ""}
    with pytest.raises(DefinitionsInvalid) as refused, running(definitions, **settings):
        pass
    assert "crm.yaml:13:13" in str(refused.value) and "upstream_oauth_key_secret" in str(refused.value)


def test_in_a_cluster_a_connection_made_at_one_replica_serves_the_others(issuer, crm, world, tmp_path):
    """Two gateways sharing a real redis-server: alice connects through the first, calls through the second; the
    record in Redis is sealed; she ends it at the second and the first stops using it at once."""
    _api, definitions = world
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        cluster = {"cluster": {"redis_url": redis.url}}
        with gateway(issuer, definitions, **cluster) as first, gateway(issuer, definitions, **cluster) as second:
            alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
            link = _link(_call(url=first, credential=alice)["text"], first)
            connect(link, issuer, crm, "alice", "alice@crm")
            assert _call(second, alice)["result"]["account"] == "alice@crm"
            import redis as redis_client

            stored = redis_client.Redis.from_url(redis.url)
            values = [stored.get(key) for key in stored.keys("*connection:*")]
            assert len(values) == 1 and b"alice" not in values[0] and not JWT.search(values[0])
            assert not list((tmp_path / "state").glob("connections/*"))
            assert httpx.delete(f"{second}/oauth/connections/crm", headers=bearer(alice)).status_code == 204
            assert "alice has not connected" in _call(first, alice)["text"]
    finally:
        redis.stop()


def test_in_a_cluster_one_replica_refreshes_a_token_and_the_other_waits_for_it(issuer, crm, world, tmp_path):
    """Two replicas find alice's token expiring at the same moment, and the CRM rotates refresh tokens (a used one
    is refused) and answers a refresh a second late: the second replica waits for the first one's rotated token
    instead of spending the same refresh token — which would be refused, and end alice's connection."""
    _api, definitions = world
    redis = RedisServer(tmp_path)
    redis.start()
    crm.lifetime_s = 20  # within the gateway's margin: every call refreshes first
    try:
        cluster = {"cluster": {"redis_url": redis.url}}
        with gateway(issuer, definitions, **cluster) as first, gateway(issuer, definitions, **cluster) as second:
            alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
            connect(_link(_call(first, alice)["text"], first), issuer, crm, "alice", "alice@crm")
            before = len(crm.grants)
            crm.refresh_delay_s = 1.0
            with ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(lambda url: _call(url, alice), [first, second]))
            assert [(a.get("result") or {}).get("account") for a in answers] == ["alice@crm"] * 2, answers
            refreshes = [g for g in crm.grants[before:] if g["grant_type"] == "refresh_token"]
            assert len(refreshes) == 1, refreshes
            crm.refresh_delay_s = 0.0
            assert _call(second, alice)["result"]["account"] == "alice@crm"  # still connected
    finally:
        crm.lifetime_s, crm.refresh_delay_s = 300, 0.0
        redis.stop()


async def _mcp_call(url: str, token: str, *, elicits: bool):
    """``crm_me`` called with the official ``mcp`` client (``elicits``: it declares elicitation, form and URL):
    its result, or the JSON-RPC error it raised."""

    async def answer(context, params):  # never asked here: the URL comes in the call's error
        raise AssertionError("no elicitation request was expected")

    async with httpx.AsyncClient(headers=bearer(token)) as http, \
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write, elicitation_callback=answer if elicits else None) as session:
        await session.initialize()
        try:
            return await session.call_tool("crm_me", {})
        except MCPError as exc:
            return exc


@pytest.mark.anyio
async def test_an_mcp_client_that_accepts_url_elicitation_is_sent_to_connect(issuer, crm, world):
    """On MCP, a client that declared URL-mode elicitation gets URLElicitationRequiredError (-32042) carrying the
    connect link; one that did not gets the error result with the link in its text. Once connected, both calls
    reach the CRM as alice's account."""
    _api, definitions = world
    with gateway(issuer, definitions) as url:
        alice = issuer.token(sub="alice", audience=f"{AUDIENCE}/mcp", scope="tools")
        raised = await _mcp_call(url, alice, elicits=True)
        assert isinstance(raised, MCPError) and raised.error.code == -32042
        required = UrlElicitationRequiredError.from_error(raised.error)
        (elicitation,) = required.elicitations
        assert elicitation.mode == "url" and elicitation.url == f"{AUDIENCE}/oauth/connect/crm"
        assert "alice has not connected" in elicitation.message and elicitation.elicitation_id

        plain = await _mcp_call(url, alice, elicits=False)
        assert plain.is_error and f"{AUDIENCE}/oauth/connect/crm" in plain.content[0].text

        connect(url + "/oauth/connect/crm", issuer, crm, "alice", "alice@crm")
        for elicits in (True, False):
            result = await _mcp_call(url, alice, elicits=elicits)
            assert not result.is_error and '"alice@crm"' in result.content[0].text


def test_the_wire_shape_of_url_elicitation_on_both_mcp_paths(issuer, world):
    """Raw JSON-RPC on a 2025-11-25 session: a client declaring ``elicitation.url`` gets error -32042 whose data
    lists one URL elicitation — whether the call is answered as JSON (the fast path) or as SSE (the SDK's)."""
    _api, definitions = world
    with gateway(issuer, definitions) as url:
        alice = issuer.token(sub="alice", audience=f"{AUDIENCE}/mcp", scope="tools")
        base = {**bearer(alice), "MCP-Protocol-Version": "2025-11-25"}
        with httpx.Client(base_url=url, timeout=20) as http:
            opened = http.post("/mcp", headers={**base, "Accept": "application/json, text/event-stream"}, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "clientInfo": {"name": "raw", "version": "1"},
                    "capabilities": {"elicitation": {"form": {}, "url": {}}}}})
            session = {**base, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            http.post("/mcp", headers={**session, "Accept": "application/json, text/event-stream"},
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "crm_me", "arguments": {}}}
            as_json = http.post("/mcp", headers={**session, "Accept": "application/json"}, json=call).json()
            as_sse = http.post("/mcp", headers={**session, "Accept": "text/event-stream, application/json"},
                               json={**call, "id": 2}).text
    error = as_json["error"]
    assert error["code"] == -32042
    assert error["data"]["elicitations"][0]["url"] == f"{AUDIENCE}/oauth/connect/crm"
    assert error["data"]["elicitations"][0]["mode"] == "url"
    assert '"code":-32042' in as_sse.replace(" ", "") and "/oauth/connect/crm" in as_sse


def test_anonymous_starts_store_nothing(issuer, world):
    """Anyone may open a connect link; 300 starts leave no record in the shared state (the sign-in leg's state
    carries its own sealed flow), so a flood evicts nothing and fills nothing."""
    import asyncio

    _api, definitions = world
    with running(definitions, **_settings(issuer)) as served, httpx.Client() as http:
        before = set(asyncio.run(served.gateway.state.scan("")))  # the replica's own record
        for _ in range(300):
            assert http.get(f"{served.url}/oauth/connect/crm").status_code == 302
        assert set(asyncio.run(served.gateway.state.scan(""))) == before


def test_a_connection_no_tool_declares_any_more_is_not_offered(issuer, world):
    """A reload that rebuilds other files keeps 'crm' offered (its tool is reused, not parsed again); once a
    reload drops the last tool declaring it, its link starts nothing."""
    _api, definitions = world
    with running(definitions, **_settings(issuer)) as served:
        assert httpx.get(f"{served.url}/oauth/connect/crm").status_code == 302
        (definitions / "other.yaml").write_text(OTHER, encoding="utf-8")
        reloaded = httpx.post(f"{served.url}/admin/reload", headers=bearer("ops-key"), json={})
        assert reloaded.status_code == 200 and reloaded.json()["changed"]
        assert httpx.get(f"{served.url}/oauth/connect/crm").status_code == 302
        (definitions / "crm.yaml").write_text("tools: []\n", encoding="utf-8")
        reloaded = httpx.post(f"{served.url}/admin/reload", headers=bearer("ops-key"), json={})
        assert reloaded.status_code == 200 and reloaded.json()["changed"]
        assert httpx.get(f"{served.url}/oauth/connect/crm").status_code != 302


def test_a_reload_that_fails_offers_no_connection_it_declared(issuer, crm, world):
    """A reload that declares connection 'erp' but fails on another file changes nothing: 'erp' is not offered
    while the last good catalog serves."""
    _api, definitions = world
    with running(definitions, **_settings(issuer)) as served:
        erp = TOOLS.format(api="https://erp.example", crm_issuer=crm.url, crm=CRM)
        (definitions / "erp.yaml").write_text(erp.replace("crm_me", "erp_me").replace("connection: crm",
                                                                                       "connection: erp"))
        (definitions / "broken.yaml").write_text("tools: [{id: x\n", encoding="utf-8")
        reloaded = httpx.post(f"{served.url}/admin/reload", headers=bearer("ops-key"), json={})
        assert reloaded.status_code == 422
        assert httpx.get(f"{served.url}/oauth/connect/erp").status_code != 302
        assert httpx.get(f"{served.url}/oauth/connect/crm").status_code == 302
