"""A hostile upstream MCP server (real processes on 127.0.0.1: ``tests/fixtures/mcp_upstream/raw_http.py`` writes
its own bytes, ``hostile_http.py`` is the SDK's low-level server): whatever it answers or lists, the gateway stays
bounded and answers with a result, an error result or a problem naming the upstream."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sources.mcp_upstreams import SERVERS, Upstream, alive, gateway_serving, sources_yaml, until, upstream

from gateway.upstream.mcp import pool as mcp_pool

STDIO_HOSTILE = SERVERS / "stdio_hostile.py"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def raw() -> Iterator[Upstream]:
    with upstream("raw_http.py") as running:
        yield running


def definitions(tmp_path: Path, url: str, extra: str = "") -> Path:
    root = tmp_path / "defs"
    root.mkdir()
    # A loaded machine may take seconds to list the larger hostile listings: a wait that only bounds.
    (root / "upstreams.yaml").write_text(sources_yaml(f"  - id: evil\n    mcp: {{url: '{url}', connect_timeout_s: 60}}\n"
                                                      + extra))
    return root


def call(url: str, tool: str, arguments: dict | None = None) -> httpx.Response:
    return httpx.post(f"{url}/tools/{tool}/call", json=arguments or {}, timeout=60)


def test_a_50_mb_text_is_cut_to_the_result_limit(tmp_path, raw):
    """A 50 MB text result is an answer cut to max_result_chars, never a 500, and the next call still works."""
    with gateway_serving(definitions(tmp_path, raw.url)) as served:
        response = call(served.url, "big_text")
        assert response.status_code == 200, response.text[:300]
        assert len(response.text) < 1_000_000
        assert call(served.url, "ok").json()["result"] == "fine"


def test_structured_content_nested_10000_deep_is_an_error_result_naming_the_upstream(tmp_path, raw):
    """An answer nested 10,000 deep is an error result naming the upstream at once (not a wait for a timeout)."""
    with gateway_serving(definitions(tmp_path, raw.url, "    timeout_s: 600\n")) as served:
        response = call(served.url, "deep_structured")
        assert response.status_code == 200, response.text[:300]
        body = response.json()
        assert body["is_error"] is True and "MCP server 'evil'" in body["error"], body
        assert "could not be read (recursion limit exceeded" in body["error"], body  # not pydantic's report
        assert call(served.url, "ok").json()["result"] == "fine"


def test_lone_surrogates_in_a_result_are_an_error_result_naming_the_upstream(tmp_path, raw):
    """Lone surrogates in an upstream's text (invalid JSON text for the SDK) are an error result naming the
    upstream, in valid UTF-8, never a 500."""
    with gateway_serving(definitions(tmp_path, raw.url)) as served:
        response = call(served.url, "surrogates")
        assert response.status_code == 200, response.text[:300]
        response.content.decode("utf-8")
        assert response.json()["is_error"] is True and "MCP server 'evil'" in response.json()["error"]


@pytest.mark.parametrize("kind", ["bad_names", "bad_schemas"])
def test_tools_an_upstream_gets_wrong_are_left_out_with_a_warning_and_the_rest_served(tmp_path, kind):
    """Invalid or colliding tool names and input schemas that are not JSON Schemas, listed by an upstream, are
    warnings naming the source, and its other tools are served: an upstream cannot stop the build."""
    with upstream("hostile_http.py", kind) as running, \
            gateway_serving(definitions(tmp_path, running.url)) as served:
        answer = call(served.url, "ok").json()
        assert answer.get("result") == "fine", (answer, served.gateway.last_reload)
        warnings = served.gateway.last_reload.warnings
        assert warnings and all("'evil'" in w.message and w.message.endswith("the tool is not served")
                                for w in warnings), warnings


def test_a_blank_description_is_served(tmp_path):
    """A tool whose description is only whitespace is served under its name (it crashed the whole build)."""
    with upstream("hostile_http.py", "blank_description") as running, \
            gateway_serving(definitions(tmp_path, running.url)) as served:
        tools = {t["id"]: t for t in httpx.get(f"{served.url}/tools", timeout=30).json()["tools"]}
        assert tools["blank"]["ai_description"] == "blank"


def test_a_flood_of_list_changed_is_not_a_rebuild_storm(tmp_path):
    """An upstream saying tools/list_changed every 10 ms asks for a rebuild at most every few seconds, not for
    one after another; the gateway keeps serving meanwhile."""
    with upstream("hostile_http.py", "one", "--flood") as running, \
            gateway_serving(definitions(tmp_path, running.url)) as served:
        rebuilds = []
        reload = served.gateway.reload

        async def counted():
            rebuilds.append(1)
            return await reload()

        served.gateway.reload = counted
        began = time.monotonic()
        for _ in range(30):  # 3 s of calls or more, while the flood goes on
            assert call(served.url, "ok").json()["result"] == "fine"
            time.sleep(0.1)
        intervals = (time.monotonic() - began) / mcp_pool.CHANGE_INTERVAL_S
        assert len(rebuilds) <= intervals + 2, (len(rebuilds), intervals)  # without the limit: hundreds


def test_a_stdio_server_writing_garbage_and_refusing_to_exit_is_served_then_stopped(tmp_path):
    """A stdio upstream that writes garbage to stdout between messages is still served; one that ignores SIGTERM
    and the end of its input is killed when the gateway stops (no orphan)."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "local.yaml").write_text(sources_yaml(
        f"  - id: stubborn\n    mcp: {{command: '{sys.executable}', args: ['{STDIO_HOSTILE}', '--stubborn'], "
        "connect_timeout_s: 30}\n"))
    with gateway_serving(root) as served:
        answer = call(served.url, "whoami").json()
        assert not answer["is_error"], answer
        pid = json.loads(answer["text"])["pid"]
        assert call(served.url, "whoami").json()["text"] == answer["text"]
    until(lambda: not alive(pid), "the stubborn stdio upstream to be stopped", timeout=30)


def test_an_upstream_tool_named_like_a_written_one_is_left_out_with_a_warning(tmp_path):
    """An upstream listing a tool whose name a hand-written tool has: the written tool is served, the upstream's
    is a warning naming the source (it stopped the build: an upstream could block every reload)."""
    with upstream("hostile_http.py", "one") as running:
        root = definitions(tmp_path, running.url)
        (root / "python").mkdir()
        (root / "python" / "mine.py").write_text("def run() -> str:\n    return 'mine'\n")
        (root / "mine.yaml").write_text("tools:\n  - id: ok\n    name: Mine\n    user_description: Mine.\n"
                                        "    ai_description: Mine.\n    binding: {python: 'mine:run'}\n")
        with gateway_serving(root) as served:
            assert call(served.url, "ok").json()["result"] == "mine"
            [warning] = served.gateway.last_reload.warnings
            assert "source 'evil': tool id 'ok' is already declared by mine.yaml" in warning.message


@pytest.mark.parametrize("parameter", ["x", "y"])
def test_hiding_a_parameter_whose_upstream_schema_is_no_schema_is_a_problem_there(tmp_path, parameter):
    """The admin hides a parameter whose upstream schema is not a schema (`5`, an unknown type): a problem at that
    hidden entry, and the source's other tools are served (it was a TypeError that lost the whole source)."""
    with upstream("hostile_http.py", "odd_parameters") as running:
        root = definitions(tmp_path, running.url, f"    hidden: {{odd: {{{parameter}: 1}}}}\n")
        with gateway_serving(root) as served:
            assert call(served.url, "ok").json()["result"] == "fine"
            messages = [w.message for w in served.gateway.last_reload.warnings]
            assert any(f"parameter '{parameter}' of tool 'odd' has no schema" in m for m in messages), messages


def test_a_ref_cycle_in_an_upstream_schema_leaves_that_tool_out_and_a_recursive_tree_is_served(tmp_path):
    """Tools whose inputSchema's $refs go round without checking a part of the value (A -> B -> A, A -> A) are
    warnings naming the cycle, and not served (every call reaching the cycle was an internal RecursionError); a
    tree whose nodes hold nodes is legitimate and served, its arguments checked; the source's other tools too."""
    with upstream("hostile_http.py", "ref_cycles") as running, \
            gateway_serving(definitions(tmp_path, running.url)) as served:
        messages = sorted(w.message for w in served.gateway.last_reload.warnings)
        never = "(each step applies to the same value, so checking one would never end); the tool is not served"
        assert messages == [f"tool '{tool}' (generated by source 'evil'): input_schema: $ref cycle {cycle} {never}"
                            for tool, cycle in [("self", "#/$defs/A -> #/$defs/A"),
                                                ("two_step", "#/$defs/A -> #/$defs/B -> #/$defs/A")]], messages
        for tool in ("self", "two_step"):
            assert call(served.url, tool, {"x": 1}).status_code == 404
        assert call(served.url, "tree", {"x": {"children": [{"children": []}]}}).json()["result"] == "fine"
        refused = call(served.url, "tree", {"x": {"children": [5]}}).json()
        assert refused["is_error"] and "at $.x.children[0]: expected object" in refused["error"], refused
        assert call(served.url, "ok").json()["result"] == "fine"
