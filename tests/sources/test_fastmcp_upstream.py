"""A FastMCP 4 upstream (the ``fastmcp`` package, the most used Python MCP framework) in its four HTTP modes: it
declares ``tools.listChanged: false`` and answers neither ``subscriptions/listen`` nor ``ping`` on 2026-07-28. The
gateway once listened anyway, took the refusal for a lost session and reconnected twice a second, forever, while
calls failed as "unreachable" (issue 24). What the upstream declared now decides what the session opens."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from mcp_upstreams import Upstream, gateway_serving, http_source, sources_yaml, upstream

from gateway.upstream.mcp import watch as mcp_watch

MODES = {"stateful-sse": (), "stateful-json": ("--json",), "stateless-sse": ("--stateless",),
         "stateless-json": ("--stateless", "--json")}


@pytest.fixture(params=list(MODES), ids=list(MODES))
def fastmcp(request: pytest.FixtureRequest) -> Iterator[Upstream]:
    with upstream("fastmcp_http.py", *MODES[request.param]) as running:
        yield running


@pytest.fixture(autouse=True)
def quick_checks(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ping every 0.2 s (and a listing every 0.6 s: the sources' relist_s), so that a few seconds of idling show
    the cadence."""
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(mcp_watch, "PING_INTERVAL_S", 0.2)


def test_a_fastmcp_upstream_is_called_and_idles_on_its_keep_alive_only(tmp_path, fastmcp):
    """Every call succeeds, through one session; idle, the upstream is sent pings or listings (its keep-alive),
    never another initialize nor a second refused listen."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "up.yaml").write_text(sources_yaml(http_source("fm", fastmcp.url, ", relist_s: 0.6")))
    with gateway_serving(root) as served, httpx.Client(base_url=served.url, timeout=30) as http:
        answers = [http.post("/tools/add/call", json={"a": n, "b": 1}).json() for n in range(20)]
        said = http.post("/tools/hello/call", json={"name": "fm"}).json()
        connection = served.gateway.mcp_pool.connections()[0]
        connected_at = connection.connected_at
        before = len(httpx.get(fastmcp.url.replace("/mcp", "/methods")).json())
        time.sleep(3)  # idle: what the gateway sends now is its keep-alive alone
        idle = httpx.get(fastmcp.url.replace("/mcp", "/methods")).json()[before:]
        assert connection.connected_at == connected_at and connection.state == "up"
    assert [a["is_error"] for a in answers] == [False] * 20 and [a["text"] for a in answers] == [
        str(n + 1) for n in range(20)]
    assert said["text"] == "hello fm\n"  # the upstream's own text, not a dump of its structured result
    assert idle and set(idle) <= {"ping", "tools/list"}, idle
    print(f"idle for 3 s (ping every 0.2 s, listing every 0.6 s): {len(idle)} requests, {sorted(set(idle))}")
