"""The MCP fast path (gateway.server.mcp.fast) answers exactly as the SDK does, and is the path actually taken."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from server_support import ADMIN_KEY, API_KEYS, READER_KEY
from support import until_async

import gateway.server.mcp.handlers as mcp_handlers
import gateway.server.mcp.surface as mcp_surface
from gateway.server.mcp import fast as mcp_fast
from gateway.server.mcp.sessions import SharedSessions

LEGACY, MODERN = "2025-11-25", "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream"}
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}}
HEADERS_THAT_MATTER = ("content-type", "mcp-session-id", "allow", "www-authenticate")

# (method, params) of every request compared; each is sent on both revisions, by two keys.
REQUESTS: list[tuple[str, dict[str, Any] | None]] = [
    ("tools/list", None),
    ("tools/list", {}),
    ("tools/list", {"cursor": "3"}),
    ("tools/list", {"cursor": "6"}),
    ("tools/list", {"cursor": "2"}),  # a cursor of the client's own making
    ("tools/list", {"cursor": "999"}),
    ("tools/list", {"cursor": "page-two"}),
    ("tools/list", {"_meta": {"gateway/session": "tab-1"}}),
    ("tools/list", {"_meta": {"gateway/session": 7}}),
    ("tools/call", {"name": "sum", "arguments": {"a": 1, "b": 2}}),
    ("tools/call", {"name": "sum", "arguments": {"a": 1}}),  # an argument error
    ("tools/call", {"name": "sum", "arguments": {"a": "x", "b": 2}}),
    ("tools/call", {"name": "square_root", "arguments": {"x": -1}}),  # the tool fails
    ("tools/call", {"name": "diff_time", "arguments": {"start": "2024-03-01T00:00:00+00:00",
                                                       "end": "2024-03-01T06:00:00+00:00"}}),  # structured
    ("tools/call", {"name": "get_lights", "arguments": {}}),
    ("tools/call", {"name": "change_state", "arguments": {"id": 2, "is_on": True}}),
    ("tools/call", {"name": "change_state", "arguments": {"id": 99, "is_on": True}}),
    ("tools/call", {"name": "example-tool", "arguments": {"exampleParam": "héllo ✓"}}),
    ("tools/call", {"name": "get_time", "arguments": {"timezone_name": "Mars/Olympus"}}),
    ("tools/call", {"name": "search_stations", "arguments": {"country": "NO", "limit": 2}}),  # no output schema
    ("tools/call", {"name": "get_station", "arguments": {"station_id": "valencia"}}),
    ("tools/call", {"name": "no_such_tool", "arguments": {}}),
    ("tools/call", {"name": "task_form_read", "arguments": {}}),  # a browser tool, no session named
    ("tools/call", {"name": "sum", "arguments": {"a": 1, "b": 2}, "_meta": {"gateway/session": ["x"]}}),
    ("tools/call", {"name": "sum"}),  # no arguments
    ("tools/call", {"name": 5, "arguments": {}}),  # refused by the SDK's validation
    ("tools/call", {"name": "sum", "arguments": [1, 2]}),
    ("tools/call", {"name": "sum", "arguments": {"a": 1, "b": 2}, "_meta": {"progressToken": "p1",
                                                                            "traceparent": "00-" + "1" * 32 + "-"
                                                                            + "2" * 16 + "-01"}}),
]


def _answer(response: httpx.Response) -> tuple[int, dict[str, str], Any]:
    headers = {name: response.headers[name] for name in HEADERS_THAT_MATTER if name in response.headers}
    if headers.get("mcp-session-id", "") != response.request.headers.get("mcp-session-id", ""):
        headers["mcp-session-id"] = "a new one"  # the SDK opens a session (a random id) for a sessionless request
    try:
        body = response.json()
    except ValueError:
        body = response.text
    return response.status_code, headers, body


class Exchange:
    """Sends one request through the fast path and once with it switched off, and gives both answers."""

    def __init__(self, url: str, monkeypatch: pytest.MonkeyPatch):
        self.client = httpx.Client(base_url=url, timeout=30)
        self.monkeypatch = monkeypatch
        self.sdk_saw = _sdk_methods(monkeypatch)
        self.fast = []  # the requests the fast path answered

    def both(self, body: Any, headers: dict[str, str]) -> tuple[Any, Any]:
        answers = []
        for enabled in (True, False):
            self.monkeypatch.setattr(mcp_fast, "ENABLED", enabled)
            before = len(self.sdk_saw)
            answers.append(_answer(self.client.post("/mcp", json=body, headers=headers)))
            if enabled and len(self.sdk_saw) == before:
                self.fast.append(body)
        return answers[0], answers[1]

    def session(self, key: str) -> str:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        opened = self.client.post("/mcp", json=init, headers=ACCEPT | auth)
        session = opened.headers["mcp-session-id"]
        self.client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                         headers=ACCEPT | auth | {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY})
        return session


def _legacy(session: str | None, key: str) -> dict[str, str]:
    return ACCEPT | {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": LEGACY} | (
        {"Mcp-Session-Id": session} if session else {})


def _modern(method: str, params: dict[str, Any] | None, key: str) -> tuple[dict[str, Any], dict[str, str]]:
    params = dict(params or {})
    params["_meta"] = {**params.get("_meta", {}), **ENVELOPE}
    headers = ACCEPT | {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call" and isinstance(params.get("name"), str):
        headers["Mcp-Name"] = params["name"]
    return params, headers


@pytest.mark.parametrize("key", [READER_KEY, ADMIN_KEY], ids=["math-only key", "admin key"])
def test_fast_path_answers_as_the_sdk_does(start_server, shared_examples, tmp_path, monkeypatch, key):
    """Every request of the set (success, argument error, unknown or forbidden tool, tool error, structured
    output, pages and cursors, bad _meta) gets the same status, headers and body through the fast path as through
    the SDK, on both revisions, with and without a session, by a toolset-limited key and an admin key."""
    examples = tmp_path / "tool-definitions"
    shutil.copytree(shared_examples, examples)
    served = start_server(examples, api_keys=API_KEYS)
    demo = examples / "http-demo.yaml"  # the HTTP demo tools call this server's own /demo API
    demo.write_text(demo.read_text().replace("{{ gateway.base_url }}", served.url))
    reloaded = httpx.post(f"{served.url}/admin/reload", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert reloaded.json()["changed"] is True
    monkeypatch.setattr(mcp_handlers, "PAGE_SIZE", 3)
    exchange = Exchange(served.url, monkeypatch)
    session = exchange.session(key)
    compared = 0
    for number, (method, params) in enumerate(REQUESTS):
        body = {"jsonrpc": "2.0", "id": number, "method": method, **({"params": params} if params is not None else {})}
        for headers in (_legacy(session, key), _legacy(None, key), _legacy("no-such-session", key)):
            fast, sdk = exchange.both(body, headers)
            assert fast == sdk, (method, params, headers)
            compared += 1
        modern_params, headers = _modern(method, params, key)
        fast, sdk = exchange.both({**body, "id": f"r{number}", "params": modern_params}, headers)
        assert fast == sdk, (method, params, "2026-07-28")
        compared += 1
    assert compared == 4 * len(REQUESTS)
    # On the session and stateless, all but the two requests the SDK's validation refuses.
    assert len(exchange.fast) == 2 * (len(REQUESTS) - 2), [body.get("params") for body in exchange.fast]


def test_fast_path_leaves_odd_requests_to_the_sdk_with_the_same_answers(start_server, shared_examples, monkeypatch):
    """Requests the fast path does not take (no or wrong Accept, another Content-Type, a mismatched routing
    header, a duplicated one, an unknown revision, an extra envelope member, a batch, a bad key) are answered
    the same either way."""
    served = start_server(shared_examples, api_keys=API_KEYS)
    exchange = Exchange(served.url, monkeypatch)
    session = exchange.session(READER_KEY)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sum", "arguments": {"a": 1, "b": 2}}}
    params, modern = _modern("tools/call", call["params"], READER_KEY)
    modern_call = {**call, "params": params}
    legacy = _legacy(session, READER_KEY)
    cases = [
        (call, legacy | {"Accept": "text/event-stream"}),
        (call, legacy | {"Accept": "*/*"}),
        (modern_call, modern | {"Accept": "text/plain"}),
        (modern_call, modern | {"Mcp-Name": "square_root"}),
        (modern_call, modern | {"Mcp-Method": "tools/list"}),
        (modern_call, modern | {"MCP-Protocol-Version": "2099-01-01"}),
        ({**modern_call, "extra": 1}, modern),
        ({**call, "jsonrpc": "1.0"}, legacy),
        ([call], legacy),
        (call, legacy | {"Authorization": "Bearer wrong"}),
        (call, _legacy(session, ADMIN_KEY)),  # a session held here answers any key, as the SDK path does
    ]
    for body, headers in cases:
        fast, sdk = exchange.both(body, headers)
        assert fast == sdk, (body, headers)
    duplicated = [(k, v) for k, v in modern.items()] + [("Mcp-Method", "tools/call")]
    answers = []
    for enabled in (True, False):
        monkeypatch.setattr(mcp_fast, "ENABLED", enabled)
        answers.append(_answer(httpx.post(f"{served.url}/mcp", json=modern_call, headers=duplicated)))
    assert answers[0] == answers[1] and answers[0][0] == 400


def _sdk_methods(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods of the POSTed messages the SDK handles from now on."""
    seen: list[str] = []
    handle = SharedSessions.handle

    async def counting(self, scope, receive, send, body, owner):
        if body is not None:
            message = mcp_surface.screen_message(body)
            seen.append(message.get("method") if isinstance(message, dict) else "batch")
        await handle(self, scope, receive, send, body, owner)

    monkeypatch.setattr(SharedSessions, "handle", counting)
    return seen


async def test_real_clients_take_the_fast_path(start_server, shared_examples, monkeypatch):
    """The official Python SDK's clients, on both revisions, have their tools/list and tools/call answered by the
    fast path: the SDK sees their other messages only (and every one of them with the switch off)."""
    served = start_server(shared_examples)
    seen = _sdk_methods(monkeypatch)
    async with Client(f"{served.url}/mcp") as client:
        assert client.protocol_version == MODERN
        assert {tool.name for tool in (await client.list_tools()).tools} >= {"sum", "diff_time"}
        assert (await client.call_tool("sum", {"a": 1, "b": 2})).content[0].text == "3.0"
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert {tool.name for tool in (await session.list_tools()).tools} >= {"sum", "diff_time"}
        assert (await session.call_tool("sum", {"a": 1, "b": 2})).content[0].text == "3.0"
    assert "initialize" in seen and not {"tools/list", "tools/call"} & set(seen), seen
    seen.clear()
    monkeypatch.setattr(mcp_fast, "ENABLED", False)
    async with Client(f"{served.url}/mcp") as client:
        await client.call_tool("sum", {"a": 1, "b": 2})
    assert "tools/call" in seen


WAITS_PY = '''
import asyncio
import threading

started = threading.Event()


async def waits() -> str:
    started.set()
    await asyncio.sleep(60)
    return "never"
'''


def one_async_tool(write_definitions, module: str, source: str, function: str) -> Path:
    """A definitions directory serving ``function`` of ``python/<module>.py`` as a tool of that name."""
    return write_definitions({f"python/{module}.py": source, "tools.yaml": f"""
        tools:
          - id: {function}
            name: {function}
            user_description: u
            ai_description: a
            timeout_s: 120
            binding: {{python: "{module}:{function}"}}
        """})


async def test_a_cancelled_fast_call_is_answered_as_the_sdk_answers_it(write_definitions, start_server, monkeypatch):
    """A 2025-11-25 client's notifications/cancelled ends its tools/call in flight: the call's POST is answered
    -32800 "Request cancelled", through the fast path as through the SDK."""
    module = "mcp_fast_waits"
    root = one_async_tool(write_definitions, module, WAITS_PY, "waits")
    served = start_server(root)
    answers = []
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        for enabled in (True, False):
            monkeypatch.setattr(mcp_fast, "ENABLED", enabled)
            session = Exchange(served.url, monkeypatch).session("")
            headers = ACCEPT | {"MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": session}
            call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "waits", "arguments": {}}}
            pending = asyncio.ensure_future(http.post("/mcp", json=call, headers=headers))
            await until_async(lambda: "mcp_fast_waits" in sys.modules and sys.modules[module].started.is_set(),
                              "the tool to start")
            sys.modules[module].started.clear()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
            assert (await http.post("/mcp", json=cancel, headers=headers)).status_code == 202
            answered = await pending
            assert answered.headers["mcp-session-id"] == session
            answers.append((answered.status_code, answered.json()))
    assert answers[0] == answers[1]
    assert answers[0][1]["error"] == {"code": -32800, "message": "Request cancelled"}


RELEASED_PY = '''
import asyncio

started = False
released = False


async def held() -> str:
    global started
    started = True
    while not released:
        await asyncio.sleep(0.01)
    return "finished"
'''


async def test_another_key_cannot_cancel_a_session_owners_call(write_definitions, start_server, monkeypatch):
    """notifications/cancelled sent by one key on another key's 2025-11-25 session is refused (404) and leaves
    the owner's call in flight to finish with its result, through the fast path as through the SDK."""
    module = "mcp_fast_held"
    root = one_async_tool(write_definitions, module, RELEASED_PY, "held")
    served = start_server(root, api_keys=API_KEYS)
    answers = []
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        for enabled in (True, False):
            monkeypatch.setattr(mcp_fast, "ENABLED", enabled)
            session = Exchange(served.url, monkeypatch).session(ADMIN_KEY)
            call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "held", "arguments": {}}}
            pending = asyncio.ensure_future(http.post("/mcp", json=call, headers=_legacy(session, ADMIN_KEY)))
            await until_async(lambda: module in sys.modules and sys.modules[module].started, "the tool to start")
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
            refused = await http.post("/mcp", json=cancel, headers=_legacy(session, READER_KEY))
            sys.modules[module].released = True
            answered = await pending
            sys.modules[module].started = sys.modules[module].released = False
            answers.append((refused.status_code, answered.status_code, answered.json()))
    assert answers[0] == answers[1]
    assert answers[0][0] == 404
    assert answers[0][2]["result"]["content"][0]["text"] == "finished"


@pytest.mark.parametrize("cursor", ["²", "9" * 5000], ids=["a superscript digit", "5,000 digits"])
def test_a_cursor_that_is_not_a_page_number_is_invalid_params_not_an_internal_error(start_server, shared_examples,
                                                                                      cursor):
    """A cursor str.isdigit takes but int() refuses ('²', thousands of digits) is -32602 Invalid params naming
    it (cut short), never an internal error with a logged traceback (found in review)."""
    served = start_server(shared_examples)
    params, headers = _modern("tools/list", {"cursor": cursor}, "unused")
    del headers["Authorization"]
    answer = httpx.post(f"{served.url}/mcp", headers=headers,
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).json()
    assert answer["error"]["code"] == -32602, answer
    assert "Invalid cursor" in answer["error"]["message"] and len(answer["error"]["message"]) < 200


@pytest.mark.parametrize("method", [["tools/list"], {"a": 1}, 5, None], ids=["a list", "an object", "a number", "null"])
def test_a_method_that_is_not_a_string_is_left_to_the_sdk_not_a_500(start_server, shared_examples, method):
    """A JSON-RPC method of any JSON value (a list is unhashable) goes past the fast path to the SDK's own answer,
    never an internal error (found by the MCP fuzz test)."""
    served = start_server(shared_examples)
    params, headers = _modern("tools/list", None, "unused")
    del headers["Authorization"]
    answer = httpx.post(f"{served.url}/mcp", headers=headers,
                        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert answer.status_code < 500, answer.text


def test_fast_posts_are_answered_below_starlettes_routing_and_the_rest_still_reach_the_route(
        start_server, shared_examples, monkeypatch):
    """A tools/call the fast path takes, and a refused key, are answered by Front's hook without reaching the
    /mcp route; initialize (the SDK's) reaches the route with its body already read and is answered; a browser's
    call (an allowed Origin) goes through CORS and the route, and is answered by the fast path there."""
    reached: list[str] = []
    call = mcp_surface.McpSurface.__call__

    async def counting(self, scope, receive, send):
        reached.append(scope["method"])
        await call(self, scope, receive, send)

    monkeypatch.setattr(mcp_surface.McpSurface, "__call__", counting)
    origin = "https://app.example"
    served = start_server(shared_examples, api_keys=API_KEYS, allowed_origins=[origin])
    exchange = Exchange(served.url, monkeypatch)
    session = exchange.session(READER_KEY)
    assert reached == ["POST", "POST"], reached  # initialize and its notification: the SDK's
    reached.clear()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sum", "arguments": {"a": 1, "b": 2}}}
    answer = exchange.client.post("/mcp", json=body, headers=_legacy(session, READER_KEY))
    assert answer.json()["result"]["content"][0]["text"] == "3.0" and "x-catalog-version" in answer.headers
    refused = exchange.client.post("/mcp", json=body, headers=_legacy(session, "wrong"))
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert reached == [] and len(exchange.sdk_saw) == 2
    browser = exchange.client.post("/mcp", json=body, headers=_legacy(session, READER_KEY) | {"Origin": origin})
    assert browser.json()["result"]["content"][0]["text"] == "3.0"
    assert browser.headers["access-control-allow-origin"] == origin
    assert reached == ["POST"] and len(exchange.sdk_saw) == 2
