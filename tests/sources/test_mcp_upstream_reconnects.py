"""Reconnects to an upstream MCP server, seen through the gateway: calls that land while the session is replaced
never meet a half-open client, and an upstream that drops every session is reconnected to with a floor and a cap,
not in a loop."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_upstreams import Upstream, gateway_serving, http_source, sources_yaml, until


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
    """The session is replaced over and over (as when a call finds it lost) while calls run on eight threads:
    a call that lands during a reconnect waits for the new session and gets its answer; none meets the client
    being closed (it failed as an internal error: the SDK's "Client must be used within an async context
    manager")."""
    weather = Upstream("mcpserver_http.py", args).start()
    try:
        with gateway_serving(definitions(tmp_path, weather.url)) as served:
            pool = served.gateway.mcp_pool
            until(lambda: any(c.state == "up" for c in pool.connections()), "the upstream to connect")
            connection = next(c for c in pool.connections() if c.state == "up")
            done = threading.Event()

            def replace() -> None:  # what a call that finds the session lost does
                if connection._client is not None:
                    connection._lost(connection._client, MCPError(CONNECTION_CLOSED, "Connection closed"))

            def churn() -> int:
                count = 0
                while not done.is_set() and count < 200:
                    pool._loop.call_soon_threadsafe(replace)
                    count += 1
                    done.wait(0.02)
                return count

            def call(n: int) -> dict:
                return httpx.post(f"{served.url}/tools/echo/call", json={"text": f"call {n}"}, timeout=60).json()

            with ThreadPoolExecutor(9) as threads:
                replaced = threads.submit(churn)
                answers = list(threads.map(call, range(120)))
                done.set()
                assert replaced.result() > 5  # the session was replaced while the calls ran
            # A call in flight on a 2025-11-25 session when it is closed is ended by the upstream (the session's
            # DELETE): it may have run, so it is not sent again, and it says so.
            for n, answer in enumerate(answers):
                assert answer["text"] == f"call {n}" or answer["is_error"] and (
                    "MCP server 'weather'" in answer["text"] and ("is reconnecting" in answer["text"] or
                                                                 "closed the connection during" in answer["text"])
                ), answer
            assert sum(not a["is_error"] for a in answers) > len(answers) // 2
    finally:
        weather.kill()
