"""API keys on REST and MCP: who may call at all, which toolsets a key reaches, and who sees admin details."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from server_support import ADMIN_KEY, READER_KEY

from gateway.server.http.auth import Caller
from gateway.settings import ApiKey, hash_key

MATH = {"sum", "square_root"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("headers", [{}, bearer("not-a-key"), {"Authorization": f"Basic {READER_KEY}"}])
def test_without_a_valid_key_rest_is_401(auth_server, headers):
    """No key, a wrong key, or a key under another scheme: 401 with WWW-Authenticate: Bearer, on every route
    that serves tools."""
    for method, path in (("GET", "/tools"), ("GET", "/tools/sum"), ("POST", "/tools/sum/call")):
        response = httpx.request(method, f"{auth_server.url}{path}", headers=headers, json={"a": 1, "b": 2})
        assert response.status_code == 401, (method, path)
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["status"] == 401


def test_healthz_and_the_status_summary_need_no_key(auth_server):
    """/healthz and the /status summary answer anyone; the details (definitions, last reload) need the admin key,
    which a toolset-limited key does not have."""
    assert httpx.get(f"{auth_server.url}/healthz").status_code == 200
    anonymous = httpx.get(f"{auth_server.url}/status").json()
    assert anonymous["version"] == auth_server.gateway.catalog.version and "last_reload" not in anonymous
    reader = httpx.get(f"{auth_server.url}/status", headers=bearer(READER_KEY)).json()
    assert "definitions" not in reader and "last_reload" not in reader
    admin = httpx.get(f"{auth_server.url}/status", headers=bearer(ADMIN_KEY)).json()
    assert admin["auth"] is True and admin["last_reload"]["ok"] is True
    assert httpx.get(f"{auth_server.url}/status", headers=bearer("wrong")).status_code == 401


def test_a_key_lists_and_calls_only_its_toolsets(auth_server):
    """A key limited to 'math' lists only math tools (in every format), may call them, and gets 404 for any other
    tool, as if it did not exist."""
    with httpx.Client(base_url=auth_server.url, headers=bearer(READER_KEY)) as reader:
        assert {tool["id"] for tool in reader.get("/tools").json()["tools"]} == MATH
        assert {tool["name"] for tool in reader.get("/tools?format=anthropic").json()["tools"]} == MATH
        assert reader.post("/tools/sum/call", json={"a": 2, "b": 3}).json()["result"] == 5.0
        for method, path in (("GET", "/tools/get_time"), ("POST", "/tools/get_time/call")):
            hidden = reader.request(method, path)
            assert hidden.status_code == 404 and hidden.json()["did_you_mean"] == []
    with httpx.Client(base_url=auth_server.url, headers=bearer(ADMIN_KEY)) as admin:
        assert len(admin.get("/tools").json()["tools"]) == len(auth_server.gateway.catalog.tools)


def test_admin_operations_need_the_admin_key(auth_server):
    """POST /admin/reload is 403 for a toolset key and runs for the admin key."""
    assert httpx.post(f"{auth_server.url}/admin/reload", headers=bearer(READER_KEY)).status_code == 403
    assert httpx.post(f"{auth_server.url}/admin/reload", headers=bearer(ADMIN_KEY)).json()["ok"] is True


def test_with_auth_on_any_host_name_is_served(auth_server):
    """With keys configured the gateway may sit behind any host name: no loopback Host check."""
    response = httpx.get(f"{auth_server.url}/tools", headers=bearer(ADMIN_KEY) | {"Host": "gateway.example"})
    assert response.status_code == 200


def test_mcp_without_a_valid_key_is_401(auth_server):
    """/mcp refuses a request without a key, or with a wrong one, before the protocol starts."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}
    for headers in ({}, bearer("wrong")):
        response = httpx.post(f"{auth_server.url}/mcp", json=initialize,
                              headers=headers | {"Accept": "application/json, text/event-stream"})
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"


async def test_mcp_key_sees_and_calls_only_its_toolsets(auth_server):
    """Over MCP (both revisions) a 'math' key lists only math tools, and another one is unknown to it."""
    async with httpx2.AsyncClient(headers=bearer(READER_KEY), timeout=30) as http:
        async with streamable_http_client(f"{auth_server.url}/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            assert {tool.name for tool in (await session.list_tools()).tools} == MATH
            assert (await session.call_tool("sum", {"a": 1, "b": 1})).content[0].text == "2.0"
            with pytest.raises(MCPError) as hidden:
                await session.call_tool("get_time", {})
            assert hidden.value.message == "Unknown tool 'get_time'."
        async with Client(streamable_http_client(f"{auth_server.url}/mcp", http_client=http)) as client:
            assert client.protocol_version == "2026-07-28"
            assert {tool.name for tool in (await client.list_tools()).tools} == MATH


def test_caller_rights_without_keys_depend_on_loopback():
    """With auth off every tool is usable, and admin operations are allowed from loopback only; with auth on an
    anonymous caller may use nothing."""
    key = ApiKey("k", "0" * 64, toolsets=("math",))
    assert Caller(None, loopback=True, auth=False).is_admin
    assert not Caller(None, loopback=False, auth=False).is_admin
    assert not Caller(key, loopback=True, auth=True).is_admin
    assert not Caller(None, loopback=True, auth=True).is_admin


def test_did_you_mean_suggests_only_tools_the_key_may_use(auth_server):
    """A near-miss name is answered with close matches among the key's own tools only, on REST and MCP alike:
    a tool outside its toolsets is neither suggested nor told apart from a missing one."""
    with httpx.Client(base_url=auth_server.url, headers=bearer(READER_KEY)) as reader:
        assert reader.post("/tools/summ/call", json={}).json()["did_you_mean"] == ["sum"]
        near_hidden = reader.get("/tools/get_tim")
        assert near_hidden.status_code == 404 and near_hidden.json()["did_you_mean"] == []
        assert reader.get("/tools/get_time").json() == reader.get("/tools/no_such_tool").json() | {
            "error": "Unknown tool 'get_time'.", "tool": "get_time"}
    with httpx.Client(base_url=auth_server.url, headers=bearer(ADMIN_KEY)) as admin:
        assert "get_time" in admin.get("/tools/get_tim").json()["did_you_mean"]


WHOAMI_TOOLS = {
    "python/who.py": """
        def whoami(user: str | None = None) -> dict:
            return {"user": user}
        """,
    "who.yaml": """
        tools:
          - id: whoami
            name: Who am I
            user_description: Says who calls.
            ai_description: Returns the user of the call.
            binding: {python: "who:whoami"}
        """,
}
FRONTEND_KEY = "frontend-key-for-tests"
ASSERTING_KEYS = (ApiKey("reader", hash_key(READER_KEY)),
                  ApiKey("frontend", hash_key(FRONTEND_KEY), may_assert_user=True))


def test_only_keys_allowed_to_assert_a_user_may_name_one(start_server, write_definitions):
    """With auth on, the user a tool sees is the key's name: X-User is ignored for an ordinary key (REST and
    MCP), and honoured for a key with may_assert_user."""
    served = start_server(write_definitions(WHOAMI_TOOLS), api_keys=ASSERTING_KEYS)
    spoof = {"X-User": "ceo"}
    rest = httpx.post(f"{served.url}/tools/whoami/call", headers=bearer(READER_KEY) | spoof).json()
    assert rest["result"] == {"user": "reader"}
    trusted = httpx.post(f"{served.url}/tools/whoami/call", headers=bearer(FRONTEND_KEY) | spoof).json()
    assert trusted["result"] == {"user": "ceo"}
    unnamed = httpx.post(f"{served.url}/tools/whoami/call", headers=bearer(FRONTEND_KEY)).json()
    assert unnamed["result"] == {"user": "frontend"}

    async def mcp_user(key: str) -> Any:
        async with httpx2.AsyncClient(headers=bearer(key) | spoof, timeout=30) as http, \
                Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client:
            return json.loads((await client.call_tool("whoami", {})).content[0].text)

    assert anyio.run(mcp_user, READER_KEY) == {"user": "reader"}
    assert anyio.run(mcp_user, FRONTEND_KEY) == {"user": "ceo"}


def test_with_auth_on_loopback_origins_need_listing_too(auth_server):
    """Behind API keys a page on a loopback origin is a foreign page like any other (403) unless allowed_origins
    names it; requests without Origin still pass."""
    for origin in ("http://localhost:5173", "http://127.0.0.1:3000"):
        refused = httpx.get(f"{auth_server.url}/tools", headers=bearer(ADMIN_KEY) | {"Origin": origin})
        assert refused.status_code == 403, origin
    assert httpx.get(f"{auth_server.url}/tools", headers=bearer(ADMIN_KEY)).status_code == 200


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _open_session(url: str, key: str) -> str:
    """Initialise a 2025-11-25 session with ``key``; its id."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}
    response = httpx.post(f"{url}/mcp", json=initialize, headers=MCP_HEADERS | bearer(key), timeout=30)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    session = MCP_HEADERS | bearer(key) | {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    assert httpx.post(f"{url}/mcp", json=initialized, headers=session, timeout=30).status_code == 202
    return session_id


@pytest.mark.parametrize("method", ["tools/call", "tools/list", "ping", "DELETE", "GET"])
def test_a_session_held_here_is_not_found_for_another_key(auth_server, method):
    """A 2025-11-25 session opened with one key answers 404 'Session not found' to another key that names its id
    (calls on the fast path and on the SDK's, its GET stream and its DELETE), and keeps serving its own key."""
    session_id = _open_session(auth_server.url, READER_KEY)
    other = MCP_HEADERS | bearer(ADMIN_KEY) | {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    params = {"name": "sum", "arguments": {"a": 1, "b": 2}} if method == "tools/call" else {}
    with httpx.Client(timeout=30) as http:
        if method == "DELETE":
            refused = http.delete(f"{auth_server.url}/mcp", headers=other)
        elif method == "GET":
            refused = http.get(f"{auth_server.url}/mcp", headers=other | {"Accept": "text/event-stream"})
        else:
            refused = http.post(f"{auth_server.url}/mcp", headers=other,
                                json={"jsonrpc": "2.0", "id": 2, "method": method, "params": params})
        assert refused.status_code == 404
        assert refused.json()["error"]["message"] == "Session not found"
        own = {**other, "Authorization": f"Bearer {READER_KEY}"}
        answer = http.post(f"{auth_server.url}/mcp", headers=own,
                           json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                 "params": {"name": "sum", "arguments": {"a": 1, "b": 2}}})
        assert answer.status_code == 200 and "3.0" in answer.text
