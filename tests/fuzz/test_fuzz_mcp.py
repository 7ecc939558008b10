"""Random JSON-RPC messages to ``/mcp``: on the stateless revision, inside a handshake session, and without one.

Whatever the message, the answer is never a 5xx, and the connection still serves. A request the server can
answer (an integer or string id) gets a JSON-RPC response carrying its id — a result or an error, never
silence; a message with an id it cannot answer to (``1.5``, ``null``, an object) gets a JSON-RPC error.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fuzz_support import ENVELOPE, MCP_HEADERS, FuzzServer, fuzz, json_values
from hypothesis import given
from hypothesis import strategies as st
from support import EXAMPLES, catalog_for

TOOL_IDS = sorted(catalog_for(EXAMPLES).tools)
METHODS = ["tools/call", "tools/list", "initialize", "ping", "resources/list", "prompts/list",
           "subscriptions/listen", "notifications/initialized", "completion/complete", "logging/setLevel"]
MISSING = object()
valid_ids = st.integers(min_value=-(2**53), max_value=2**53) | st.text(max_size=10)
invalid_ids = st.sampled_from([1.5, None, {"a": 1}, [1], True])


def params(with_envelope: bool) -> st.SearchStrategy[Any]:
    """Params shaped like a tool call or listing (with the stateless envelope or not), or any JSON value."""
    meta = st.just(ENVELOPE) if with_envelope else json_values
    call = st.fixed_dictionaries({"name": st.sampled_from(TOOL_IDS) | st.text(max_size=8)},
                                 optional={"arguments": json_values, "_meta": meta, "cursor": json_values})
    return call | st.fixed_dictionaries({}, optional={"_meta": meta, "cursor": json_values}) | json_values


@st.composite
def messages(draw: st.DrawFn, ids: st.SearchStrategy[Any], *, notifications: bool = True) -> dict[str, Any]:
    """A JSON-RPC message of any method and params; with an id drawn from ``ids`` (or none: a notification)."""
    message: dict[str, Any] = {"jsonrpc": draw(st.just("2.0") | json_values),
                               "method": draw(st.sampled_from(METHODS) | json_values)}
    identity = draw(ids | st.just(MISSING)) if notifications else draw(ids)
    if identity is not MISSING:
        message["id"] = identity
    parameters = draw(params(draw(st.booleans())) | st.just(MISSING))
    if parameters is not MISSING:
        message["params"] = parameters
    return message


@pytest.fixture(scope="module")
def session(fuzz_server: FuzzServer) -> dict[str, str]:
    """A 2025-11-25 session, handshake done: the headers its requests carry."""
    base = {"Accept": MCP_HEADERS["Accept"], "Content-Type": "application/json"}
    init = fuzz_server.client.post("/mcp", headers=base, content=json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}))
    headers = base | {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert fuzz_server.client.post("/mcp", headers=headers, content=json.dumps(initialized)).status_code == 202
    return headers


# How a message travels: the stateless revision (envelope, routing headers), inside a handshake session, or
# with neither (a handshake-era request without a session).
MODES = st.sampled_from(["stateless", "session", "sessionless"])


def post(server: FuzzServer, body: Any, mode: str, session: dict[str, str]) -> httpx.Response:
    if mode == "session":
        headers = dict(session)
    elif mode == "sessionless":
        headers = {"Accept": MCP_HEADERS["Accept"], "Content-Type": "application/json"}
    else:
        headers = dict(MCP_HEADERS)
        method = body.get("method") if isinstance(body, dict) else None
        if isinstance(method, str) and method.isascii() and method.isprintable():
            headers["Mcp-Method"] = method
            name = (body.get("params") or {}).get("name") if isinstance(body.get("params"), dict) else None
            if isinstance(name, str) and name.isascii() and name.isprintable():
                headers["Mcp-Name"] = name
    return server.client.post("/mcp", content=json.dumps(body).encode(), headers=headers)


def check_answer(server: FuzzServer, answer: httpx.Response) -> None:
    assert answer.status_code < 500, answer.text
    assert server.client.get("/healthz").status_code == 200


@fuzz(80)
@given(message=messages(valid_ids), mode=MODES)
def test_any_request_with_a_valid_id_is_answered_with_that_id(fuzz_server: FuzzServer, session: dict[str, str],
                                                              message: dict[str, Any], mode: str) -> None:
    """A JSON-RPC request with an integer or string id: never a 5xx; a 200 carries a response with that id."""
    answer = post(fuzz_server, message, mode, session)
    check_answer(fuzz_server, answer)
    if answer.status_code == 200 and "id" in message:
        reply = answer.json()
        assert reply["id"] == message["id"] and ("result" in reply) != ("error" in reply), reply


@fuzz(40)
@given(body=json_values | st.lists(messages(valid_ids), min_size=1, max_size=3), mode=MODES)
def test_any_json_to_mcp_is_never_a_server_error(fuzz_server: FuzzServer, session: dict[str, str], body: Any,
                                                 mode: str) -> None:
    """Any JSON value (batches included) posted to /mcp: a 4xx, a 202 or an answer; never a 5xx."""
    check_answer(fuzz_server, post(fuzz_server, body, mode, session))


@fuzz(20)
@given(message=messages(invalid_ids, notifications=False), mode=MODES)
def test_a_request_with_an_invalid_id_is_a_json_rpc_error(fuzz_server: FuzzServer, session: dict[str, str],
                                                          message: dict[str, Any], mode: str) -> None:
    """An id of 1.5, null, an object, an array or a boolean is answered with a JSON-RPC error, never silence."""
    answer = post(fuzz_server, message, mode, session)
    check_answer(fuzz_server, answer)
    if answer.status_code < 300:
        assert answer.status_code == 200 and "error" in answer.json(), (answer.status_code, answer.text)
