"""Cross-origin use: pages on the origins the settings allow use the gateway; other origins are refused, both for
CORS requests and for the bridge's WebSocket handshake."""

from __future__ import annotations

import httpx
import pytest
from browser_site import ALLOWED_HOST, DISALLOWED_HOST
from playwright.async_api import Page
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from gateway.runtime.gateway import Gateway
from gateway.server.app import create_app
from gateway.settings import ApiKey, Settings, hash_key

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_page_on_a_disallowed_origin_cannot_open_a_bridge_or_chat(site, llm, open_page):
    """From evil.test, the runtime loads but the bridge session and the chat request are both refused."""
    page: Page = await open_page(site.page_url(DISALLOWED_HOST))
    await page.wait_for_function("window.GatewayTools !== undefined")

    bridge = await page.evaluate("GatewayTools.connect().then(() => 'connected', e => e.message)")
    chat = await page.evaluate("""GatewayTools.chat([{role: "user", content: "hi"}]).then(() => 'answered',
                                                                                        e => e.message)""")

    assert bridge.startswith("The gateway refused the bridge session")
    assert chat == "Failed to fetch"  # the browser saw no CORS answer for this origin
    assert llm.requests == []


async def test_websocket_handshake_checks_the_origin(site):
    """The bridge's handshake is refused with 403 for a disallowed Origin and accepted for an allowed one."""
    url = site.gateway.replace("http", "ws") + "/client/bridge"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, origin=f"http://{DISALLOWED_HOST}:8080"):
            pass
    async with connect(url, origin=f"http://{ALLOWED_HOST}:8080") as socket:
        hello = await socket.recv()

    assert refused.value.response.status_code == 403
    assert '"type":"session"' in hello


async def test_cors_answers_the_allowed_origin_only(site):
    """A preflight from an allowed origin gets CORS headers for the gateway's headers; another origin gets 403."""
    preflight = {"Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type,authorization,x-gateway-session"}
    async with httpx.AsyncClient(base_url=site.gateway) as client:
        allowed = await client.options("/tools/example-tool/call",
                                       headers={"Origin": f"http://{ALLOWED_HOST}:3000", **preflight})
        refused = await client.options("/tools/example-tool/call",
                                       headers={"Origin": f"http://{DISALLOWED_HOST}:3000", **preflight})
        listing = await client.get("/tools", headers={"Origin": f"http://{ALLOWED_HOST}:3000"})

    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == f"http://{ALLOWED_HOST}:3000"
    assert "x-gateway-session" in allowed.headers["access-control-allow-headers"].lower()
    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers
    assert listing.headers["access-control-allow-origin"] == f"http://{ALLOWED_HOST}:3000"
    assert "etag" in listing.headers["access-control-expose-headers"].lower()


@pytest.fixture(scope="module")
def keyed_gateway(servers, definitions) -> str:
    """A gateway behind an API key with no allowed_origins, as a team would deploy it: its base URL."""
    settings = Settings(definitions=definitions, reload=False, api_keys=(ApiKey("team", hash_key("team-key")),))
    return servers.start(create_app(Gateway(settings)), lifespan="on")


async def test_a_dns_name_pointed_at_the_gateway_does_not_make_its_page_same_origin(keyed_gateway, open_page):
    """F7 in a real browser: the demo page loaded through evil.test (resolving to the gateway) cannot open the
    bridge, while the same page at the address the gateway serves at can, with auth on and no allowed_origins."""
    port = keyed_gateway.rsplit(":", 1)[1]
    session = "document.getElementById('session').textContent"
    rebound = await open_page(f"http://{DISALLOWED_HOST}:{port}/client/demo")
    await rebound.wait_for_function(f"{session} !== 'connecting…'")
    own = await open_page(f"{keyed_gateway}/client/demo")
    await own.wait_for_function(f"{session} !== 'connecting…'")

    assert (await rebound.evaluate(session)).startswith("unavailable (The gateway refused the bridge session")
    assert len(await own.evaluate(session)) > 20  # a session id
