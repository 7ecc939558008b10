"""A rebuild that reuses the previous build's per-file results serves exactly what a fresh full build serves."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.catalog import cache as buildcache
from gateway.catalog.build import build_catalog
from gateway.catalog.cache import BuildCache
from gateway.definitions.load import DefinitionsCache
from gateway.errors import DefinitionsInvalid
from gateway.settings import Settings
from gateway.sources import load_all

MODULE = '''
def ok(x: int) -> int:
    return x


def warn(x: int) -> complex:  # no JSON Schema for it: a warning, and the tool is served
    return x
'''

# Each kind is one tool's YAML body after its id; ids come from a small pool, so files repeat each other's ids.
KINDS = {
    "plain": 'binding: {python: "mod:ok"}',
    "warn": 'binding: {python: "mod:warn"}',
    "missing": 'binding: {python: "mod:missing"}',
    "filtered": 'binding: {python: "mod:ok"}\n    filters: [{use: redact, with: {literals: [secret]}}]',
    "badfilter": 'binding: {python: "mod:ok"}\n    filters: [no_such_filter]',
    "browser": "binding: {browser: {script: scripts/s.js}}",
    "tagged": 'binding: {python: "mod:ok"}\n    toolsets: [ops]\n    tags: [t1]',
}


TOOLSET_FILTERS = {"ops": [{"use": "redact", "with": {"literals": ["secret"]}}]}


def tool_yaml(tool_id: str, kind: str) -> str:
    return f"  - id: {tool_id}\n    name: {tool_id}\n    user_description: d\n    ai_description: d\n    {KINDS[kind]}\n"


def write(root: Path, name: str, tools: list[tuple[str, str]]) -> None:
    body = "".join(tool_yaml(tool_id, kind) for tool_id, kind in tools)
    (root / name).write_text(f"tools:\n{body}" if tools else "tools: []\n", encoding="utf-8")


def make_root(tmp: Path) -> Path:
    root = tmp / "defs"
    shutil.rmtree(root, ignore_errors=True)
    (root / "python").mkdir(parents=True)
    (root / "scripts").mkdir()
    (root / "python" / "mod.py").write_text(MODULE, encoding="utf-8")
    (root / "scripts" / "s.js").write_text("return 1;\n", encoding="utf-8")
    return root


def outcome(root: Path, config: Settings, caches: tuple[DefinitionsCache, BuildCache] | None = None) -> dict[str, Any]:
    """Everything a build serves or reports, in a comparable form."""
    definitions, plugins = load_all(config, caches[0] if caches else None)
    try:
        catalog = build_catalog(definitions, config, cache=caches[1] if caches else None, plugins=plugins)
    except DefinitionsInvalid as exc:
        return {"problems": [str(p) for p in exc.problems]}
    return {
        "version": catalog.version,
        "tools": [(tool_id, tool.describe(), tool.return_schema, sorted(tool.executors)) for tool_id, tool
                  in catalog.tools.items()],
        "warnings": [str(p) for p in catalog.warnings],
        "filters": {tool_id: [f.name for f in chain] for tool_id, chain in catalog.filters.by_tool.items()},
    }


@pytest.fixture
def config(tmp_path: Path) -> Settings:
    return Settings(definitions=make_root(tmp_path), toolset_filters=TOOLSET_FILTERS)


def test_same_catalog_however_reached(config: Settings) -> None:
    """A catalog reached by edits (incremental) has the version, tools, warnings and filters of a fresh full build."""
    root = config.definitions
    caches = (DefinitionsCache(), BuildCache())
    for index in range(5):
        write(root, f"f{index}.yaml", [(f"t{index}_{n}", kind) for n, kind in enumerate(["plain", "warn", "tagged"])])
    assert outcome(root, config, caches) == outcome(root, config)
    write(root, "f2.yaml", [("t2_0", "filtered"), ("new", "browser")])
    incremental = outcome(root, config, caches)
    assert "version" in incremental
    assert incremental == outcome(root, config)


def test_one_edit_rebuilds_only_its_file(config: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """After one file of many changes, the rebuild asks the build cache only for that file's tools."""
    root = config.definitions
    caches = (DefinitionsCache(), BuildCache())
    for index in range(20):
        write(root, f"f{index:02d}.yaml", [(f"t{index}_{n}", "plain") for n in range(5)])
    outcome(root, config, caches)
    asked: list[str] = []
    real = buildcache.BuildCache.tool

    def spy(self: BuildCache, definition: Any, env: Any, build: Any) -> Any:
        asked.append(definition.id)
        return real(self, definition, env, build)

    monkeypatch.setattr(buildcache.BuildCache, "tool", spy)
    write(root, "f07.yaml", [(f"t7_{n}", "plain") for n in range(4)] + [("t7_new", "plain")])
    assert "version" in outcome(root, config, caches)
    assert sorted(asked) == sorted([f"t7_{n}" for n in range(4)] + ["t7_new"])


def test_duplicate_introduced_then_removed(config: Settings) -> None:
    """A duplicate id across files is reported as a full build reports it, and once removed the catalog is whole."""
    root = config.definitions
    caches = (DefinitionsCache(), BuildCache())
    write(root, "a.yaml", [("one", "plain"), ("two", "plain")])
    write(root, "b.yaml", [("three", "plain")])
    first = outcome(root, config, caches)
    write(root, "b.yaml", [("three", "plain"), ("one", "warn")])
    duplicate = outcome(root, config, caches)
    assert any("duplicate tool id 'one'" in p for p in duplicate["problems"])
    assert duplicate == outcome(root, config)
    write(root, "b.yaml", [("three", "plain")])
    assert outcome(root, config, caches) == first == outcome(root, config)


def test_deleted_renamed_and_python_edited(config: Settings) -> None:
    """Deleting a file, renaming one and editing python/ each give the catalog of a fresh full build."""
    root = config.definitions
    caches = (DefinitionsCache(), BuildCache())
    write(root, "a.yaml", [("one", "plain"), ("two", "missing")])
    write(root, "b.yaml", [("three", "plain")])
    write(root, "c.yaml", [("four", "browser")])
    assert outcome(root, config, caches) == outcome(root, config)  # 'two' has no function: a problem
    (root / "python" / "mod.py").write_text(MODULE + "\n\ndef missing(x: int) -> int:\n    return x\n")
    fixed = outcome(root, config, caches)
    assert "version" in fixed
    assert fixed == outcome(root, config)
    (root / "b.yaml").unlink()
    assert outcome(root, config, caches) == outcome(root, config)
    (root / "c.yaml").rename(root / "z.yaml")
    assert outcome(root, config, caches) == outcome(root, config)
    (root / "scripts" / "s.js").write_text("return 2;\n", encoding="utf-8")
    assert outcome(root, config, caches) == outcome(root, config)


FILES = [f"f{n}.yaml" for n in range(4)]
TOOL = st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f"]), st.sampled_from(sorted(KINDS)))
EDIT = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FILES), st.lists(TOOL, max_size=3)),
    st.tuples(st.just("delete"), st.sampled_from(FILES), st.none()),
    st.tuples(st.just("rename"), st.sampled_from(FILES), st.sampled_from(FILES)),
    st.tuples(st.just("python"), st.none(), st.booleans()),
    st.tuples(st.just("script"), st.none(), st.integers(0, 3)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDIT, min_size=1, max_size=8))
def test_random_edits_match_full_builds(tmp_path: Path, edits: list[tuple[str, Any, Any]]) -> None:
    """After every edit of a random sequence, the incremental rebuild equals a fresh full build."""
    root = make_root(tmp_path)
    config = Settings(definitions=root, toolset_filters=TOOLSET_FILTERS)
    caches = (DefinitionsCache(), BuildCache())
    write(root, "f0.yaml", [("a", "plain"), ("b", "tagged")])
    write(root, "f1.yaml", [("c", "warn")])
    assert outcome(root, config, caches) == outcome(root, config)
    for action, name, detail in edits:
        if action == "write":
            write(root, name, detail)
        elif action == "delete" and (root / name).exists():
            (root / name).unlink()
        elif action == "rename" and (root / name).exists():
            (root / name).rename(root / detail)
        elif action == "python":
            extra = "\n\ndef missing(x: int) -> int:\n    return x\n" if detail else ""
            (root / "python" / "mod.py").write_text(MODULE + extra, encoding="utf-8")
        elif action == "script":
            (root / "scripts" / "s.js").write_text(f"return {detail};\n", encoding="utf-8")
        assert outcome(root, config, caches) == outcome(root, config), (action, name, detail)


def test_a_deleted_files_tools_leave_the_build_cache_beside_failing_tools(config: Settings) -> None:
    """A rebuild of every file (python/ changed) keeps in the build cache only the tools it built: failing tools
    are not cached, so counting them let as many tools of a deleted file stay (found in review)."""
    root = config.definitions
    caches = (DefinitionsCache(), BuildCache())
    write(root, "a.yaml", [(f"a{i}", "plain") for i in range(5)])
    write(root, "b.yaml", [(f"b{i}", "missing") for i in range(6)])
    assert "problems" in outcome(root, config, caches)
    (root / "a.yaml").unlink()
    (root / "python" / "mod.py").write_text((root / "python" / "mod.py").read_text() + "\n# edited\n")
    assert "problems" in outcome(root, config, caches)
    assert caches[1]._tools == {}
