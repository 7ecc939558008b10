"""Hostile requests against a real server: bad text, duplicate keys, malformed MCP ids, clients that go away
mid-body, unencodable results. Each is a 4xx or a readable result, never a 500, a silence or a traceback."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from support import serving

HOSTILE_TOOLS = {
    "python/hostile.py": '''
        def echo(s: str) -> str:
            return s


        def bad_text() -> str:
            return "bad \\ud800 str"


        def bad_mapping() -> dict:
            return {"k\\udc80": ["ok", "x\\ud800y"]}
        ''',
    "hostile.yaml": '''
        tools:
          - {id: echo, name: Echo, user_description: u, ai_description: a, binding: {python: "hostile:echo"}}
          - {id: bad_text, name: Bad text, user_description: u, ai_description: a,
             binding: {python: "hostile:bad_text"}}
          - {id: bad_mapping, name: Bad mapping, user_description: u, ai_description: a,
             binding: {python: "hostile:bad_mapping"}}
        ''',
}
HANDSHAKE = {"Accept": "application/json, text/event-stream"}
STATELESS = HANDSHAKE | {"MCP-Protocol-Version": "2026-07-28"}
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
CLIENTS = ("httpx", "httpcore", "mcp.client")  # the loggers of the HTTP and MCP clients (httpx2 is the SDK's httpx)


@pytest.fixture(scope="module")
def surrogate_upstream() -> Iterator[str]:
    """An HTTP service whose JSON answer holds a lone surrogate escape, as a remote service might send."""

    async def answer(request):
        return Response(b'{"a": "\\ud800 tail", "b\\udfff": 1}', media_type="application/json")

    with serving(Starlette(routes=[Route("/bad", answer)])) as upstream:
        yield upstream.url


@pytest.fixture
def hostile(start_server, write_definitions, surrogate_upstream):
    """A server with an echo tool, tools returning lone surrogates, and an HTTP tool whose upstream does."""
    files = dict(HOSTILE_TOOLS)
    files["upstream.yaml"] = f'''
        tools:
          - id: upstream
            name: Upstream
            user_description: u
            ai_description: a
            binding: {{http: {{method: GET, url: "{surrogate_upstream}/bad"}}}}
        '''
    return start_server(write_definitions(files))


@pytest.fixture
def server_log(log_handler) -> list[logging.LogRecord]:
    """Every record the server logs (gateway and uvicorn, debug level up) while the test runs."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    # uvicorn's loggers do not propagate to the root: listen on both.
    log_handler(Keep(logging.DEBUG), "", "uvicorn", level=logging.DEBUG)
    return records


def _raw_exchange(url: str, *requests: bytes) -> list[bytes]:
    """Send ``requests`` one after another on ONE connection; each answer's head and body, in order."""
    host, port = url.removeprefix("http://").split(":")
    answers = []
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        stream = sock.makefile("rb")
        for request in requests:
            sock.sendall(request)
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                byte = stream.read(1)
                assert byte, f"connection closed after {len(answers)} answer(s)"
                head += byte
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            answers.append(head + stream.read(length))
    return answers


def _settle(done: Callable[[], bool], limit_s: float = 3.0) -> None:
    """Wait until ``done()`` or ``limit_s`` passed, for work the server finishes after answering."""
    deadline = time.monotonic() + limit_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)


def _post(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


# -- F5: unencodable text -----------------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_body_is_a_400_naming_where_and_the_connection_stays_usable(hostile):
    """{"s": "\\ud800"} is a 400 saying it holds a lone surrogate at $.s; the next request on the same
    keep-alive connection is answered."""
    bad, good = _raw_exchange(hostile.url, _post("/tools/echo/call", b'{"s": "\\ud800"}'),
                              _post("/tools/echo/call", b'{"s": "fine"}'))
    assert bad.startswith(b"HTTP/1.1 400 ")
    error = json.loads(bad.split(b"\r\n\r\n", 1)[1])["error"]
    assert "lone surrogate" in error and "$.s" in error
    assert good.startswith(b"HTTP/1.1 200 ") and json.loads(good.split(b"\r\n\r\n", 1)[1])["result"] == "fine"


def test_a_surrogate_pair_in_a_body_is_ordinary_text(hostile):
    """An escaped surrogate pair is one character (😀), not an error."""
    answer = httpx.post(f"{hostile.url}/tools/echo/call", content=b'{"s": "\\ud83d\\ude00"}')
    assert answer.status_code == 200 and answer.json()["result"] == "\U0001F600"


def test_utf8_encoded_surrogates_are_not_utf8(hostile):
    """The bytes of a surrogate encoded as UTF-8 (ED A0 80) are refused as not UTF-8 text."""
    answer = httpx.post(f"{hostile.url}/tools/echo/call", content=b'{"s": "\xed\xa0\x80"}')
    assert answer.status_code == 400 and "not UTF-8" in answer.json()["error"]


@pytest.mark.parametrize("tool", ["bad_text", "bad_mapping", "upstream"])
def test_lone_surrogates_in_a_result_become_replacement_characters_on_rest(hostile, tool):
    """A tool (Python or an HTTP upstream) answering text with lone surrogates gives a 200 result whose
    surrogates are U+FFFD, not a 500."""
    answer = httpx.post(f"{hostile.url}/tools/{tool}/call", json={})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["is_error"] is False and "\ufffd" in body["text"]
    expected = {"bad_text": "bad \ufffd str", "bad_mapping": {"k\ufffd": ["ok", "x\ufffdy"]},
                "upstream": {"a": "\ufffd tail", "b\ufffd": 1}}[tool]
    assert body["result"] == expected


@pytest.mark.parametrize("headers", [HANDSHAKE, STATELESS], ids=["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("tool", ["bad_text", "upstream"])
def test_lone_surrogates_in_a_result_become_replacement_characters_on_mcp(hostile, headers, tool):
    """Over MCP (both revisions) such a result is an ordinary tools/call result with U+FFFD, not -32603."""
    with httpx.Client(base_url=hostile.url, timeout=10) as http:
        if headers is HANDSHAKE:
            headers = headers | _initialize(http)
        params = {"name": tool, "arguments": {}} | ({"_meta": ENVELOPE} if headers.get("MCP-Protocol-Version")
                                                   == "2026-07-28" else {})
        answer = http.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params},
                           headers=headers | {"Mcp-Method": "tools/call", "Mcp-Name": tool})
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is False and "\ufffd" in result["content"][0]["text"]


def _initialize(http: httpx.Client) -> dict[str, str]:
    """Run the 2025-11-25 handshake; the headers later requests of the session carry."""
    init = http.post("/mcp", headers=HANDSHAKE, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    session = {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    http.post("/mcp", headers=HANDSHAKE | session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


# -- duplicate keys -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b'{"s": "a", "s": "b"}', b'{"s": {"x": 1, "x": 2}}'])
def test_duplicate_keys_in_a_call_body_are_a_400_naming_the_key(hostile, body):
    """A JSON object with a key twice is refused with a 400 naming that key, not silently the last value."""
    answer = httpx.post(f"{hostile.url}/tools/echo/call", content=body)
    assert answer.status_code == 400
    key = "s" if body.count(b'"s"') == 2 else "x"
    assert f"duplicate key '{key}'" in answer.json()["error"]


@pytest.mark.parametrize("body", [b'{"s": NaN}', b'{"s": [Infinity]}', b'-Infinity'])
def test_nan_and_infinity_tokens_are_a_400(hostile, body):
    """Python's json reads NaN and Infinity, which are not JSON: a body holding them is refused with a 400."""
    answer = httpx.post(f"{hostile.url}/tools/echo/call", content=body)
    assert answer.status_code == 400 and "is not a JSON value" in answer.json()["error"]


# -- F6: MCP request ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", [1.5, None, {"a": 1}, [1], True], ids=["1.5", "null", "object", "array", "true"])
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_a_request_with_an_invalid_id_gets_an_invalid_request_error(hostile, bad_id, revision):
    """A tools/list whose id is not a string or an integer is answered 400 with JSON-RPC -32600 and id null,
    on both revisions — never 202 with nothing."""
    with httpx.Client(base_url=hostile.url, timeout=10) as http:
        headers = STATELESS if revision == "2026-07-28" else HANDSHAKE | _initialize(http)
        params = {"_meta": ENVELOPE} if revision == "2026-07-28" else {}
        answer = http.post("/mcp", json={"jsonrpc": "2.0", "id": bad_id, "method": "tools/list", "params": params},
                           headers=headers | {"Mcp-Method": "tools/list"})
    assert answer.status_code == 400, (answer.status_code, answer.text)
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600


def test_valid_ids_are_still_answered(hostile):
    """String and integer ids are answered with the same id (the id check lets them through)."""
    with httpx.Client(base_url=hostile.url, timeout=10) as http:
        session = HANDSHAKE | _initialize(http)
        for request_id in ("abc", 7, 0):
            answer = http.post("/mcp", headers=session,
                               json={"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
            assert answer.status_code == 200 and answer.json()["id"] == request_id


@pytest.mark.parametrize(("arguments", "said"), [(b'{"s": "\\ud800"}', "$.params.arguments.s"),
                                             (b'{"s": "a", "s": "b"}', "duplicate key 's'")],
                         ids=["lone surrogate", "duplicate key"])
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_mcp_bodies_are_held_to_the_same_json_rules(hostile, revision, arguments, said):
    """An MCP tools/call whose body has a lone surrogate or a duplicate key is a 400 parse error saying which,
    on both revisions, as on REST."""
    with httpx.Client(base_url=hostile.url, timeout=10) as http:
        headers = STATELESS if revision == "2026-07-28" else HANDSHAKE | _initialize(http)
        meta = json.dumps({"_meta": ENVELOPE} if revision == "2026-07-28" else {})[1:-1]
        body = (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "echo", "arguments": '
                + arguments + (b", " + meta.encode() if meta else b"") + b"}}")
        answer = http.post("/mcp", content=body, headers=headers | {"Mcp-Method": "tools/call", "Mcp-Name": "echo",
                                                                    "Content-Type": "application/json"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32700 and said in error["message"]


# -- F14: disconnects ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/tools/echo/call", "/mcp"])
def test_a_client_leaving_mid_body_is_at_most_one_debug_line(hostile, server_log, path):
    """A client that announces 1000 bytes, sends 10 and closes leaves no error, no 'unhandled error' and no
    ClientDisconnect traceback in the server's log: at most one debug line."""
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", int(hostile.url.rsplit(":", 1)[1])), timeout=10) as sock:
            sock.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Accept: application/json, text/event-stream\r\n"
                          "Content-Length: 1000\r\n\r\n").encode() + b'{"s": "abc')
    assert httpx.get(f"{hostile.url}/healthz").status_code == 200  # still serving
    _settle(lambda: sum("disconnect" in r.getMessage().lower() for r in server_log) >= 3)
    # The test process's HTTP clients log at INFO too: this test's own, and the federation fixture's gateway
    # pinging its upstreams every 10 s (httpx2, the MCP SDK's httpx) for the whole session.
    loud = [r for r in server_log if r.levelno > logging.DEBUG and not r.name.startswith(CLIENTS)]
    assert loud == [], [(r.name, r.getMessage()) for r in loud]
    disconnect_lines = [r for r in server_log if "disconnect" in r.getMessage().lower() or r.exc_info]
    assert len(disconnect_lines) <= 3 and not any(r.exc_info for r in disconnect_lines)
