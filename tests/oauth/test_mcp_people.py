"""An upstream MCP server called as each person (``mcp: {person_auth: …}``): a FastMCP 4 server that takes only
tokens its issuer signed for it (FastMCP's own ``JWTVerifier``), listed by the gateway with a token of its own and
called by alice and bob in sessions of their own, each with the token the issuer exchanged for theirs. The
upstream records every request's Authorization and MCP session, so it shows whose token went where."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from fastmcp import FastMCP
from fastmcp.server.auth.providers.jwt import JWTVerifier
from fastmcp.server.dependencies import get_access_token
from issuer import Issuer
from oauth_support import AUDIENCE, bearer, connect, link
from support import running, serving, until

from gateway.identity.config import parse
from gateway.settings import _api_key, hash_key
from gateway.upstream.mcp import people

TRACKER = "https://tracker.example/mcp"  # the audience the tracker's tokens must name

SOURCE = """\
sources:
  - id: tracker
    mcp:
      url: {url}/mcp
      headers: {{Authorization: "Bearer {{{{ secrets.TRACKER_LISTING }}}}"}}
      person_auth:
        {grant}
"""
EXCHANGE = f'token_exchange: {{client_id: gateway, client_secret: "{{{{ secrets.GW_SECRET }}}}", audience: {TRACKER}}}'
CONNECTION = ('authorization_code: {{connection: tracker, client_id: gateway, client_secret: "{{{{ secrets.GW_SECRET }}}}", '
              'issuer: {issuer}, resource: ' + TRACKER + '}}')


class Recorder:
    """ASGI middleware: each request's (Authorization, the client's port): a session of its own has connections of
    its own (sessions on the 2026-07-28 protocol carry no session id to tell them apart)."""

    def __init__(self, app):
        self.app, self.seen, self.verifier = app, [], None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            self.seen.append((headers.get(b"authorization", b"").decode(), scope["client"][1]))
        await self.app(scope, receive, send)


def tracker(issuer: Issuer) -> Recorder:
    public = issuer.keys[0].private.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo)
    server = FastMCP("tracker", auth=JWTVerifier(public_key=public.decode(), issuer=issuer.url, audience=TRACKER,
                                                 algorithm="RS256"))

    @server.tool
    def whoami() -> dict:
        """Who the tracker thinks is calling."""
        claims = get_access_token().claims
        return {"sub": claims["sub"], "act": claims.get("act")}

    @server.tool
    def my_token() -> str:
        """The token the call came with, as a careless server might echo it."""
        return get_access_token().token

    recorder = Recorder(server.http_app(path="/mcp"))
    recorder.verifier = server.auth
    return recorder


@pytest.fixture
def world(issuer: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """(recorder, listing token, definitions directory writer) with the tracker serving."""
    listing = issuer.token(sub="gateway-lister", audience=TRACKER, lifetime_s=3600)
    monkeypatch.setenv("GW_SECRET", "gateway-secret")
    monkeypatch.setenv("TRACKER_LISTING", listing)
    monkeypatch.setenv("CONNECTIONS_KEY", "a-long-passphrase-that-seals-the-connections")
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    recorder = tracker(issuer)
    with serving(recorder, lifespan="on") as server:
        yield recorder, listing, lambda grant: _definitions(tmp_path, server.url, grant)


def _definitions(tmp_path: Path, url: str, grant: str) -> Path:
    root = tmp_path / "definitions"
    root.mkdir(exist_ok=True)
    (root / "tracker.yaml").write_text(SOURCE.format(url=url, grant=grant), encoding="utf-8")
    return root


def _settings(issuer: Issuer) -> dict:
    oauth = parse({"issuer": issuer.url, "audience": AUDIENCE, "jwks": {"refresh_min_s": 0},
                   "rules": [{"scope": "tools", "toolsets": "*"}]})
    return {"oauth": oauth, "api_keys": (_api_key({"name": "robot", "sha256": hash_key("robot-key")}),),
            "upstream_oauth_key_secret": "CONNECTIONS_KEY"}


def _call(url: str, credential: str, tool: str = "whoami") -> dict:
    answer = httpx.post(f"{url}/tools/{tool}/call", json={}, headers=bearer(credential), timeout=20)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _sub(authorization: str) -> str:
    return jwt.decode(authorization.removeprefix("Bearer "), options={"verify_signature": False})["sub"]


def test_each_person_calls_in_a_session_of_their_own_with_their_own_token(issuer, world):
    """The gateway lists the tracker's tools with its own token; alice's and bob's calls carry tokens the issuer
    exchanged for theirs (the tracker's tool sees sub alice / bob, act the gateway), each in a session of their own (its
    own connections). Neither person's own token, nor the listing token on a call, ever reaches the tracker."""
    recorder, listing, definitions = world
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    bob = issuer.token(sub="bob", audience=AUDIENCE, scope="tools")
    with running(definitions(EXCHANGE), **_settings(issuer)) as served:
        assert _call(served.url, alice)["result"] == {"sub": "alice", "act": {"sub": "gateway"}}
        assert _call(served.url, bob)["result"] == {"sub": "bob", "act": {"sub": "gateway"}}
        assert _call(served.url, alice)["result"]["sub"] == "alice"
        assert _call(served.url, bob, "my_token")["text"] == "[secret upstream token]"
    sent = {authorization for authorization, _ in recorder.seen}
    assert f"Bearer {listing}" in sent and not {f"Bearer {alice}", f"Bearer {bob}"} & sent
    ports: dict[str, set[int]] = {}
    for authorization, port in recorder.seen:
        ports.setdefault(_sub(authorization), set()).add(port)
    assert sorted(ports) == ["alice", "bob", "gateway-lister"]
    assert not ports["alice"] & ports["bob"] and not (ports["alice"] | ports["bob"]) & ports["gateway-lister"]
    exchanges = [grant for grant in issuer.grants if grant["grant_type"].endswith("token-exchange")]
    assert [grant["audience"] for grant in exchanges] == [TRACKER, TRACKER]  # alice's second call reused hers, bob his


def test_an_api_key_is_no_person_and_the_tracker_hears_only_the_gateway(issuer, world):
    recorder, listing, definitions = world
    with running(definitions(EXCHANGE), **_settings(issuer)) as served:
        answer = _call(served.url, "robot-key")
    assert answer["is_error"] and "call it with an access token" in answer["text"]
    assert {authorization for authorization, _ in recorder.seen} == {f"Bearer {listing}"}  # the gateway's own


def test_a_person_not_connected_is_given_the_link_to_connect(issuer, world):
    """``authorization_code``: alice has connected no tracker account, so her call is an error result with the
    link; the tracker hears only the gateway's own session."""
    recorder, listing, definitions = world
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    with running(definitions(CONNECTION.format(issuer=issuer.url)), **_settings(issuer)) as served:
        answer = _call(served.url, alice)
    assert answer["is_error"] and f"{AUDIENCE}/oauth/connect/tracker" in answer["text"]
    assert {authorization for authorization, _ in recorder.seen} == {f"Bearer {listing}"}


def test_a_person_who_connects_calls_the_tracker_as_their_own_account(issuer, world):
    """alice opens the link her first call gave (signing in at the identity provider, then authorizing the
    gateway's client at the tracker's authorization server — here the same issuer); her next call reaches the
    tracker with the token of her own connection, in her own session."""
    recorder, listing, definitions = world
    alice = issuer.token(sub="alice", audience=AUDIENCE, scope="tools")
    settings = _settings(issuer)
    settings["oauth"] = parse({"issuer": issuer.url, "audience": AUDIENCE, "jwks": {"refresh_min_s": 0},
                               "console": {"client_id": "gateway-console", "scopes": ["tools"]},
                               "rules": [{"scope": "tools", "toolsets": "*"}]})
    with running(definitions(CONNECTION.format(issuer=issuer.url)), **settings) as served:
        first = _call(served.url, alice)
        assert first["is_error"] and "alice has not connected" in first["text"]
        # One issuer plays both parts, and so knows alice by one name at both.
        page = connect(link(first["text"], served.url), issuer, issuer, "alice", "alice")
        assert page.status_code == 200 and "connected" in page.text
        assert _call(served.url, alice)["result"] == {"sub": "alice", "act": None}
        # The tracker stops taking her token (revoked there): the call says to connect again, with the link.
        recorder.verifier.audience = "https://tracker.example/elsewhere"
        again = _call(served.url, alice)
        assert again["is_error"] and "HTTP 401" in again["text"] and f"again at {AUDIENCE}/oauth/connect/tracker" \
            in again["text"]
    codes = [grant for grant in issuer.grants if grant["grant_type"] == "authorization_code"]
    assert [grant["client"] for grant in codes] == ["gateway-console", "gateway"]  # signed in, then connected
    sent = {authorization for authorization, _ in recorder.seen}
    assert {_sub(authorization) for authorization in sent} == {"gateway-lister", "alice"}
    assert sent - {f"Bearer {listing}"} and f"Bearer {alice}" not in sent


def test_people_sessions_are_bounded_and_closed_when_idle(issuer, world, monkeypatch):
    """Past the bound the least recently used person's session is closed; an idle one is closed after IDLE_S."""
    _recorder, _listing, definitions = world
    monkeypatch.setattr(people, "MAX_SESSIONS", 2)
    with running(definitions(EXCHANGE), **_settings(issuer)) as served:
        for person in ("alice", "bob", "carol"):
            assert _call(served.url, issuer.token(sub=person, audience=AUDIENCE, scope="tools"))["result"]["sub"] \
                == person
        sessions = served.gateway.mcp_pool._people
        assert len(sessions) == 2
        monkeypatch.setattr(people, "IDLE_S", 0.0)
        assert _call(served.url, issuer.token(sub="dave", audience=AUDIENCE, scope="tools"))["result"]["sub"] \
            == "dave"
        until(lambda: len(sessions) <= 1, "the idle sessions closed")


def test_a_stdio_server_takes_no_person_auth():
    from gateway.settings import Settings
    from gateway.upstream.mcp.config import NO_PERSON_ON_STDIO, parse_config

    config, problems = parse_config("local", {"command": "server", "person_auth": {"token_exchange": {}}},
                                    Settings(definitions=Path(".")))
    assert config is None and problems == [(("person_auth",), NO_PERSON_ON_STDIO)]


def _config():
    from gateway.settings import Settings
    from gateway.upstream.mcp.config import parse_config

    config, _ = parse_config("tracker", {"url": "https://tracker.example/mcp", "headers": {
        "Authorization": "Bearer {{ secrets.GW_SECRET }}", "X-Gateway-Key": "{{ secrets.GW_SECRET }}",
        "X-Tenant": "acme"}}, Settings(definitions=Path(".")))
    assert config is not None
    return config


def test_the_people_table_keys_sessions_by_token_and_never_closes_one_in_a_call(monkeypatch):
    """Two tokens of one person are two sessions (each call goes out with its own token); a session with a call in
    progress is kept past the bound; a person's session sends no header naming a secret."""
    monkeypatch.setenv("GW_SECRET", "gateway-secret")

    async def scenario() -> None:
        class Pool:
            change_interval_s = 2.0

        table = people.People(Pool())  # type: ignore[arg-type]
        config = _config()
        first = table.session(config, "alice", "Bearer a")
        assert table.session(config, "alice", "Bearer a") is first
        other = table.session(config, "alice", "Bearer b")
        assert other is not first and len(table) == 2
        assert dict(first.config.headers) == {"X-Tenant": "acme"}
        first.calls = 1
        monkeypatch.setattr(people, "MAX_SESSIONS", 1)
        table.session(config, "bob", "Bearer c")
        assert first in table._sessions.values() and other not in table._sessions.values()  # the idle one went
        await table.aclose()

    asyncio.run(scenario())


def test_a_persons_session_is_refused_off_the_pools_loop(monkeypatch):
    """The pool serves one loop: a call from another running loop gets an error result's words, not a session
    made on the wrong loop."""
    import threading

    from gateway.upstream.mcp.client import UpstreamUnavailable
    from gateway.upstream.mcp.pool import McpPool

    monkeypatch.setenv("GW_SECRET", "gateway-secret")
    pool = McpPool()
    serving_loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(serving_loop)
        serving_loop.call_soon(started.set)
        serving_loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    started.wait(10)
    asyncio.run_coroutine_threadsafe(_bind(pool), serving_loop).result(10)

    async def elsewhere() -> None:
        with pytest.raises(UpstreamUnavailable, match="made on the gateway's own loop"):
            pool.person(_config(), "alice", "Bearer a")

    try:
        asyncio.run(elsewhere())
    finally:
        serving_loop.call_soon_threadsafe(serving_loop.stop)
        thread.join(10)


async def _bind(pool) -> None:
    pool.bind()
