"""Reconnects to an upstream MCP server, seen through the gateway: calls that land while the session is replaced
never meet a half-open client, a rebuild's listing that meets the upstream's crash is sent again on the next
session, and an upstream that drops every session is reconnected to with a floor and a cap, not in a loop."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_upstreams import SERVERS, STDIO_SERVER, Upstream, gateway_serving, http_source, sources_yaml, until
from support import CONSOLE

from gateway.upstream.mcp import watch as mcp_watch
from gateway.upstream.mcp.config import ListingBounds, UpstreamConfig


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


def definitions(tmp_path: Path, url: str, extra: str = "") -> Path:
    root = tmp_path / "defs"
    root.mkdir(exist_ok=True)
    (root / "upstreams.yaml").write_text(sources_yaml(http_source("weather", url, extra)))
    return root


@pytest.mark.parametrize("args", [(), ("--legacy",)], ids=["2026-07-28", "2025-11-25"])
def test_calls_during_reconnects_wait_for_the_new_session(tmp_path, args):
    """The session is replaced ten times (as when a call finds it lost) while calls run on eight threads: a call
    that lands during a reconnect waits for the new session and gets its answer, or says the upstream is
    reconnecting; none meets the client being closed (it failed as an internal error: the SDK's "Client must be
    used within an async context manager")."""
    weather = Upstream("mcpserver_http.py", args).start()
    try:
        root = definitions(tmp_path, weather.url, ", reconnect_floor_s: 0.05")
        with gateway_serving(root) as served:
            pool = served.gateway.mcp_pool
            until(lambda: any(c.state == "up" for c in pool.connections()), "the upstream to connect")
            connection = next(c for c in pool.connections() if c.state == "up")
            replaced = threading.Event()

            def replace() -> None:  # what a call that finds the session lost does
                if connection._client is not None:
                    connection._lost(connection._client, MCPError(CONNECTION_CLOSED, "Connection closed"))

            def churn() -> None:
                for _ in range(10):
                    until(lambda: connection.state == "up", "the new session")
                    replaced.wait(0.1)
                    pool._loop.call_soon_threadsafe(replace)
                replaced.set()

            def calls(thread: int) -> list[tuple[str, dict]]:
                answers = []
                while not replaced.is_set() and len(answers) < 2000:
                    text = f"call {thread}.{len(answers)}"
                    answers.append((text, httpx.post(f"{served.url}/tools/echo/call", json={"text": text},
                                                     timeout=60).json()))
                return answers

            with ThreadPoolExecutor(9) as threads:
                churned = threads.submit(churn)
                answers = [a for found in threads.map(calls, range(8)) for a in found]
                churned.result()
            # A call in flight on a 2025-11-25 session when it is closed is ended by the upstream (the session's
            # DELETE): it may have run, so it is not sent again, and it says so.
            for text, answer in answers:
                assert answer["text"] == text or answer["is_error"] and (
                    "MCP server 'weather'" in answer["text"] and ("is reconnecting" in answer["text"] or
                                                                 "closed the connection during" in answer["text"])
                ), answer
            assert sum(not a["is_error"] for _, a in answers) > len(answers) // 2
    finally:
        weather.kill()


@pytest.mark.parametrize("method", ["tools/list", "prompts/list"])
def test_a_rebuild_listing_an_upstream_that_crashes_under_it_lists_it_again_on_the_next_session(tmp_path, method):
    """A rebuild whose listing (of the tools, or of the prompts and resources) meets the stdio upstream's crash
    sends it once more on the session the gateway spawns next: the upstream stays served fresh. Before, the build
    served it as down, "Connection closed": its tools stale (none, had no copy been kept: calls found no such tool
    while the session was up again), its prompts and resources not served until some later rebuild (the federation
    matrix's stdio restarts met it: the rebuild a new session asks for listed on the session the test had killed)."""
    cue = tmp_path / "crash"
    root = tmp_path / "defs"
    root.mkdir()
    args = [str(SERVERS / "stdio_crash.py"), str(cue), method, "--", sys.executable, str(STDIO_SERVER)]
    (root / "local.yaml").write_text(sources_yaml(
        f"  - id: local\n    mcp: {{command: '{sys.executable}', args: {json.dumps(args)}, connect_timeout_s: 20}}\n"))
    with gateway_serving(root) as served:
        connection = served.gateway.mcp_pool.connections()[0]
        until(lambda: connection.state == "up" and "whoami" in served.gateway.catalog.tools, "the upstream's tools")
        first = connection.connected_at
        cue.touch()  # the next listing sent kills the upstream before it reads it
        assert httpx.post(f"{served.url}/admin/reload", timeout=60, auth=CONSOLE).status_code == 200
        assert not cue.exists(), "the rebuild sent no listing"
        (status,) = served.gateway.catalog.sources
        assert (status["health"], status["error"]) == ("ok", None), status
        assert not served.gateway.catalog.warnings, served.gateway.catalog.warnings
        assert connection.connected_at != first  # listed on the next session
        answer = httpx.post(f"{served.url}/tools/whoami/call", json={}, timeout=60).json()
        assert not answer["is_error"], answer


def test_an_upstream_that_drops_every_session_is_asked_at_most_once_per_floor(tmp_path):
    """An upstream (the TypeScript SDK's way) that accepts a session, lists its tools, then drops the session:
    called without pause for a window of seconds, the gateway asks it for a session at most once per
    reconnect_floor_s (and a few more); without a floor every call asked twice (it reconnected at once when the
    call found the session gone, and again when the resent call did), hundreds of times in the window. The calls
    fail, saying so (the upstream keeps dropping the session)."""
    dropping = Upstream("ts_sessions_http.py", ("--forget",)).start()
    base = dropping.url.rpartition("/mcp")[0]
    floor, window = 0.5, 3.0
    try:
        root = definitions(tmp_path, dropping.url, f", reconnect_floor_s: {floor}, reconnect_cap_s: 2")
        with gateway_serving(root) as served, httpx.Client(timeout=30) as client:
            until(lambda: "echo" in served.gateway.catalog.tools, "the upstream's tools")
            before = client.get(f"{base}/seen").json()
            calls, started = 0, time.monotonic()
            while time.monotonic() - started < window:
                answer = client.post(f"{served.url}/tools/echo/call", json={"text": "hi"}).json()
                assert answer["is_error"] or answer["text"] == "hi", answer
                calls += 1
            after = client.get(f"{base}/seen").json()
        sessions = after["initialize"] - before.get("initialize", 0)
        assert sessions <= window / floor + 3, (sessions, calls)
    finally:
        dropping.kill()


def test_an_idle_gateway_backs_off_from_an_upstream_whose_sessions_do_not_last(tmp_path, monkeypatch):
    """Idle (no call), each session the dropping upstream accepts is found lost by the next ping (every 0.1 s
    here): the gateway waits longer after each, floor 0.25 s doubling to the cap, 4 s (6 sessions in the window
    here). Before, a session that had been up reset the wait to its first step every time: a new session every
    few tenths of a second, forever (21 in the window with that rule and these settings)."""
    monkeypatch.setattr(mcp_watch, "PING_INTERVAL_S", 0.1)
    dropping = Upstream("ts_sessions_http.py", ("--forget",)).start()
    base = dropping.url.rpartition("/mcp")[0]
    window = 8.0
    try:
        root = definitions(tmp_path, dropping.url, ", reconnect_floor_s: 0.25, reconnect_cap_s: 4")
        with gateway_serving(root) as served, httpx.Client(timeout=30) as client:
            until(lambda: "echo" in served.gateway.catalog.tools, "the upstream's tools")
            before = client.get(f"{base}/seen").json()
            time.sleep(window)  # idle: what the upstream receives meanwhile is counted, not timed
            after = client.get(f"{base}/seen").json()
        sessions = after["initialize"] - before.get("initialize", 0)
        # 0.25 + 0.5 + 1 + 2 + 4 s of waits (each at least half its step) and the pings between them.
        assert sessions <= 8, sessions
    finally:
        dropping.kill()


def test_reconnect_waits_double_from_the_floor_to_the_cap_with_jitter():
    config = UpstreamConfig("up", ListingBounds(1, 1, 1), url="http://127.0.0.1:1/mcp", reconnect_floor_s=0.5,
                            reconnect_cap_s=30.0)
    for failures, longest in [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0), (50, 30.0), (10_000, 30.0)]:
        waits = [config.reconnect_delay(failures) for _ in range(200)]
        assert all(max(0.5, longest / 2) <= wait <= longest for wait in waits), (failures, min(waits), max(waits))
    assert len({config.reconnect_delay(7) for _ in range(20)}) > 1  # jitter: not all at once


@pytest.mark.parametrize(("keys", "said"), [
    ("reconnect_floor_s: 5, reconnect_cap_s: 1", "reconnect_floor_s (5) is longer than reconnect_cap_s (1)"),
    ("reconnect_floor_s: 0", "reconnect_floor_s"),
    ("reconnect_cap_s: 100000", "reconnect_cap_s"),
    ("relist_s: 0.1", "relist_s"),
])
def test_reconnect_settings_out_of_bounds_are_problems_at_their_place(tmp_path, keys, said):
    root = tmp_path / "defs"
    root.mkdir()
    (root / "upstreams.yaml").write_text(f"sources:\n  - id: weather\n    mcp: {{url: 'http://127.0.0.1:9/mcp', {keys}}}\n")
    done = subprocess.run([sys.executable, "-m", "gateway", "validate", str(root)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "upstreams.yaml:3:" in done.stderr and said in done.stderr, done.stderr
