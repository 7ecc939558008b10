"""A gateway serving with a lock file, in front of a real FastMCP upstream whose tools change after they were
locked: the changed tool is served as locked (its text and schema; a call its new schema refuses is an error
result saying so), a new tool is not served, both are told in /status; `lock --tool` approves one change and the
gateway serves it after the reload; a source with `on_change: hold` serves nothing changed; a broken lock file
fails the build and the served catalog stays."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from fastmcp import FastMCP
from lock_upstreams import POISONED, TRUSTED, changed, trusted
from mcp import Client
from support import CONSOLE, running, serving

from gateway.cli.main import main


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


@contextmanager
def upstream_at(root: Path, server: FastMCP, on_change: str | None = None) -> Iterator[None]:
    with serving(server.http_app(path="/mcp"), lifespan="on") as served:
        extra = f"\n    on_change: {on_change}" if on_change else ""
        (root / "up.yaml").write_text(f"sources:\n  - id: up\n    mcp: {{url: '{served.url}/mcp'}}{extra}\n",
                                      encoding="utf-8")
        yield


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A definitions directory whose lock records the trusted upstream."""
    directory = tmp_path / "defs"
    directory.mkdir()
    with upstream_at(directory, trusted()):
        assert main(["lock", str(directory)]) == 0
    return directory


def listed(url: str) -> dict[str, dict]:
    return {tool["id"]: tool for tool in httpx.get(f"{url}/tools", timeout=30).json()["tools"]}


def warnings(url: str) -> list[str]:
    return [w["message"] for w in httpx.get(f"{url}/status", timeout=30).json()["last_reload"]["warnings"]]


def call(url: str, tool: str, arguments: dict) -> httpx.Response:
    return httpx.post(f"{url}/tools/{tool}/call", json=arguments, timeout=30)


async def mcp_tools(url: str) -> dict[str, object]:
    async with Client(f"{url}/mcp") as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


def test_a_changed_tool_is_served_as_locked_and_a_new_one_not_at_all(root):
    with upstream_at(root, changed()), running(root) as served:
        add = listed(served.url)["add"]
        assert add["ai_description"] == TRUSTED and set(add["input_schema"]["properties"]) == {"a", "b"}
        model_sees = anyio.run(mcp_tools, served.url)
        assert set(model_sees) == {"add"} and model_sees["add"].description == TRUSTED
        assert "grab" not in listed(served.url) and call(served.url, "grab", {"path": "/etc"}).status_code == 404
        said = warnings(served.url)
        assert any("tool 'add' changed since tools.lock.json (user_description, ai_description, input_schema): "
                   "served as locked" in w for w in said), said
        assert any("tool 'grab' is not in tools.lock.json: held" in w for w in said), said
        assert httpx.get(f"{served.url}/status", timeout=30).json()["held"] == [
            {"tool": "add", "change": "user_description, ai_description, input_schema", "served": "as_locked"},
            {"tool": "grab", "change": "new", "served": "no"}]
        assert "tool_gateway_catalog_tools_held 2.0" in httpx.get(f"{served.url}/metrics", timeout=30).text
        refused = call(served.url, "add", {"a": 1, "b": 2}).json()
        assert refused["is_error"] and "its new input schema refuses these arguments" in refused["text"], refused
        assert "(at $: Additional properties are not allowed ('b' was unexpected))" in refused["text"], refused


def test_lock_tool_approves_one_change_and_the_reload_serves_it(root):
    with upstream_at(root, changed()), running(root) as served:
        before = served.gateway.catalog.version
        assert main(["lock", str(root), "--tool", "add"]) == 0
        assert httpx.post(f"{served.url}/admin/reload", auth=CONSOLE, timeout=60).json()["changed"]
        assert served.gateway.catalog.version != before
        add = listed(served.url)["add"]
        assert add["ai_description"] == POISONED and set(add["input_schema"]["properties"]) == {"a", "c"}
        assert call(served.url, "add", {"a": 1, "c": 2}).json()["result"] == {"result": 3.0}
        assert "grab" not in listed(served.url)  # still not approved
        locked = json.loads((root / "tools.lock.json").read_text(encoding="utf-8"))["tools"]
        assert set(locked) == {"add"}
        assert main(["lock", str(root), "--tool", "grab"]) == 0
        httpx.post(f"{served.url}/admin/reload", auth=CONSOLE, timeout=60)
        assert set(listed(served.url)) == {"add", "grab"}
        assert not [w for w in warnings(served.url) if "tools.lock.json" in w]  # the rule on its text still warns
        assert "held" not in httpx.get(f"{served.url}/status", timeout=30).json()
        assert "tool_gateway_catalog_tools_held 0.0" in httpx.get(f"{served.url}/metrics", timeout=30).text


def test_a_source_that_holds_changes_serves_nothing_changed(root):
    with upstream_at(root, changed(), on_change="hold"), running(root) as served:
        assert listed(served.url) == {}
        assert call(served.url, "add", {"a": 1, "b": 2}).status_code == 404
        said = warnings(served.url)
        assert any("tool 'add' changed since tools.lock.json" in w and "held, not served" in w for w in said), said


def test_an_unchanged_upstream_is_served_as_it_is_and_says_nothing(root):
    with upstream_at(root, trusted()), running(root) as served:
        assert call(served.url, "add", {"a": 1, "b": 2}).json()["result"] == {"result": 3.0}
        assert not warnings(served.url)


def test_a_broken_lock_file_fails_the_reload_and_the_served_catalog_stays(root):
    with upstream_at(root, trusted()), running(root) as served:
        version = served.gateway.catalog.version
        (root / "tools.lock.json").write_text("{not json", encoding="utf-8")
        outcome = httpx.post(f"{served.url}/admin/reload", auth=CONSOLE, timeout=60).json()
        assert not outcome["ok"] and "tools.lock.json" in json.dumps(outcome), outcome
        assert served.gateway.catalog.version == version
        assert call(served.url, "add", {"a": 1, "b": 2}).json()["result"] == {"result": 3.0}


@pytest.mark.parametrize(("entry", "said"), [
    ({"digest": "sha256:x"}, "has no digest and shape"),
    ({"digest": "sha256:x", "shape": "sha256:y", "content": {"name": "add"}}, "has no content of exactly"),
    ("add", "has no digest and shape"),
])
def test_a_hand_edited_entry_that_is_not_what_lock_writes_fails_the_reload_naming_the_tool(root, entry, said):
    with upstream_at(root, trusted()), running(root) as served:
        (root / "tools.lock.json").write_text(json.dumps({"version": 1, "tools": {"add": entry}}), encoding="utf-8")
        outcome = httpx.post(f"{served.url}/admin/reload", auth=CONSOLE, timeout=60).json()
        assert not outcome["ok"] and f"the entry of tool 'add' {said}" in json.dumps(outcome), outcome
        assert call(served.url, "add", {"a": 1, "b": 2}).json()["result"] == {"result": 3.0}


def test_lock_tool_naming_nothing_is_an_error(root, capsys):
    with upstream_at(root, trusted()):
        assert main(["lock", str(root), "--tool", "nope"]) == 1
    assert "no tool 'nope' is served or locked" in capsys.readouterr().err
