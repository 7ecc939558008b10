"""``GET /``: an HTML page for people (what runs here, each endpoint with an example) and a small JSON index for
clients that ask for JSON; with auth on, no catalog detail without a key."""

from __future__ import annotations

import httpx
import pytest
from server_support import ADMIN_KEY, READER_KEY
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from support import serving

from gateway.runtime.gateway import Gateway
from gateway.server import landing
from gateway.settings import Settings

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"  # Chromium's
PATHS = ("/tools", "/mcp", "/v1/chat/completions", "/v1/models", "/client/gateway-tools.js", "/client/demo",
         "/demo/stations", "/status")


def test_a_browser_gets_the_html_page(server):
    """A browser's Accept gets HTML naming the catalog version and tool count and every endpoint's path."""
    response = httpx.get(server.url + "/", headers={"Accept": BROWSER})
    assert response.status_code == 200 and response.headers["content-type"] == "text/html; charset=utf-8"
    page = response.text
    catalog = server.gateway.catalog
    assert catalog.version in page and f"{len(catalog.tools)} tools" in page
    for path in PATHS:
        assert f"{server.url}{path}" in page or f'href="{path}"' in page, path
    assert "Accept" in response.headers["vary"]


def test_the_page_loads_nothing_from_elsewhere_and_runs_no_script(server):
    """The page is self-contained (no external URL, no script) and its CSP forbids scripts and outside loads."""
    response = httpx.get(server.url + "/", headers={"Accept": "text/html"})
    page = response.text.lower()
    assert "<script" not in page and "https://" not in page and "//cdn" not in page
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("accept", ["application/json", "*/*", None, "application/json, text/html;q=0.5"])
def test_json_clients_get_the_index(server, accept):
    """A client that asks for JSON, or takes anything (curl, httpx), gets the JSON index."""
    headers = {"Accept": accept} if accept else {}
    response = httpx.get(server.url + "/", headers=headers)
    if accept is None:  # httpx sends */* by default; a raw request without Accept must answer JSON too
        response = httpx.Client().send(httpx.Request("GET", server.url + "/", headers={"Accept": ""}))
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    index = response.json()
    catalog = server.gateway.catalog
    assert index["catalog"] == {"version": catalog.version, "tools": len(catalog.tools)}
    assert index["auth"] is False
    assert set(index["endpoints"]) == {"rest", "mcp", "chat", "models", "browser_runtime", "demo", "demo_api",
                                       "status", "admin_console"}
    assert index["endpoints"]["mcp"] == server.url + "/mcp"


def test_the_admin_console_is_linked_once_it_exists(shared_examples):
    """When the app serves /admin/, the page links to it with no 'not built yet' note."""
    gateway = Gateway(Settings(definitions=shared_examples, reload=False))

    async def console(request):
        return PlainTextResponse("console")

    app = Starlette(routes=[*landing.routes(gateway), Route("/admin/", console)])
    with serving(app) as served:
        page = httpx.get(served.url + "/", headers={"Accept": "text/html"}).text
        index = httpx.get(served.url + "/").json()
    assert 'href="/admin/"' in page and "not built yet" not in page
    assert index["endpoints"]["admin_console"] == served.url + "/admin/"


def test_with_auth_on_no_catalog_detail_without_a_key(auth_server):
    """With API keys configured, a visitor without a key sees the endpoints but no catalog version or tool count."""
    page = httpx.get(auth_server.url + "/", headers={"Accept": "text/html"})
    index = httpx.get(auth_server.url + "/")
    assert page.status_code == index.status_code == 200
    version = auth_server.gateway.catalog.version
    assert version not in page.text and version not in index.text
    assert f"{len(auth_server.gateway.catalog.tools)} tools" not in page.text and "API key" in page.text
    assert index.json()["catalog"] is None and index.json()["auth"] is True
    assert "Authorization: Bearer" in page.text  # the examples show where the key goes


def test_with_auth_on_status_names_no_plugins_without_a_key(auth_server):
    """With API keys configured, ``/status`` names the loaded plugins and their versions to a key holder only."""
    anonymous = httpx.get(auth_server.url + "/status").json()
    keyed = httpx.get(auth_server.url + "/status", headers={"Authorization": f"Bearer {READER_KEY}"}).json()
    assert "plugins" not in anonymous
    assert keyed["plugins"] == []


def test_with_auth_on_a_key_sees_its_own_tools_only(auth_server):
    """A key sees the catalog version and the number of tools it may use; a wrong key is refused."""
    reader = httpx.get(auth_server.url + "/", headers={"Authorization": f"Bearer {READER_KEY}"}).json()
    admin = httpx.get(auth_server.url + "/", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()
    catalog = auth_server.gateway.catalog
    math = sum("math" in tool.definition.toolsets for tool in catalog.tools.values())
    assert reader["catalog"] == {"version": catalog.version, "tools": math}
    assert admin["catalog"] == {"version": catalog.version, "tools": len(catalog.tools)}
    assert httpx.get(auth_server.url + "/", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_examples_use_the_address_asked_and_never_reflect_markup(auth_server):
    """The examples use the URL the request came to (a reverse proxy's name); a hostile Host header never comes
    back as markup (auth on: with auth off the gateway answers loopback host names only)."""
    proxied = httpx.get(auth_server.url + "/", headers={"Host": "tools.example:8443"}).json()
    assert proxied["endpoints"]["mcp"] == "http://tools.example:8443/mcp"
    response = httpx.get(auth_server.url + "/", headers={"Accept": "text/html", "Host": 'x"><b>owned</b>'})
    assert response.status_code == 200 and "<b>owned</b>" not in response.text


def test_head_answers_like_get(server):
    """HEAD / answers 200 with the same content type and no body."""
    response = httpx.head(server.url + "/", headers={"Accept": "text/html"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert response.content == b""
