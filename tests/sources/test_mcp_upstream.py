"""``sources: [{mcp: ...}]``: tools of real upstream MCP servers (the SDK's high-level MCPServer — FastMCP — and its
low-level Server over streamable HTTP, and a stdio server) listed and called through the gateway's REST and MCP
surfaces, their results passed through."""

from __future__ import annotations

import gc
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp_upstreams import STDIO_SERVER, Upstream, alive, gateway_serving, http_source, sources_yaml, until, upstream
from support import CONSOLE, serving

from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

TOKEN = "upstream-token-4f9a2c"


@pytest.fixture(scope="module")
def weather() -> Iterator[Upstream]:
    """The MCPServer (FastMCP) upstream, expecting our bearer token."""
    with upstream("mcpserver_http.py", EXPECTED_TOKEN=TOKEN) as running:
        yield running


@pytest.fixture(scope="module")
def calculator() -> Iterator[Upstream]:
    """The low-level Server upstream."""
    with upstream("lowlevel_http.py") as running:
        yield running


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("UPSTREAM_TOKEN", TOKEN)
    monkeypatch.setenv("GREETING_SECRET", "hello-from-a-secret")


@pytest.fixture
def defs(tmp_path: Path, weather: Upstream, calculator: Upstream) -> Path:
    root = tmp_path / "defs"
    root.mkdir()
    (root / "upstreams.yaml").write_text(sources_yaml(
        http_source("weather", weather.url, ", headers: {Authorization: 'Bearer {{ secrets.UPSTREAM_TOKEN }}'}")
        + "    prefix: w_\n",
        http_source("calc", calculator.url),
    ))
    return root


def call(url: str, tool: str, arguments: dict) -> dict:
    response = httpx.post(f"{url}/tools/{tool}/call", json=arguments, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


async def test_upstream_tools_are_listed_on_rest_and_mcp(defs):
    """Both HTTP upstreams' tools are served under their ids (prefix applied), with the upstream's title, description,
    schemas and annotation hints, on GET /tools and MCP tools/list."""
    with gateway_serving(defs) as served:
        async with httpx.AsyncClient() as http:
            listed = {tool["id"]: tool for tool in (await http.get(f"{served.url}/tools")).json()["tools"]}
        assert {"w_add", "w_echo", "w_fail", "w_grow", "shout", "divide", "picture"} <= set(listed)
        add = listed["w_add"]
        assert add["name"] == "Add numbers" and add["ai_description"] == "Add two integers."
        assert add["annotations"] == {"read_only": True, "idempotent": True}
        assert add["input_schema"]["required"] == ["a", "b"]
        assert listed["divide"]["output_schema"]["required"] == ["quotient"]
        assert listed["divide"]["annotations"] == {"read_only": True, "destructive": False}
        async with Client(f"{served.url}/mcp") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["w_add"].annotations.read_only_hint is True
        assert tools["divide"].output_schema["properties"] == {"quotient": {"type": "number"}}
        status = {source["id"]: source for source in served.gateway.catalog.sources}
        assert status["weather"]["kind"] == "mcp" and status["weather"]["health"] == "ok"
        assert status["weather"]["tools"] == 5 and status["calc"]["tools"] == 3
        assert status["weather"]["last_refresh"] is not None and not status["weather"]["stale"]


async def test_results_pass_through_rest_and_mcp(defs):
    """Text, structured content (as our structured result), isError (an error result with the upstream's text) and
    images (a line saying what they are) come through REST and MCP as the upstream gave them."""
    with gateway_serving(defs) as served:
        assert call(served.url, "w_echo", {"text": "hi there"})["result"] == "hi there"
        assert call(served.url, "w_add", {"a": 2, "b": 40})["result"] == {"result": 42}
        assert call(served.url, "divide", {"a": 1, "b": 4})["result"] == {"quotient": 0.25}
        failed = call(served.url, "divide", {"a": 1, "b": 0})
        assert failed["is_error"] and failed["text"] == "cannot divide by zero"
        raised = call(served.url, "w_fail", {"message": "boom"})
        assert raised["is_error"] and "fail" in raised["text"]
        picture = call(served.url, "picture", {})["text"]
        assert picture.startswith("a pixel\n[image: image/png,")
        async with Client(f"{served.url}/mcp") as client:
            structured = await client.call_tool("divide", {"a": 9, "b": 3})
            assert structured.structured_content == {"quotient": 3.0} and not structured.is_error
            error = await client.call_tool("divide", {"a": 9, "b": 0})
            assert error.is_error and error.content[0].text == "cannot divide by zero"
            shouted = await client.call_tool("shout", {"text": "quiet"})
            assert shouted.content[0].text == "QUIET"


def test_secret_header_reaches_the_upstream_and_never_comes_back(defs, caplog):
    """The Authorization header's {{ secrets.UPSTREAM_TOKEN }} is sent (the upstream accepts it), and the upstream
    echoing it back shows the secret's name, not its value; no log line of the gateway holds the value."""
    caplog.set_level(logging.DEBUG)
    with gateway_serving(defs) as served:
        answer = call(served.url, "w_authorization", {})
        status = httpx.get(f"{served.url}/status").text
    assert answer["text"].startswith("authorized: Bearer ")
    assert TOKEN not in answer["text"] and "UPSTREAM_TOKEN" in answer["text"]
    assert TOKEN not in caplog.text and TOKEN not in status


def test_reload_keeps_the_session_and_a_changed_config_gets_a_new_one(defs):
    """A rebuild that leaves the source unchanged keeps its pooled session (no reconnect); a changed mcp mapping is a
    new session, which serves the calls from then on, and the old one, used by nothing, is closed."""
    with gateway_serving(defs) as served:
        pool = served.gateway.mcp_pool
        assert call(served.url, "w_echo", {"text": "a"})["result"] == "a"
        before = next(c for c in pool.connections() if c.config.source == "weather")
        connected_at = before.connected_at
        (defs / "more.yaml").write_text("tools:\n  - {id: more, name: More, user_description: More., ai_description: More.,"
                                        "\n     binding: {http: {url: 'http://127.0.0.1:9/x'}}}\n")
        assert reload(served)["changed"]
        assert call(served.url, "w_echo", {"text": "b"})["result"] == "b"
        assert before.state == "up" and before.connected_at == connected_at
        text = (defs / "upstreams.yaml").read_text()
        (defs / "upstreams.yaml").write_text(text.replace("connect_timeout_s: 3, headers", "connect_timeout_s: 4, headers"))
        assert reload(served)["ok"]
        assert call(served.url, "w_echo", {"text": "c"})["result"] == "c"
        used = [c for c in pool.connections() if c.config.source == "weather" and c.state == "up"]
        assert [c.config.connect_timeout_s for c in used if c is not before] == [4]
        # The old session is held by nothing now (its tools went with the old catalog): it is closed.
        until(lambda: gc.collect() >= 0 and before.state == "closed", "the unused session to be closed")
        assert before not in pool.connections()


def reload(served) -> dict:
    response = httpx.post(f"{served.url}/admin/reload", timeout=60, auth=CONSOLE)
    assert response.status_code == 200, response.text
    return response.json()


def test_stdio_upstream_is_spawned_with_its_env_and_stopped_with_the_gateway(tmp_path):
    """A stdio upstream is spawned with env values filled from secrets, serves calls through the pool, and its process
    is gone once the gateway stops (no orphan)."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "local.yaml").write_text(sources_yaml(
        f"  - id: local\n    mcp: {{command: '{sys.executable}', args: ['{STDIO_SERVER}'], "
        "env: {GREETING: '{{ secrets.GREETING_SECRET }}'}, connect_timeout_s: 20}\n"))
    with gateway_serving(root) as served:
        first = call(served.url, "whoami", {})
        second = call(served.url, "whoami", {})
        assert not first["is_error"], first
        pid = json.loads(first["text"])["pid"]
        assert json.loads(second["text"])["pid"] == pid  # one pooled session, one process
        assert "[secret GREETING_SECRET]" in first["text"]  # the value arrived, and is redacted on the way back
        assert alive(pid)
    until(lambda: not alive(pid), "the stdio upstream to be stopped", timeout=15)


def test_a_gateway_served_again_after_closing_calls_its_upstream_again(defs):
    """Closing the server closes the gateway's upstream sessions; serving the same gateway (and catalog) again opens
    new ones for its calls instead of failing on the closed ones."""
    gateway = Gateway(Settings(definitions=defs, reload=False))
    for text in ("first", "second"):
        with serving(create_app(gateway), lifespan="on") as server:
            answer = call(server.url, "w_echo", {"text": text})
            assert not answer["is_error"] and answer["result"] == text, answer
