"""``front.Front``, the one middleware before every route: version headers, the Origin/Host guard and CORS, each
on the answers the three middlewares it replaced gave them to."""

from __future__ import annotations

from pathlib import Path

import httpx
from support import CONSOLE

from gateway.server.http.sending import _vary_origin


def vary_headers(response: httpx.Response) -> list[str]:
    return response.headers.get_list("vary")


def test_a_non_browser_answer_says_its_catalog_and_vary_origin_once(server):
    """A request without Origin gets X-Catalog-Version and one Vary header: the route's own values, then Origin."""
    response = httpx.get(f"{server.url}/tools", timeout=10)
    assert response.headers["x-catalog-version"] == server.gateway.catalog.version
    assert vary_headers(response) == ["Accept-Encoding, Authorization, Origin"]
    assert vary_headers(httpx.get(f"{server.url}/healthz", timeout=10)) == ["Origin"]


def test_refusals_carry_the_catalog_version(start_server, shared_examples: Path):
    """The guard's 403 (an origin not allowed) and 421 (a non-loopback Host with auth off) say the catalog version
    like every other answer."""
    served = start_server(shared_examples, allowed_origins=("https://app.example.com",))
    version = served.gateway.catalog.version
    refused = httpx.get(f"{served.url}/tools", headers={"Origin": "https://evil.example"}, timeout=10)
    assert refused.status_code == 403 and refused.headers["x-catalog-version"] == version
    rebound = httpx.get(f"{served.url}/tools", headers={"Host": "evil.example:8000"}, timeout=10)
    assert rebound.status_code == 421 and rebound.headers["x-catalog-version"] == version


def test_an_allowed_browser_origin_gets_cors_and_the_version(start_server, shared_examples: Path):
    """A page of an allowed origin gets Access-Control-Allow-Origin, the exposed headers, Vary: Origin and the
    version header; its preflight is answered 200 with the allowed methods."""
    origin = "https://app.example.com"
    served = start_server(shared_examples, allowed_origins=(origin,))
    response = httpx.post(f"{served.url}/tools/sum/call", json={"a": 1, "b": 2}, headers={"Origin": origin},
                          timeout=10)
    assert response.json()["result"] == 3.0
    assert response.headers["access-control-allow-origin"] == origin
    assert "ETag" in response.headers["access-control-expose-headers"]
    assert vary_headers(response) == ["Origin"]
    assert response.headers["x-catalog-version"] == served.gateway.catalog.version
    preflight = httpx.options(f"{served.url}/tools/sum/call", timeout=10, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == origin
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert preflight.headers["x-catalog-version"] == served.gateway.catalog.version


def test_the_version_header_follows_a_reload(start_server, examples_dir: Path):
    """After a reload that changes the catalog, answers name the new version (it is encoded once per catalog)."""
    served = start_server(examples_dir)
    before = httpx.get(f"{served.url}/healthz", timeout=10).headers["x-catalog-version"]
    math = examples_dir / "math.yaml"
    math.write_text(math.read_text().replace("name: Sum", "name: Addition"))
    assert httpx.post(f"{served.url}/admin/reload", timeout=30, auth=CONSOLE).json()["changed"] is True
    after = httpx.get(f"{served.url}/healthz", timeout=10).headers["x-catalog-version"]
    assert after != before and after == served.gateway.catalog.version


def test_vary_origin_joins_every_vary_header_into_the_first():
    """Origin joins a response's Vary values into one header where the first was, as Starlette's CORS does."""
    headers = [(b"vary", b"Accept"), (b"content-type", b"x"), (b"vary", b"Cookie")]
    _vary_origin(headers)
    assert headers == [(b"vary", b"Accept, Cookie, Origin"), (b"content-type", b"x")]
    bare: list[tuple[bytes, bytes]] = [(b"content-type", b"x")]
    _vary_origin(bare)
    assert bare == [(b"content-type", b"x"), (b"vary", b"Origin")]


def test_mcp_fast_answers_and_refusals_carry_the_version_and_vary_origin_once(start_server, shared_examples: Path):
    """The MCP fast path sends the headers Front adds itself: a fast call on either revision, a refused body and a
    browser's fast call (through CORS) each say the catalog version once and Vary: Origin once."""
    origin = "https://app.example.com"
    served = start_server(shared_examples, allowed_origins=(origin,))
    version = served.gateway.catalog.version
    accept = {"Accept": "application/json, text/event-stream"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sum", "arguments": {"a": 1, "b": 2}}}
    opened = httpx.post(f"{served.url}/mcp", headers=accept, timeout=10, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    legacy = accept | {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    httpx.post(f"{served.url}/mcp", headers=legacy, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
               timeout=10)
    modern = accept | {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "sum"}
    modern_call = {**call, "params": {**call["params"], "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
    answers = [httpx.post(f"{served.url}/mcp", headers=legacy, json=call, timeout=10),
               httpx.post(f"{served.url}/mcp", headers=modern, json=modern_call, timeout=10),
               httpx.post(f"{served.url}/mcp", headers=legacy | {"Content-Type": "application/json"},
                          content=b"{not json", timeout=10),
               httpx.post(f"{served.url}/mcp", headers=legacy | {"Origin": origin}, json=call, timeout=10)]
    assert [answer.status_code for answer in answers] == [200, 200, 400, 200]
    for answer in answers:
        assert answer.headers.get_list("x-catalog-version") == [version]
        assert vary_headers(answer) == ["Origin"]
    assert answers[0].json()["result"]["structuredContent"] == {"result": 3.0}
    assert answers[3].headers["access-control-allow-origin"] == origin
