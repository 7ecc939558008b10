"""The gateway as an OAuth 2.1 client of an upstream MCP server that demands OAuth (``mcp: {auth: oauth}``):
a real upstream (the SDK's ``MCPServer`` with ``AuthSettings`` and a token verifier) and its authorization server
(protected_upstream.py), which the gateway discovers, registers with, and is authorized by when an admin's
browser (httpx following redirects) opens ``/oauth/connect/<source>``. Tokens are kept encrypted under the state
directory, refreshed when they expire, and a store file changed on disk is refused without harm."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import catalog_for, free_port, running, until

from gateway.errors import DefinitionsInvalid

HERE = Path(__file__).resolve().parent
LIFETIME_S = 4  # the upstream's access tokens: short, so that the test sees one refreshed
KEY = "UPSTREAM_OAUTH_TEST_KEY"


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """protected_upstream.py on a free port: its base URL (the MCP endpoint is <base>/mcp)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(HERE / "protected_upstream.py"), str(port), str(LIFETIME_S)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def listening() -> bool:
            assert process.poll() is None, f"protected_upstream.py exited with {process.returncode}"
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        until(listening, "the protected upstream to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)


@pytest.fixture
def defs(tmp_path: Path, upstream: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv(KEY, secrets.token_urlsafe(32))
    root = tmp_path / "defs"
    root.mkdir()
    (root / "guarded.yaml").write_text(
        f"sources:\n  - id: guarded\n    mcp: {{url: '{upstream}/mcp', connect_timeout_s: 5, auth: oauth}}\n")
    return root


def source_status(base: str) -> dict:
    return next(s for s in httpx.get(f"{base}/status", timeout=10).json()["sources"] if s["id"] == "guarded")


def whisper(base: str, text: str) -> dict:
    answer = httpx.post(f"{base}/tools/whisper/call", json={"text": text}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def counts(upstream: str) -> dict:
    return httpx.get(f"{upstream}/counts", timeout=10).json()


def served(base: str) -> bool:
    return any(tool["id"] == "whisper" for tool in httpx.get(f"{base}/tools", timeout=10).json()["tools"])


def authorize(base: str) -> httpx.Response:
    """The admin's browser: the connect link, through the authorization server, back to the gateway's callback."""
    return httpx.get(f"{base}/oauth/connect/guarded", follow_redirects=True, timeout=30)


def test_an_admin_authorizes_the_gateway_which_then_calls_and_refreshes(defs, upstream, tmp_path, caplog):
    """Before any authorization the source's status names the connect link; the admin's visit makes the gateway
    discover the authorization server, register, and get tokens (PKCE, resource); the upstream's tool is then
    served and called, and keeps answering past its access token's lifetime (the gateway refreshed it). The
    store on disk holds none of the tokens in clear, and no log line does either (a token echoed by anyone is
    redacted as the environment's secrets are)."""
    caplog.set_level(logging.DEBUG)
    with running(defs, upstream_oauth_key_secret=KEY) as gateway:
        status = source_status(gateway.url)
        assert status["health"] == "down" and status["authorize"] == "/oauth/connect/guarded", status
        assert "/oauth/connect/guarded" in status["error"]
        page = authorize(gateway.url)
        assert page.status_code == 200 and "may now use MCP server &#x27;guarded&#x27;" in page.text, page.text
        until(lambda: served(gateway.url), "the upstream's tools, once authorized")
        assert whisper(gateway.url, "HUSH")["result"] == "hush"
        assert source_status(gateway.url)["health"] == "ok"

        def refreshed() -> bool:
            assert whisper(gateway.url, "STILL")["result"] == "still"  # never refused on the way
            return counts(upstream)["refresh_token"] >= 1

        until(refreshed, "a call after the access token expired", timeout=60, step=0.5)
    issued = counts(upstream)
    assert issued["authorization_code"] == 1
    kept = list((tmp_path / "state" / "oauth").glob("*.oauth"))
    assert len(kept) == 1
    sealed = kept[0].read_bytes()
    assert all(token.encode() not in sealed for token in issued["issued"])
    assert b"token" not in sealed and b"client_secret" not in sealed
    assert os.stat(kept[0]).st_mode & 0o077 == 0  # readable by the gateway's user only
    logging.getLogger("gateway.test").warning("an upstream echoed %s", issued["issued"][-1])
    assert "[secret upstream oauth" in caplog.text
    assert all(token not in caplog.text for token in issued["issued"])


def test_kept_tokens_serve_a_restarted_gateway_and_a_tampered_store_is_refused(defs, upstream, tmp_path, caplog):
    """A gateway started again finds its tokens and serves the upstream without a new authorization; a store file
    changed on disk is refused as a whole (a warning naming the source; the connect link in its status and in a
    call's error), not a crash, and a new authorization writes a good one."""
    with running(defs, upstream_oauth_key_secret=KEY) as gateway:
        authorize(gateway.url)
        until(lambda: served(gateway.url), "the upstream's tools, once authorized")
    before = counts(upstream)["authorization_code"]
    with running(defs, upstream_oauth_key_secret=KEY) as gateway:
        assert served(gateway.url) and whisper(gateway.url, "AGAIN")["result"] == "again"
    assert counts(upstream)["authorization_code"] == before
    [kept] = (tmp_path / "state" / "oauth").glob("*.oauth")
    sealed = bytearray(kept.read_bytes())
    sealed[len(sealed) // 2] ^= 1
    kept.write_bytes(bytes(sealed))
    with caplog.at_level(logging.WARNING, logger="gateway.upstream_oauth"), \
            running(defs, upstream_oauth_key_secret=KEY) as gateway:
        status = source_status(gateway.url)  # its tools kept from the last listing, served stale
        assert status["health"] == "stale" and status["authorize"] == "/oauth/connect/guarded", status
        refused = whisper(gateway.url, "NOW")
        assert refused["is_error"] and "/oauth/connect/guarded" in refused["error"], refused
        assert authorize(gateway.url).status_code == 200
        until(lambda: served(gateway.url), "the upstream's tools, authorized again")
    assert any("cannot be read" in record.getMessage() and "'guarded'" in record.getMessage()
               for record in caplog.records)


def test_connecting_is_for_admins_and_a_callback_needs_a_flow(defs):
    """With auth off only loopback callers are admins (the test is one); a callback without a flow under way, or
    whose state was used already, is refused with a page that says so."""
    with running(defs, upstream_oauth_key_secret=KEY) as gateway:
        answer = httpx.get(f"{gateway.url}/oauth/callback", params={"code": "x", "state": "forged"}, timeout=10)
        assert answer.status_code == 400 and "no authorization is under way" in answer.text
        started = httpx.get(f"{gateway.url}/oauth/connect/guarded", timeout=30)
        assert started.status_code == 302
        state = httpx.URL(started.headers["location"]).params["state"]
        assert authorize(gateway.url).status_code == 200  # another flow, completed
        replayed = httpx.get(f"{gateway.url}/oauth/callback", params={"code": "x", "state": state}, timeout=10)
        assert replayed.status_code == 502  # the flow was alive: its code (x) is refused by the server
        again = httpx.get(f"{gateway.url}/oauth/callback", params={"code": "x", "state": state}, timeout=10)
        assert again.status_code == 400  # and used once only
        assert httpx.get(f"{gateway.url}/oauth/connect/nosuch", timeout=10).status_code == 404


@pytest.mark.parametrize(("auth", "message"), [
    ("{oauth: {grant: client_credentials}}", r"source 'up': grant client_credentials authenticates"),
    ("{oauth: {client_secret: '{{ secrets.S }}'}}", r"a client_secret or private_key belongs to a client"),
    ("{oauth: {grant: password}}", r"sources\[0\].mcp.auth"),
    ("{oauth: {client_id: c, private_key: '{{ secrets.K }}'}}", r"private_key \(private_key_jwt\) is for grant"),
    ("{oauth: {grant: cross_app_access, client_id: c, client_secret: '{{ secrets.S }}'}}",
     r"idp \(the identity provider .*\) goes with grant cross_app_access"),
    ("{oauth: {client_id: c, idp: {client_id: g, id_token: '{{ secrets.T }}', issuer: 'https://idp.example'}}}",
     r"goes with grant cross_app_access, and only with it"),
    (("{oauth: {grant: cross_app_access, client_id: c, client_secret: '{{ secrets.S }}', "
     "idp: {client_id: g, id_token: '{{ secrets.T }}'}}}"),
     r"give the identity provider's token_endpoint or its issuer"),
    (("{oauth: {grant: cross_app_access, idp: {client_id: g, id_token: '{{ secrets.T }}', "
     "issuer: 'https://idp.example'}}}"),
     r"grant cross_app_access authenticates the gateway's own client"),
    (("{oauth: {grant: cross_app_access, client_id: c, client_secret: '{{ secrets.S }}', "
     "idp: {client_id: g, id_token: an-id-token-in-clear, issuer: 'https://idp.example'}}}"),
     r"sources\[0\].mcp.auth.*id_token"),
])
def test_a_wrong_declaration_is_a_problem_at_its_place(tmp_path, auth, message):
    """A declaration the gateway cannot act on is a load problem at its place in the file, saying why."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "up.yaml").write_text(f"sources:\n  - id: up\n    mcp: {{url: 'http://127.0.0.1:9/mcp', auth: {auth}}}\n")
    with pytest.raises(DefinitionsInvalid, match=r"up.yaml:3:\d+: .*" + message):
        catalog_for(root)
