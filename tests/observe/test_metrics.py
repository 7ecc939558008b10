"""``GET /metrics``: known traffic through a real server is counted exactly, series by series, and only callers
allowed to scrape may read it."""

from __future__ import annotations

import asyncio
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from fake_llm import FakeLLM, Reply, openai_provider
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from support import CONSOLE, free_port, running, serving
from websockets.asyncio.client import connect

from gateway.events import Observer
from gateway.settings import ApiKey, hash_key

MODULE = "metrics_test_tools"  # a name of its own: the module is shared by the process's import system
TOOLS_PY = '''
import asyncio


def add(a: float, b: float) -> float:
    return a + b


async def slow() -> str:
    await asyncio.sleep(30)
    return "never"
'''
READER_KEY, ADMIN_KEY, SCRAPER_KEY = "reader-key-for-tests", "admin-key-for-tests", "scraper-key-for-tests"
KEYS = (ApiKey("reader", hash_key(READER_KEY), toolsets=("math",)), ApiKey("admin", hash_key(ADMIN_KEY), admin=True),
        ApiKey("scraper", hash_key(SCRAPER_KEY), metrics=True))


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """A real HTTP service: /up answers 200, /down 503, /moved redirects to /up."""

    async def up(request: Request) -> Response:
        return JSONResponse({"up": True})

    async def down(request: Request) -> Response:
        return JSONResponse({"error": "maintenance"}, status_code=503)

    async def moved(request: Request) -> Response:
        return RedirectResponse("/up", status_code=307)

    app = Starlette(routes=[Route("/up", up), Route("/down", down), Route("/moved", moved)])
    with serving(app) as served:
        yield served.url


def _tool(tool_id: str, binding: dict, **extra: object) -> dict:
    return {"id": tool_id, "name": tool_id, "user_description": "u", "ai_description": "a", "binding": binding,
            **extra}


def _definitions(upstream: str, *extra_tools: str) -> str:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there: no answer
    tools = [
        _tool("add", {"python": f"{MODULE}:add"}, toolsets=["math"]),
        _tool("slow", {"python": f"{MODULE}:slow"}, timeout_s=0.3),
        *(_tool(name, {"http": {"method": "GET", "url": f"{base}/{name}"}})
          for name, base in (("up", upstream), ("down", upstream), ("moved", upstream), ("closed", closed))),
        *(_tool(name, {"python": f"{MODULE}:add"}) for name in extra_tools),
    ]
    return yaml.safe_dump({"tools": tools}, sort_keys=False)


@pytest.fixture
def definitions(write_definitions, upstream) -> Path:
    return write_definitions({f"python/{MODULE}.py": textwrap.dedent(TOOLS_PY), "tools.yaml": _definitions(upstream)})


def scrape(url: str, headers: dict[str, str] | None = None) -> dict[str, dict[frozenset, float]]:
    """The samples of /metrics by sample name, each a mapping of its labels (as a set of pairs) to its value."""
    response = httpx.get(f"{url}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    samples: dict[str, dict[frozenset, float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return samples


def series(samples: dict[str, dict[frozenset, float]], name: str, *labels: str) -> dict[tuple, float]:
    """The samples of ``name`` keyed by the values of ``labels``, in that order."""
    return {tuple(dict(key)[label] for label in labels): value for key, value in samples.get(name, {}).items()}


async def test_known_traffic_is_counted_exactly(definitions, upstream):
    """Successes, argument errors, a timeout, an upstream 503, a redirect, an unreachable upstream, calls over REST
    and MCP and two reloads appear in /metrics with exactly their counts; an unknown tool id adds no series."""
    with running(definitions) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            for _ in range(3):
                assert (await http.post("/tools/add/call", json={"a": 1, "b": 2})).json()["result"] == 3
            for _ in range(2):
                assert (await http.post("/tools/add/call", json={"a": "x", "b": 2})).json()["is_error"]
            assert "did not finish" in (await http.post("/tools/slow/call", json={})).json()["text"]
            for name, failed in (("up", False), ("down", True), ("moved", False), ("closed", True)):
                assert (await http.post(f"/tools/{name}/call", json={})).json()["is_error"] is failed, name
            assert (await http.post("/tools/no-such-tool/call", json={})).status_code == 404
        async with streamable_http_client(f"{served.url}/mcp") as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            assert (await session.call_tool("add", {"a": 2, "b": 2})).is_error is False

        first = scrape(served.url)
        version = served.gateway.catalog.version
        (definitions / "tools.yaml").write_text(_definitions(upstream, "extra"), encoding="utf-8")
        async with httpx.AsyncClient(base_url=served.url, timeout=30, auth=CONSOLE) as http:
            assert (await http.post("/admin/reload")).json()["changed"] is True
            (definitions / "broken.yaml").write_text("tools: [", encoding="utf-8")
            assert (await http.post("/admin/reload")).status_code == 422
        after = scrape(served.url)

    assert series(first, "tool_gateway_calls_total", "tool", "surface", "outcome") == {
        ("add", "rest", "ok"): 3, ("add", "rest", "invalid_arguments"): 2, ("add", "mcp", "ok"): 1,
        ("slow", "rest", "timeout"): 1, ("up", "rest", "ok"): 1, ("down", "rest", "error"): 1,
        ("moved", "rest", "ok"): 1, ("closed", "rest", "error"): 1,
    }
    assert series(first, "tool_gateway_call_duration_seconds_count", "tool") == {
        ("add",): 6, ("slow",): 1, ("up",): 1, ("down",): 1, ("moved",): 1, ("closed",): 1}
    assert series(first, "tool_gateway_calls_in_flight") == {(): 0}
    # Each request is counted: the redirect and the request it led to are two.
    assert series(first, "tool_gateway_upstream_responses_total", "tool", "status_class") == {
        ("up", "2xx"): 1, ("down", "5xx"): 1, ("moved", "3xx"): 1, ("moved", "2xx"): 1, ("closed", "error"): 1}
    assert not any(("tool", "no-such-tool") in key for samples in first.values() for key in samples)
    assert series(first, "tool_gateway_catalog_info", "version") == {(version,): 1}
    assert series(first, "tool_gateway_catalog_tools") == {(): 6}
    assert series(first, "tool_gateway_reloads_total", "outcome") == {}
    assert series(first, "tool_gateway_auth_failures_total", "surface", "reason") == {}

    assert series(after, "tool_gateway_reloads_total", "outcome") == {("ok",): 1, ("failed",): 1}
    assert series(after, "tool_gateway_reload_duration_seconds_count") == {(): 2}
    assert series(after, "tool_gateway_catalog_tools") == {(): 7}
    assert series(after, "tool_gateway_catalog_info", "version") == {(served.gateway.catalog.version,): 1}
    assert served.gateway.catalog.version != version


@pytest.fixture
def auth_served(definitions) -> Iterator[str]:
    with running(definitions, api_keys=KEYS) as served:
        yield served.url


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401), (bearer("not-a-key"), 401), (bearer(READER_KEY), 403), (bearer(SCRAPER_KEY), 200),
    (bearer(ADMIN_KEY), 200),
])
def test_with_auth_on_an_admin_or_metrics_key_may_scrape(auth_served, headers, status):
    """Behind API keys /metrics needs an admin key or a key with metrics: true; no key or a wrong one is 401 and
    any other key 403, in the gateway's JSON error shape."""
    response = httpx.get(f"{auth_served}/metrics", headers=headers)
    assert response.status_code == status, response.text
    if status != 200:
        assert response.json()["status"] == status


def test_refused_credentials_are_counted_by_surface_and_reason(auth_served):
    """Every refusal is an auth failure with its surface and reason: a missing key, a wrong key, a key without
    the right, on /metrics, REST and the admin reload."""
    for path, headers in (("/metrics", {}), ("/metrics", bearer("wrong")), ("/metrics", bearer(READER_KEY)),
                          ("/tools", {}), ("/tools", {}), ("/tools", bearer("wrong"))):
        assert httpx.get(f"{auth_served}{path}", headers=headers).status_code in (401, 403)
    assert httpx.post(f"{auth_served}/admin/reload", headers=bearer(READER_KEY)).status_code == 403
    samples = scrape(auth_served, bearer(SCRAPER_KEY))
    assert series(samples, "tool_gateway_auth_failures_total", "surface", "reason") == {
        ("metrics", "missing"): 1, ("metrics", "invalid"): 1, ("metrics", "forbidden"): 1,
        ("rest", "missing"): 2, ("rest", "invalid"): 1, ("admin", "forbidden"): 1}


def test_refusals_on_mcp_and_chat_are_counted_too(auth_served):
    """The MCP and chat surfaces, which render their own errors, count their refusals like the others."""
    assert httpx.post(f"{auth_served}/mcp", json={}).status_code == 401
    assert httpx.post(f"{auth_served}/mcp", json={}, headers=bearer("wrong")).status_code == 401
    assert httpx.get(f"{auth_served}/v1/models").status_code == 401
    assert httpx.post(f"{auth_served}/v1/chat/completions", json={}, headers=bearer("wrong")).status_code == 401
    samples = scrape(auth_served, bearer(SCRAPER_KEY))
    assert series(samples, "tool_gateway_auth_failures_total", "surface", "reason") == {
        ("mcp", "missing"): 1, ("mcp", "invalid"): 1, ("chat", "missing"): 1, ("chat", "invalid"): 1}


def _outward_address() -> str | None:
    """An address of this machine other than loopback, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_with_auth_off_only_loopback_may_scrape(definitions):
    """Without API keys /metrics answers a loopback caller and refuses (403) one from another address."""
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    with running(definitions) as served:
        assert httpx.get(f"{served.url}/metrics").status_code == 200
        # To the loopback address (so the DNS-rebinding guard lets it in) from the outward one.
        with httpx.Client(transport=httpx.HTTPTransport(local_address=address)) as http:
            refused = http.get(f"{served.url}/metrics")
    assert refused.status_code == 403 and refused.json()["status"] == 403


class FakeSlo(Observer):
    """Figures in the shape gateway.observe.slo gives them."""

    def figures(self) -> dict:
        return {"add": {"calls": 10, "errors": 1, "p50_ms": 20.0, "p95_ms": 250.0, "error_rate": 0.1,
                        "slo": {"p95_ms": 200}, "holds": False},
                "slow": {"calls": 0, "errors": 0, "p50_ms": None, "p95_ms": None, "error_rate": None, "slo": None,
                         "holds": None}}


def test_slo_figures_are_read_from_the_slo_observer_at_scrape_time(definitions):
    """With an slo observer attached, each tool's p50/p95 (in seconds), error rate and whether its SLO holds are
    gauges; tools without figures or without an slo have no sample; without the observer there are none."""
    with running(definitions) as served:
        before = scrape(served.url)
        served.gateway.observers["slo"] = FakeSlo()
        samples = scrape(served.url)
    assert series(before, "tool_gateway_tool_p95_seconds", "tool") == {}
    assert series(samples, "tool_gateway_tool_p50_seconds", "tool") == {("add",): 0.02}
    assert series(samples, "tool_gateway_tool_p95_seconds", "tool") == {("add",): 0.25}
    assert series(samples, "tool_gateway_tool_error_rate", "tool") == {("add",): 0.1}
    assert series(samples, "tool_gateway_tool_slo_holds", "tool") == {("add",): 0}


def test_a_chat_turn_counts_its_llm_requests_tokens_rounds_and_tool_calls(definitions, monkeypatch):
    """A chat turn that calls a tool, then answers: two LLM requests by provider with their tokens, one turn of
    two rounds, and the tool call under the chat surface."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-metrics")
    llm = FakeLLM()
    llm_app = llm.openai_app()
    with serving(llm_app) as llm_server:
        llm.url = llm_server.url
        llm.answer(Reply(tool_calls=[("c1", "add", {"a": 1, "b": 2})]), Reply(content="It is 3."))
        with running(definitions, providers={"scripted": openai_provider(llm)}) as served:
            answer = httpx.post(f"{served.url}/v1/chat/completions", timeout=30,
                                json={"messages": [{"role": "user", "content": "1 + 2?"}]})
            assert answer.status_code == 200, answer.text
            samples = scrape(served.url)
    assert series(samples, "tool_gateway_llm_requests_total", "provider", "outcome") == {("scripted", "ok"): 2}
    assert series(samples, "tool_gateway_llm_request_duration_seconds_count", "provider") == {("scripted",): 2}
    # The scripted LLM reports 10 prompt and 5 completion tokens per answer.
    assert series(samples, "tool_gateway_llm_tokens_total", "provider", "type") == {
        ("scripted", "input"): 20, ("scripted", "output"): 10}
    assert series(samples, "tool_gateway_chat_rounds_count", "provider") == {("scripted",): 1}
    assert series(samples, "tool_gateway_chat_rounds_sum", "provider") == {("scripted",): 2}
    assert series(samples, "tool_gateway_calls_total", "tool", "surface", "outcome") == {("add", "chat", "ok"): 1}


async def test_bridge_sessions_are_a_gauge(definitions):
    """A page connecting to the bridge raises the sessions gauge, and its leaving lowers it again."""
    with running(definitions) as served:
        ws = served.url.replace("http://", "ws://") + "/client/bridge"
        async with connect(ws) as page:
            await page.recv()  # the session frame: the session is open
            opened = scrape(served.url)
        for _ in range(200):  # the server sees the page leave a moment after the client closed
            closed = scrape(served.url)
            if series(closed, "tool_gateway_bridge_sessions") == {(): 0}:
                break
            await asyncio.sleep(0.05)
    assert series(opened, "tool_gateway_bridge_sessions") == {(): 1}
    assert series(closed, "tool_gateway_bridge_sessions") == {(): 0}


def test_a_tool_a_reload_removes_leaves_the_metrics_with_its_series(definitions, upstream):
    """Once a reload removes a tool, its call, duration and upstream series are gone from /metrics (a catalog that
    renames tools over months never grows the scrape without bound); the tools still served keep theirs."""
    (definitions / "tools.yaml").write_text(_definitions(upstream, "extra"), encoding="utf-8")
    with running(definitions) as served, httpx.Client(base_url=served.url, timeout=30, auth=CONSOLE) as http:
        for name, arguments in (("add", {"a": 1, "b": 2}), ("extra", {"a": 1, "b": 2}), ("up", {})):
            assert not http.post(f"/tools/{name}/call", json=arguments).json()["is_error"], name
        before = scrape(served.url)
        tools = yaml.safe_load(_definitions(upstream))["tools"]
        kept = yaml.safe_dump({"tools": [t for t in tools if t["id"] != "up"]}, sort_keys=False)
        (definitions / "tools.yaml").write_text(kept, encoding="utf-8")
        assert http.post("/admin/reload").json()["changed"] is True
        after = scrape(served.url)
    assert {key[0] for key in series(before, "tool_gateway_calls_total", "tool", "surface", "outcome")} == {
        "add", "extra", "up"}
    assert series(after, "tool_gateway_calls_total", "tool", "surface", "outcome") == {("add", "rest", "ok"): 1}
    assert series(after, "tool_gateway_call_duration_seconds_count", "tool") == {("add",): 1}
    assert series(after, "tool_gateway_upstream_responses_total", "tool", "status_class") == {}
