"""What one source may bring (``source_max_tools``, ``source_max_bytes``): an upstream MCP server or an OpenAPI
document past a bound is refused with a status naming the setting, never a stall, while every other tool answers;
and a listing within the bounds is parsed off the event loop, so other calls answer while it is."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from mcp_upstreams import Upstream, gateway_serving, http_source, sources_yaml, until, upstream
from support import CONSOLE, catalog_for, serving

from gateway.errors import DefinitionsInvalid
from gateway.settings import SettingsInvalid, load_settings
from gateway.upstream.mcp import listing as mcp_listing

LOCAL = ("tools:\n  - {id: local_echo, name: Echo, user_description: Echo., ai_description: Echo.,"
         " binding: {python: 'echo:echo'}}\n")


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


def definitions(tmp_path: Path, sources: str) -> Path:
    root = tmp_path / "defs"
    (root / "python").mkdir(parents=True)
    (root / "python" / "echo.py").write_text("def echo(text: str) -> str:\n    return text\n")
    (root / "tools.yaml").write_text(sources + LOCAL)
    return root


def echoed(url: str) -> str:
    answer = httpx.post(f"{url}/tools/local_echo/call", json={"text": "still here"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def source_status(served) -> dict:
    return {s["id"]: s for s in httpx.get(f"{served.url}/status", timeout=30).json()["sources"]}["many"]


def reload(served) -> None:
    assert httpx.post(f"{served.url}/admin/reload", timeout=60, auth=CONSOLE).status_code == 200


@pytest.mark.parametrize(("setting", "value"), [("source_max_tools", 250), ("source_max_bytes", 20_000)])
def test_an_upstream_past_a_bound_is_refused_naming_it_and_other_tools_answer(tmp_path, setting, value):
    """300 tools in pages of 100 (about 15 KB a page): past 250 tools, or an answer past 20,000 bytes, the source
    serves nothing, and its status and a warning name the setting and how to raise it: at start-up (a session of
    the build's own) and on a rebuild (the pooled session). The local tool answers throughout."""
    with upstream("many_tools_http.py", "300", "100") as many:
        root = definitions(tmp_path, sources_yaml(http_source("many", many.url)))
        with gateway_serving(root, **{setting: value}) as served:
            for rebuilt in (False, True):
                if rebuilt:
                    reload(served)
                status = source_status(served)
                assert status["tools"] == 0 and status["health"] == "down", status
                assert setting in status["error"] and f"{value:,}" in status["error"], status
                assert "raise it" in status["error"]
                warnings = [p.message for p in served.gateway.catalog.warnings]
                assert any(setting in message for message in warnings), warnings
                assert echoed(served.url) == "still here"


def test_an_upstream_that_grows_past_the_bound_serves_its_last_listing_within_it_stale(tmp_path):
    """Refused, a source serves the listing last read within the bounds (kept on disk), marked stale, with the
    error naming the bound; with the bound lowered below that copy too, nothing."""
    small = Upstream("many_tools_http.py", ("200",)).start()
    try:
        root = definitions(tmp_path, sources_yaml(http_source("many", small.url)))
        with gateway_serving(root, source_max_tools=250) as served:
            assert source_status(served)["tools"] == 200
    finally:
        small.kill()
    grown = Upstream("many_tools_http.py", ("300", "100"), port=small.port).start()
    try:
        with gateway_serving(root, source_max_tools=250) as served:
            status = source_status(served)
            assert status["tools"] == 200 and status["health"] == "stale", status
            assert "source_max_tools" in status["error"], status
        with gateway_serving(root, source_max_tools=150) as served:
            status = source_status(served)
            assert status["tools"] == 0 and status["health"] == "down", status
    finally:
        grown.kill()


def test_a_tool_nested_past_the_depth_bound_refuses_the_source_and_its_session_stays(tmp_path):
    """A tool whose schema nests 150 levels deep (past source_max_depth, 128) refuses the source, naming the
    setting; the pooled session, which lists the upstream again when it connects, stays up (a refusal is no
    failure to reconnect over) and the local tool answers."""
    with upstream("many_tools_http.py", "3", "3", "150") as many:
        root = definitions(tmp_path, sources_yaml(http_source("many", many.url)))
        with gateway_serving(root) as served:
            for rebuilt in (False, True):
                if rebuilt:
                    reload(served)
                status = source_status(served)
                assert status["tools"] == 0 and status["health"] == "down", status
                assert "tool 'tool_0'" in status["error"] and "source_max_depth" in status["error"], status
            connection = next(iter(served.gateway.mcp_pool.connections()))
            until(lambda: connection.state == "up", "the pooled session to be up")
            assert connection.error is None
            assert echoed(served.url) == "still here"


def test_an_upstream_within_raised_bounds_serves_every_tool(tmp_path):
    with upstream("many_tools_http.py", "300", "100") as many:
        root = definitions(tmp_path, sources_yaml(http_source("many", many.url)))
        with gateway_serving(root, source_max_tools=300) as served:
            assert source_status(served)["tools"] == 300
            reload(served)
            status = source_status(served)
            assert status["tools"] == 300 and status["health"] == "ok", status
            answer = httpx.post(f"{served.url}/tools/tool_299/call", json={"text": "x"}, timeout=30).json()
            assert answer["result"] == "ok", answer


def test_other_calls_answer_while_a_listing_is_parsed(tmp_path, monkeypatch):
    """While the pooled session's listing of a big source (3,000 tools, the bound raised) is being parsed — held
    in the middle of it until the test has its answers — the local tool and /healthz answer: the parse runs in a
    worker thread, not on the loop that serves every call (the SDK parsed it on that loop: 100,000 tools held
    every call for seconds)."""
    parsing, release = threading.Event(), threading.Event()
    parse = mcp_listing._page

    def held(*args):
        parsing.set()
        release.wait(60)
        return parse(*args)

    with upstream("many_tools_http.py", "3000") as many:
        root = definitions(tmp_path, sources_yaml(http_source("many", many.url)))
        with gateway_serving(root, source_max_tools=5_000) as served:
            assert source_status(served)["tools"] == 3000
            monkeypatch.setattr(mcp_listing, "_page", held)
            rebuilding = threading.Thread(target=reload, args=(served,))
            rebuilding.start()
            try:
                assert parsing.wait(60), "the rebuild did not list the upstream"
                assert echoed(served.url) == "still here"
                assert httpx.get(f"{served.url}/healthz", timeout=30).status_code == 200
                assert rebuilding.is_alive()  # the build waits for the held parse: it has not finished
            finally:
                release.set()
                rebuilding.join(60)
            assert source_status(served)["tools"] == 3000


def openapi_document(operations: int) -> str:
    paths = {f"/t/{n}": {"get": {"operationId": f"op_{n}"}} for n in range(operations)}
    return json.dumps({"openapi": "3.1.0", "info": {"title": "many", "version": "1"},
                       "servers": [{"url": "http://127.0.0.1:9"}], "paths": paths})


def test_an_openapi_document_past_the_bound_is_refused_before_it_is_converted(tmp_path):
    """A document in the definitions directory is the admin's: past source_max_tools it is an error at its
    `spec` naming the setting (as a document past max_file_bytes is)."""
    root = definitions(tmp_path, "sources:\n  - id: many\n    openapi: {spec: many.json}\n")
    (root / "many.json").write_text(openapi_document(30))
    with pytest.raises(DefinitionsInvalid) as refused:
        catalog_for(root, source_max_tools=20)
    assert "many.json declares 30 operations, more than 20, the bound of setting source_max_tools" in str(
        refused.value)
    assert len(catalog_for(root, source_max_tools=30).tools) == 31


def test_an_openapi_url_past_the_bound_is_a_warning_and_other_tools_answer(tmp_path):
    """A document fetched from a URL is someone else's: past the bound the source is down with a warning naming
    the setting (it would serve its last copy, stale), never a stopped build."""
    document = openapi_document(30)

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": document.encode()})

    with serving(app) as api:
        root = definitions(tmp_path, f"sources:\n  - id: many\n    openapi: {{url: '{api.url}/openapi.json'}}\n")
        with gateway_serving(root, source_max_tools=20) as served:
            status = source_status(served)
            assert status["tools"] == 0 and status["health"] == "down", status
            assert "declares 30 operations, more than 20, the bound of setting source_max_tools" in status["error"]
            assert echoed(served.url) == "still here"


@pytest.mark.parametrize(("name", "value"), [("source_max_tools", "0"), ("source_max_bytes", "-1"),
                                             ("source_max_depth", "0"), ("source_max_tools", "many")])
def test_a_bound_that_is_not_a_positive_number_is_refused_naming_it(name, value):
    """A zero or negative bound would refuse every source; a setting error names it instead."""
    with pytest.raises(SettingsInvalid, match=name):
        load_settings(None, {"TOOL_GATEWAY_" + name.upper(): value})
