"""Browser origins: decided by ``allowed_origins`` (and the address the gateway itself serves at), never by the
``Host`` header a request brings, on every surface a page can reach; the list, when written, is exact."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from server_support import ADMIN_KEY, RunningServer
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

EVIL = "evil.example:8800"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "page", "version": "1"}}}
PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,authorization"}


def surfaces(key: str | None) -> list[tuple[str, str, dict]]:
    """One request per surface a browser page can reach: (method, path, httpx keywords)."""
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return [
        ("GET", "/tools", {"headers": auth}),
        ("POST", "/tools/sum/call", {"headers": auth, "json": {"a": 1, "b": 2}}),
        ("POST", "/mcp", {"headers": auth | {"Accept": "application/json, text/event-stream"}, "json": INITIALIZE}),
        ("POST", "/v1/chat/completions", {"headers": auth, "json": {"messages": [{"role": "user", "content": "hi"}]}}),
        ("GET", "/client/gateway-tools.js", {}),
        ("GET", "/client/scripts/task_form_read.js", {}),
        ("GET", "/client/demo", {}),
        ("OPTIONS", "/tools/sum/call", {"headers": PREFLIGHT}),
    ]


async def request(method: str, url: str, **keywords) -> httpx.Response:
    """One request from an async test (which must not block its event loop)."""
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.request(method, url, **keywords)


def bridge_url(server: RunningServer) -> str:
    return server.url.replace("http://", "ws://") + "/client/bridge"


def port_of(server: RunningServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


@pytest.fixture
def keyed(start_server, shared_examples: Path) -> RunningServer:
    """The shipped examples behind an admin API key, with no allowed_origins."""
    from server_support import API_KEYS

    return start_server(shared_examples, api_keys=API_KEYS)


async def test_bridge_refuses_a_page_whose_origin_matches_only_the_host_header(keyed):
    """F7: with auth on, a WebSocket handshake with `Host: evil.example:8800` and `Origin: http://evil.example:8800`
    (a DNS name pointed at the gateway) is refused with 403: Host does not make an origin the gateway's own."""
    with pytest.raises(InvalidStatus) as refused:
        async with connect(f"ws://{EVIL}/client/bridge", host="127.0.0.1", port=port_of(keyed),
                           origin=f"http://{EVIL}", open_timeout=10):
            pass
    assert refused.value.response.status_code == 403
    assert b"allowed_origins" in refused.value.response.body


def test_every_surface_refuses_an_origin_matching_only_the_host_header(keyed):
    """F7 on REST, MCP, chat, the client scripts, the demo page and CORS preflights: 403 for a page whose Origin
    equals the Host header but is not allowed, even with a valid key."""
    for method, path, keywords in surfaces(ADMIN_KEY):
        headers = keywords.get("headers", {}) | {"Host": EVIL, "Origin": f"http://{EVIL}"}
        response = httpx.request(method, f"{keyed.url}{path}", **(keywords | {"headers": headers}))
        assert response.status_code == 403, (method, path, response.status_code)
        assert "access-control-allow-origin" not in response.headers


async def test_the_gateways_own_pages_are_allowed_by_the_address_it_serves_at(keyed):
    """A page the gateway serves itself (its origin is the address the connection reached, 127.0.0.1:<port>, or
    localhost:<port>) opens the bridge and calls REST with auth on and no allowed_origins, whatever Host says."""
    for name in ("127.0.0.1", "localhost"):
        own = f"http://{name}:{port_of(keyed)}"
        async with connect(bridge_url(keyed), origin=own, open_timeout=10) as socket:
            assert '"type":"session"' in await socket.recv()
        listing = await request("GET", f"{keyed.url}/tools", headers={"Origin": own, "Host": EVIL,
                                                                       "Authorization": f"Bearer {ADMIN_KEY}"})
        assert listing.status_code == 200, own
    for other_port in (f"http://127.0.0.1:{port_of(keyed) + 1}", f"https://localhost:{port_of(keyed) + 1}"):
        assert (await request("GET", f"{keyed.url}/tools", headers={"Origin": other_port})).status_code == 403


async def test_auth_off_still_refuses_a_non_loopback_host(start_server, shared_examples: Path):
    """The DNS-rebinding guard stays: with auth off, a handshake or request naming a non-loopback Host gets 421."""
    served = start_server(shared_examples)
    with pytest.raises(InvalidStatus) as refused:
        async with connect(f"ws://{EVIL}/client/bridge", host="127.0.0.1", port=port_of(served),
                           origin=f"http://{EVIL}", open_timeout=10):
            pass
    assert refused.value.response.status_code == 421
    assert (await request("GET", f"{served.url}/tools", headers={"Host": EVIL})).status_code == 421


async def test_a_written_allowed_origins_list_is_exact_with_auth_off(start_server, shared_examples: Path):
    """Issue 11.5: with auth off and `allowed_origins: [http://127.0.0.1:5500]`, a page on http://localhost:5500 is
    refused on every surface (and gets no CORS answer); the listed origin and the gateway's own pages pass."""
    served = start_server(shared_examples, allowed_origins=("http://127.0.0.1:5500",))
    for method, path, keywords in surfaces(None):
        headers = keywords.get("headers", {}) | {"Origin": "http://localhost:5500"}
        refused = await request(method, f"{served.url}{path}", **(keywords | {"headers": headers}))
        assert refused.status_code == 403, (method, path)
    with pytest.raises(InvalidStatus) as bridge:
        async with connect(bridge_url(served), origin="http://localhost:5500", open_timeout=10):
            pass
    assert bridge.value.response.status_code == 403
    listed = await request("OPTIONS", f"{served.url}/tools/sum/call",
                           headers=PREFLIGHT | {"Origin": "http://127.0.0.1:5500"})
    assert listed.headers["access-control-allow-origin"] == "http://127.0.0.1:5500"
    async with connect(bridge_url(served), origin=f"http://127.0.0.1:{port_of(served)}", open_timeout=10) as socket:
        assert '"type":"session"' in await socket.recv()


async def test_with_an_empty_list_and_auth_off_loopback_pages_pass(start_server, shared_examples: Path):
    """The loopback convenience holds only while the list is empty: then any loopback page may use the gateway,
    including the bridge, and gets CORS answers."""
    served = start_server(shared_examples)
    for origin in ("http://localhost:5500", "http://127.0.0.1:3000", "http://[::1]:8080"):
        preflight = await request("OPTIONS", f"{served.url}/tools/sum/call", headers=PREFLIGHT | {"Origin": origin})
        assert preflight.headers.get("access-control-allow-origin") == origin
        async with connect(bridge_url(served), origin=origin, open_timeout=10) as socket:
            assert '"type":"session"' in await socket.recv()
    assert (await request("GET", f"{served.url}/tools", headers={"Origin": "http://evil.example"})).status_code == 403
