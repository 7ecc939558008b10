"""The gateway's own ``tools/call`` post to a streamable-HTTP upstream (``gateway.upstream.mcp.fastcall``) against the SDK's
client call (``fastcall.ENABLED`` off, as ``TOOL_GATEWAY_MCP_UPSTREAM_FAST=0`` does): the same upstream tools,
called through one gateway both ways, answer the same, on the MCPServer (FastMCP) and the low-level upstreams,
answering with JSON bodies and with SSE streams, on both protocol revisions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_upstreams import Upstream, gateway_serving, http_source, sources_yaml, until

from gateway.upstream.mcp import fastcall as mcp_fastcall

VARIANTS = Path(__file__).resolve().parent / "upstream_variants.py"
MCPSERVER_CASES = [("echo", {"text": "héllo"}), ("add", {"a": 2, "b": 40}), ("fail", {"message": "boom"}),
                   ("chatty", {}), ("ask", {}), ("mismatched", {})]
LOWLEVEL_CASES = [("shout", {"text": "quiet"}), ("divide", {"a": 1, "b": 4}), ("divide", {"a": 1, "b": 0}),
                  ("picture", {})]
UPSTREAMS = [("mcpserver_http.py",), ("mcpserver_http.py", "--legacy"), ("mcpserver_http.py", "--sse"),
             ("mcpserver_http.py", "--sse", "--legacy"), ("lowlevel_http.py",), ("lowlevel_http.py", "--sse")]


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module", params=UPSTREAMS, ids=lambda p: " ".join(p).replace("_http.py", ""))
def variant(request: pytest.FixtureRequest) -> Iterator[Upstream]:
    running = Upstream(str(VARIANTS), request.param).start()  # argv: PORT FIXTURE [flags]
    try:
        yield running
    finally:
        running.kill()


def served_calls(tmp_path: Path, url: str, **settings):
    root = tmp_path / "defs"
    root.mkdir(exist_ok=True)
    (root / "upstreams.yaml").write_text(sources_yaml(http_source("up", url)))
    return gateway_serving(root, **settings)


def both_ways(monkeypatch: pytest.MonkeyPatch, make_call) -> tuple[object, object]:
    """``make_call()`` with the fast path, then with the SDK's call."""
    answers = []
    for fast in (True, False):
        monkeypatch.setattr(mcp_fastcall, "ENABLED", fast)
        answers.append(make_call())
    return answers[0], answers[1]


def rest_call(url: str, tool: str, arguments: dict) -> dict:
    response = httpx.post(f"{url}/tools/{tool}/call", json=arguments, timeout=60)
    assert response.status_code == 200, response.text
    return {key: value for key, value in response.json().items() if key in ("result", "text", "is_error", "error")}


def on_loop(served, coroutine):
    """Run ``coroutine`` on the gateway's loop (where its pooled sessions live) and return its outcome."""
    connection = next(c for c in served.gateway.mcp_pool.connections() if c.state == "up")
    loop = connection.pool.bind.__self__._loop
    return asyncio.run_coroutine_threadsafe(coroutine(connection), loop).result(60)


@pytest.mark.parametrize("wire", ["h11", "httpx2"])
def test_every_result_kind_is_the_same_through_the_fast_path_and_the_sdk(tmp_path, monkeypatch, variant, wire):
    """Text, structured content, isError, images, logs and progress before the answer, a server→client request in
    the stream and structured content its output schema refuses: the same answer either way, whether the fast
    path posts on its own connections (plain http) or through httpx2 (as for https or a proxy)."""
    if wire == "httpx2":
        monkeypatch.setattr(mcp_fastcall, "usable", lambda url: False)
    cases = MCPSERVER_CASES if "mcpserver" in variant.args[0] else LOWLEVEL_CASES
    with served_calls(tmp_path, variant.url) as served:
        answers = []
        for tool, arguments in cases:
            fast, sdk = both_ways(monkeypatch, lambda t=tool, a=arguments: rest_call(served.url, t, a))
            assert fast == sdk, (tool, fast, sdk)
            answers.append(fast)
        assert {answer["is_error"] for answer in answers} == {True, False}, answers


def test_a_json_rpc_error_is_the_same_error_through_the_fast_path_and_the_sdk(tmp_path, monkeypatch, variant):
    """A tool the upstream does not have is the same JSON-RPC error (code and message) either way, and the session
    keeps serving after it."""

    async def unknown(connection):
        try:
            await connection.call_tool("no_such_tool", {})
        except MCPError as exc:
            return exc.error.code, exc.error.message
        return None

    with served_calls(tmp_path, variant.url) as served:
        tool, arguments = (MCPSERVER_CASES if "mcpserver" in variant.args[0] else LOWLEVEL_CASES)[0]
        rest_call(served.url, tool, arguments)  # the pooled session is up
        fast, sdk = both_ways(monkeypatch, lambda: on_loop(served, unknown))
        assert fast == sdk, (fast, sdk)
        assert not rest_call(served.url, tool, arguments)["is_error"]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "sdk"])
def test_a_call_past_its_deadline_is_cancelled_upstream(tmp_path, monkeypatch, variant, fast):
    """A call cut by the tool's timeout is an error result, and the upstream hears that it was cancelled (a
    2025-11-25 session is sent notifications/cancelled; on 2026-07-28 the answer's stream is closed), either way."""
    if "mcpserver" not in variant.args[0]:
        pytest.skip("the low-level upstream has no slow tool")
    if variant.args[1:] == ():
        pytest.skip("the SDK's server keeps running a 2026-07-28 call answered in JSON when its connection closes")
    monkeypatch.setattr(mcp_fastcall, "ENABLED", fast)
    with served_calls(tmp_path, variant.url, default_timeout_s=1) as served:
        before = int(rest_call(served.url, "cancelled", {})["result"])
        cut = rest_call(served.url, "nap", {"seconds": 20})
        assert cut["is_error"], cut
        until(lambda: int(rest_call(served.url, "cancelled", {})["result"]) > before,
              "the upstream to hear of the cancellation")


def test_a_kept_alive_connection_the_upstream_closed_is_not_reused(tmp_path, monkeypatch):
    """The upstream closes a connection idle past its keep-alive (uvicorn: 5 s): the next call opens a new one and
    succeeds, it is not an error."""
    monkeypatch.setattr(mcp_fastcall, "ENABLED", True)
    running = Upstream(str(VARIANTS), ("mcpserver_http.py", "--legacy")).start()
    try:
        with served_calls(tmp_path, running.url) as served:
            assert rest_call(served.url, "echo", {"text": "a"})["result"] == "a"
            time.sleep(6)  # past uvicorn's keep-alive: the upstream closes our idle connection
            answer = rest_call(served.url, "echo", {"text": "b"})
            assert not answer["is_error"] and answer["result"] == "b", answer
    finally:
        running.kill()


def test_a_call_on_a_kept_alive_connection_to_an_upstream_killed_since_is_sent_again(tmp_path, monkeypatch):
    """The upstream is killed and started again between two calls, and the second call comes before the gateway's
    loop has read the end of the kept-alive connection (a loaded machine): that connection was dead before the call
    was written, so the call never ran; it goes on a new connection, finds its session forgotten and is sent again
    on a new one, as after any restart, rather than failing as if the upstream had died during it."""
    monkeypatch.setattr(mcp_fastcall, "ENABLED", True)
    running = Upstream(str(VARIANTS), ("mcpserver_http.py", "--legacy")).start()
    try:
        with served_calls(tmp_path, running.url) as served:
            assert rest_call(served.url, "echo", {"text": "a"})["result"] == "a"

            async def restarted_then_called(connection):
                running.kill()  # blocking the loop throughout: it reads nothing of the connection's end
                running.start()
                return await connection.call_tool("echo", {"text": "b"})

            result = on_loop(served, restarted_then_called)
            assert not result.is_error and result.content[0].text == "b", result
    finally:
        running.kill()


async def test_concurrent_calls_each_get_their_own_answer(tmp_path, monkeypatch, variant):
    """Forty calls at once through the fast path (more connections than are kept idle) each get the answer to their
    own arguments."""
    monkeypatch.setattr(mcp_fastcall, "ENABLED", True)
    tool, key = ("echo", "text") if "mcpserver" in variant.args[0] else ("shout", "text")
    with served_calls(tmp_path, variant.url) as served:
        async with httpx.AsyncClient(timeout=60) as http:
            answers = await asyncio.gather(*(http.post(f"{served.url}/tools/{tool}/call", json={key: f"call {i}"})
                                             for i in range(40)))
    texts = [answer.json()["text"] for answer in answers]
    assert texts == [f"call {i}" if tool == "echo" else f"CALL {i}" for i in range(40)], texts


def test_an_upstream_dying_during_a_call_is_an_error_result_naming_it(tmp_path, monkeypatch):
    """The upstream process dies while a call waits for its answer (the connection closes with no answer): the call
    is an error result naming the upstream, and the next call, once it is back, succeeds."""
    monkeypatch.setattr(mcp_fastcall, "ENABLED", True)
    running = Upstream(str(VARIANTS), ("mcpserver_http.py", "--legacy")).start()
    try:
        with served_calls(tmp_path, running.url, default_timeout_s=60) as served, ThreadPoolExecutor(1) as pool:
            assert rest_call(served.url, "echo", {"text": "a"})["result"] == "a"
            pending = pool.submit(rest_call, served.url, "nap", {"seconds": 30})
            time.sleep(1)  # the call is on its way (were it not, it would fail naming the upstream all the same)
            running.kill()
            answer = pending.result(60)
            assert answer["is_error"] and "MCP server 'up'" in answer["text"], answer
            running.start()
            healed = until(lambda: not (r := rest_call(served.url, "echo", {"text": "b"}))["is_error"] and r,
                           "a call to succeed after the restart")
            assert healed["result"] == "b"
    finally:
        running.kill()


def test_cookies_the_upstream_set_are_sent_with_fast_path_calls(tmp_path, monkeypatch):
    """An upstream behind a load balancer with cookie affinity (it refuses a session's request without its cookie):
    fast-path calls carry the cookie the session's HTTP client holds, as the SDK's requests do, and succeed."""
    monkeypatch.setattr(mcp_fastcall, "ENABLED", True)
    running = Upstream(str(VARIANTS), ("mcpserver_http.py", "--legacy", "--affinity")).start()
    try:
        with served_calls(tmp_path, running.url) as served:
            answer = rest_call(served.url, "echo", {"text": "sticky"})
            assert not answer["is_error"] and answer["result"] == "sticky", answer
    finally:
        running.kill()
