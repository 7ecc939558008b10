"""The browser bridge across replicas (real Chromium, 3 replicas, Redis): a page connected to one replica answers
calls that entered through another, and a page whose replica died fails its calls at once with a clear error."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import httpx2
from cluster_support import API_KEY, Cluster
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import Page
from support import chromium


@asynccontextmanager
async def page_connected_to(url: str, *tools: str) -> AsyncIterator[tuple[Page, str]]:
    """A page opened at one replica (its demo page, same origin), the tools' scripts loaded, its bridge session
    open; the page and the session id. Each handler run is recorded in ``window.runs``."""
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(f"{url}/client/demo")
        await page.evaluate("""() => { window.runs = [];
            window.addEventListener("gatewaytools:executed", e => window.runs.push(e.detail)); }""")
        await page.evaluate("ids => GatewayTools.load(ids)", list(tools))
        session = await page.evaluate("GatewayTools.connect().then(s => { window.session = s; return s.id; })")
        yield page, session


async def rest_call(url: str, tool: str, arguments: dict, session: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=30,
                                 headers={"Authorization": f"Bearer {API_KEY}", "X-Gateway-Session": session}) as client:
        return await client.post(f"/tools/{tool}/call", json=arguments)


async def test_a_page_on_replica_a_answers_a_rest_call_that_entered_through_replica_b(cluster: Cluster):
    """A REST call sent to replica B directly, naming a session whose WebSocket is on replica A, runs the tool in
    that page and B answers with the page's value."""
    a, b = cluster.replicas[0], cluster.replicas[1]
    async with page_connected_to(a.url, "example-tool") as (page, session):
        response = await rest_call(b.url, "example-tool", {"exampleParam": "via B"}, session)
        runs = await page.evaluate("window.runs")

    assert response.status_code == 200, cluster.logs()
    assert response.json() == {"tool": "example-tool", "is_error": False, "result": "via B answered",
                               "text": "via B answered"}
    assert cluster.replica(response) == cluster.ids[b.port] != cluster.ids[a.port]
    assert [(r["tool"], r["via"]) for r in runs] == [("example-tool", "bridge")]


async def test_calls_through_the_balancer_reach_the_page_whichever_replica_takes_them(cluster: Cluster):
    """Six calls through nginx (round robin: every replica takes some) all run in the one page, on replica C."""
    c = cluster.replicas[2]
    async with page_connected_to(c.url, "example-tool") as (page, session):
        responses = [await rest_call(cluster.url, "example-tool", {"exampleParam": str(n)}, session)
                     for n in range(6)]
        runs = await page.evaluate("window.runs")

    assert [r.json()["result"] for r in responses] == [f"{n} answered" for n in range(6)]
    assert {cluster.replica(r) for r in responses} == set(cluster.ids.values())
    assert len(runs) == 6


async def test_an_mcp_call_through_another_replica_runs_in_the_page(cluster: Cluster):
    """An MCP tools/call sent to replica B with _meta["gateway/session"] naming a page on replica A runs there."""
    a, b = cluster.replicas[0], cluster.replicas[1]
    async with page_connected_to(a.url, "example-tool") as (page, session), \
            httpx2.AsyncClient(headers=cluster.headers(), timeout=30) as http, \
            streamable_http_client(f"{b.url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as mcp:
        await mcp.initialize()
        result = await mcp.call_tool("example-tool", {"exampleParam": "mcp"}, meta={"gateway/session": session})
        runs = await page.evaluate("window.runs")

    assert result.is_error is False
    assert [c.text for c in result.content] == ["mcp answered"]
    assert [r["via"] for r in runs] == ["bridge"]


async def test_the_bridge_survives_a_redis_restart(cluster: Cluster):
    """Redis stopped and started again while a page stays connected to A: without any restart of the gateways,
    calls through B reach the page again (A listens again and writes its session's record again)."""
    a, b = cluster.replicas[0], cluster.replicas[1]
    async with page_connected_to(a.url, "example-tool") as (_, session):
        cluster.redis.stop()
        during = await rest_call(b.url, "example-tool", {"exampleParam": "down"}, session)
        cluster.redis.start()
        with anyio.fail_after(30):  # a bound, not a timing assertion
            while (after := await rest_call(b.url, "example-tool", {"exampleParam": "back"}, session)).json()[
                    "is_error"]:
                await anyio.sleep(0.2)

    assert during.json()["is_error"] is True and "which replica holds it is unknown" in during.json()["error"]
    assert after.json()["result"] == "back answered"


async def test_a_call_to_a_page_whose_replica_was_killed_fails_at_once_with_a_clear_error(cluster: Cluster):
    """Replica A killed (SIGKILL) with a page connected: a call through B naming that page's session is an error
    result saying the session is not connected to any replica — at once (nobody hears A's channel) and still so
    once A's record has expired."""
    a, b = cluster.replicas[0], cluster.replicas[1]
    async with page_connected_to(a.url, "example-tool") as (_, session):
        a.kill()
        at_once = await rest_call(b.url, "example-tool", {"exampleParam": "x"}, session)
        cluster.wait_until(lambda: not _registered(cluster, session), what="the dead replica's session record expiring")
        later = await rest_call(b.url, "example-tool", {"exampleParam": "x"}, session)

    for response in (at_once, later):
        body = response.json()
        assert response.status_code == 200 and body["is_error"] is True
        assert "not connected to any replica" in body["error"]
        assert session not in body["error"]  # a session id is a secret: shown cut short


def _registered(cluster: Cluster, session: str) -> bool:
    """Whether Redis still holds the session's record (asked with redis-cli, as an operator would)."""
    done = subprocess.run(["redis-cli", "-p", str(cluster.redis.port), "EXISTS", f"tool-gateway:bridge:{session}"],
                          capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip() == "1"

