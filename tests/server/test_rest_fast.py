"""The REST fast path (gateway.server.rest.fast) answers POST /tools/{id}/call exactly as the Starlette route does,
tells the same events, and is the path actually taken."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_support import ADMIN_KEY, API_KEYS, READER_KEY

from gateway.events import Event, Observer
from gateway.server.rest import fast as rest_fast

EXTRA_PY = '''
import asyncio


def fails(x: int = 0) -> int:
    raise RuntimeError("a bug in the tool")


async def later(text: str) -> str:
    await asyncio.sleep(0)
    return text.upper()


def odd(kind: str) -> object:
    return {"big": 1e16, "small": 1e-7, "int": 2 ** 70, "text": "h\\u00e9llo \\u2713 \\u2028 \\x7f \\x01",
            "surrogate": "a\\ud800b", "nested": [[1.5]]}[kind]
'''
EXTRA_YAML = """
tools:
  - id: fails
    name: Fails
    user_description: u
    ai_description: a
    binding: {python: "fast_extra:fails"}
    toolsets: [math]
  - id: later
    name: Later
    user_description: u
    ai_description: a
    binding: {python: "fast_extra:later"}
    toolsets: [math]
  - id: odd
    name: Odd
    user_description: u
    ai_description: a
    binding: {python: "fast_extra:odd"}
  - id: limited
    name: Limited
    user_description: u
    ai_description: a
    binding: {python: "fast_extra:later"}
    rate_limit: {calls: 2, per_s: 3600}
"""
MAX_BODY = 4096
ALLOWED = "https://app.example"
TRACEPARENT = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
READER = {"Authorization": f"Bearer {READER_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
JSON_TYPE = {"Content-Type": "application/json"}


def _chunks(size: int) -> Iterator[bytes]:
    yield b'{"text": "'
    for _ in range(size // 1024):
        yield b"x" * 1024
    yield b'"}'


# (method, path, headers, body) — body: a JSON value (sent as JSON), bytes, or a chunk iterator's size (int).
REQUESTS: list[tuple[str, str, dict[str, str], Any]] = [
    ("POST", "/tools/sum/call", READER, {"a": 1, "b": 2}),
    ("POST", "/tools/sum/call", ADMIN | JSON_TYPE, b'{"a": 1.5, "b": 2}'),
    ("POST", "/tools/sum/call", READER, {"a": 1}),  # an argument error: a 200 result
    ("POST", "/tools/sum/call", READER, {"a": "x", "b": 2}),
    ("POST", "/tools/sum/call", READER, [1, 2]),
    ("POST", "/tools/sum/call", READER, b'"{\\"a\\": 1, \\"b\\": 2}"'),  # a string holding the object
    ("POST", "/tools/square_root/call", READER, b"4"),  # a bare value for a one-parameter tool
    ("POST", "/tools/square_root/call", READER, {"x": -1}),  # the tool refuses
    ("POST", "/tools/fails/call", READER, {}),  # the tool raises
    ("POST", "/tools/later/call", READER, {"text": "héllo ✓"}),  # an async tool
    ("POST", "/tools/later/call", READER, {"text": 5}),
    ("POST", "/tools/odd/call", ADMIN, {"kind": "big"}),
    ("POST", "/tools/odd/call", ADMIN, {"kind": "small"}),
    ("POST", "/tools/odd/call", ADMIN, {"kind": "int"}),
    ("POST", "/tools/odd/call", ADMIN, {"kind": "text"}),
    ("POST", "/tools/odd/call", ADMIN, {"kind": "surrogate"}),
    ("POST", "/tools/odd/call", ADMIN, {"kind": "nested"}),
    ("POST", "/tools/odd/call", READER, {"kind": "big"}),  # outside the key's toolsets: unknown to it
    ("POST", "/tools/summ/call", READER, {"a": 1, "b": 2}),  # unknown, with a close match
    ("POST", "/tools/%E2%9C%93/call", READER, {}),
    ("POST", "/tools/sum/call%0A", READER, {"a": 1, "b": 2}),  # the route's pattern ends with $
    ("POST", "/tools/sum/call/", READER, {"a": 1, "b": 2}),  # a redirect, from the router
    ("POST", "/tools/sum/calls", READER, {"a": 1, "b": 2}),
    ("GET", "/tools/sum/call", READER, None),  # 405
    ("PUT", "/tools/sum/call", READER, {"a": 1, "b": 2}),
    ("POST", "/tools/sum/call", {}, {"a": 1, "b": 2}),  # no key
    ("POST", "/tools/sum/call", {"Authorization": "Bearer wrong"}, {"a": 1, "b": 2}),
    ("POST", "/tools/sum/call", {"Authorization": f"Basic {READER_KEY}"}, {"a": 1, "b": 2}),
    ("POST", "/tools/sum/call", {"Authorization": "Bearer"}, {"a": 1, "b": 2}),
    ("POST", "/tools/sum/call", READER, b""),  # no arguments
    ("POST", "/tools/sum/call", READER, b"  \n"),
    ("POST", "/tools/sum/call", READER, b'{"a": 1, "b": '),  # not JSON
    ("POST", "/tools/sum/call", READER, b'{"a": 1, "a": 2, "b": 3}'),  # a duplicate key
    ("POST", "/tools/sum/call", READER, b'{"a": NaN, "b": 1}'),
    ("POST", "/tools/later/call", READER, b'{"text": "\\ud800"}'),  # a lone surrogate escape
    ("POST", "/tools/later/call", READER, b'{"text": "\xff"}'),  # not UTF-8
    ("POST", "/tools/later/call", READER, b"[" * 100_000),  # over the limit (413)
    ("POST", "/tools/later/call", READER, b"[" * 3000 + b"]" * 3000),  # too deep for the C parser? no: 400 or ok
    ("POST", "/tools/later/call", READER, MAX_BODY + 2048),  # chunked, over the limit while reading
    ("POST", "/tools/later/call", READER, 2048),  # chunked, within it
    ("POST", "/tools/later/call", READER | {"Content-Type": "text/plain"}, {"text": "a"}),
    ("POST", "/tools/later/call", READER | {"X-User": "mallory", "X-Conversation-Id": "c-1", "traceparent": TRACEPARENT,
                                            "X-Gateway-Session": "tab-1"}, {"text": "a"}),
    ("POST", "/tools/later/call", ADMIN | {"X-User": "ann", "X-Conversation-Id": "c-2"}, {"text": "a"}),
    ("POST", "/tools/later/call", READER | {"Origin": "https://evil.example"}, {"text": "a"}),  # refused
    ("POST", "/tools/later/call", READER | {"Origin": ALLOWED}, {"text": "a"}),  # CORS answers
    ("POST", "/tools/limited/call", ADMIN, {"text": "a"}),
    ("POST", "/tools/limited/call", ADMIN, {"text": "b"}),
    ("POST", "/tools/limited/call", ADMIN, {"text": "c"}),  # 429
]
# Headers sent twice: the first of each counts, on both paths.
TWICE = [("Authorization", f"Bearer {READER_KEY}"), ("Authorization", "Bearer wrong"), ("X-User", "a"),
         ("X-User", "b"), ("X-Conversation-Id", "c-1"), ("X-Conversation-Id", "c-2"), ("traceparent", TRACEPARENT),
         ("traceparent", "00-bad")]


class Recorder(Observer):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def end(self, activity: Any) -> None:
        self.seen.append((activity.kind, getattr(activity, "tool", None), getattr(activity, "surface", None),
                          getattr(activity, "caller", None), getattr(activity, "user", None), activity.outcome,
                          getattr(activity, "traceparent", None), getattr(activity, "conversation_id", None),
                          getattr(activity, "side", None), repr(getattr(activity, "arguments", None))))

    def event(self, event: Event) -> None:
        self.seen.append((event.kind, event.data))


def _send(client: httpx.Client, method: str, path: str, headers: dict[str, str], body: Any) -> httpx.Response:
    if isinstance(body, int):
        return client.request(method, path, headers=headers, content=_chunks(body))
    if isinstance(body, bytes):
        return client.request(method, path, headers=headers, content=body)
    return client.request(method, path, headers=headers, json=body)


def _answer(response: httpx.Response, replica: str) -> tuple[int, list[tuple[str, str]], str]:
    """Status, every header but the date (the replica's id and the server's port as placeholders), the body (call
    ids as one)."""
    port = f":{response.request.url.port}/"
    headers = [(name, "<replica>" if value == replica else value.replace(port, ":<port>/"))
               for name, value in response.headers.multi_items() if name != "date"]
    return response.status_code, headers, re.sub(r"ref [0-9a-f]+", "ref <id>", response.text)


def _served_answers(start_server, root, fast: bool, monkeypatch, taken: list[str], **settings) -> tuple[list, list]:
    monkeypatch.setattr(rest_fast, "ENABLED", fast)
    served = start_server(root, max_body_bytes=MAX_BODY, allowed_origins=[ALLOWED], **settings)
    recorder = Recorder()
    served.gateway.events.subscribe(recorder)
    replica = httpx.get(f"{served.url}/healthz").headers["x-gateway-replica"]
    answers = []
    with httpx.Client(base_url=served.url, timeout=30) as client:
        for method, path, headers, body in REQUESTS:
            before = len(taken)
            answers.append((path, _answer(_send(client, method, path, headers, body), replica), len(taken) > before))
        twice = httpx.Headers(TWICE)
        answers.append(("twice", _answer(client.post("/tools/sum/call", headers=twice, content=b'{"a":1,"b":2}'),
                                         replica), None))
        for host in ("localhost:1", "example.com"):  # 421 for a name that is not loopback while auth is off
            answers.append((host, _answer(client.post("/tools/sum/call", headers=READER | {"Host": host},
                                                      json={"a": 1, "b": 2}), replica), None))
    return answers, recorder.seen


@pytest.fixture
def root(shared_examples, tmp_path):
    root = tmp_path / "tool-definitions"
    shutil.copytree(shared_examples, root)
    (root / "python" / "fast_extra.py").write_text(EXTRA_PY)
    (root / "fast-extra.yaml").write_text(EXTRA_YAML)
    return root


@pytest.fixture
def taken(monkeypatch) -> list[str]:
    """The paths the fast path answered from now on."""
    answered: list[str] = []
    fast = rest_fast.RestCalls.fast

    async def counting(self, scope, receive, send, added):
        async def sending(message):  # told before the client can read the answer and send its next request
            if message["type"] == "http.response.start":
                answered.append(scope["path"])
            await send(message)

        return await fast(self, scope, receive, sending, added)

    monkeypatch.setattr(rest_fast.RestCalls, "fast", counting)
    return answered


@pytest.mark.parametrize("auth", [True, False], ids=["auth on", "auth off"])
def test_fast_path_answers_as_the_route_does(start_server, root, monkeypatch, taken, auth):
    """Every request of the set (good calls, argument and tool errors, a raising tool, sync and async tools, odd
    results, unknown and forbidden tools, missing, wrong and twice-sent keys, bad, empty, huge and chunked bodies,
    context headers, refused Origins and Hosts, other methods and paths, a rate limit's 429) gets the same status,
    headers and body through the fast path as through the Starlette route, and tells the same events."""
    settings = {"api_keys": API_KEYS} if auth else {}
    fast, fast_events = _served_answers(start_server, root, True, monkeypatch, taken, **settings)
    took = list(taken)
    route, route_events = _served_answers(start_server, root, False, monkeypatch, taken, **settings)
    assert taken == took, "the fast path answered with its switch off"
    for (path, fast_answer, _), (_, route_answer, _) in zip(fast, route, strict=True):
        assert fast_answer == route_answer, path
    assert fast_events == route_events
    fast_paths = {path for path, _, took in fast if took}
    assert {"/tools/sum/call", "/tools/later/call", "/tools/fails/call", "/tools/limited/call"} <= fast_paths
    assert not {"/tools/sum/call/", "/tools/sum/calls"} & fast_paths
    assert not [took for (_, _, headers, _), (_, _, took) in zip(REQUESTS, fast, strict=False) if "Origin" in headers
                and took], "a browser's call is CORS's to answer"
    statuses = {answer[0] for _, answer, _ in fast}
    assert {200, 400, 404, 405, 413, 429, 403} <= statuses and (401 in statuses) == auth, statuses


def test_a_server_started_with_the_switch_off_serves_calls_by_the_route(start_server, root, monkeypatch, taken):
    """TOOL_GATEWAY_REST_FAST=0 (``ENABLED`` false) leaves every call to the Starlette route, which answers it."""
    monkeypatch.setattr(rest_fast, "ENABLED", False)
    served = start_server(root)
    answer = httpx.post(f"{served.url}/tools/sum/call", json={"a": 1, "b": 2})
    assert answer.json()["result"] == 3.0 and not taken
