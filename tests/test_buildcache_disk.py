"""The on-disk cache of parsed definitions files (gateway.buildcache_disk): used when valid, never served stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import buildcache_disk
from gateway.buildcache_disk import ParsedFiles
from gateway.definitions import DEFAULT_LIMITS, DefinitionsCache, load_definitions

TOOL = """tools:
  - id: {id}
    name: Tool
    user_description: A tool.
    ai_description: A tool.
    binding: {{python: "m:f"}}
"""


def _entries(store: ParsedFiles) -> list[Path]:
    return [p for p in store.directory.rglob("*") if p.is_file()]


def _load(root: Path, store: ParsedFiles) -> list[str]:
    return [tool.id for tool in load_definitions(root, DefinitionsCache(store)).tools]


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    root = tmp_path / "defs"
    root.mkdir()
    (root / "a.yaml").write_text(TOOL.format(id="first"), encoding="utf-8")
    return root


def test_a_restart_reads_the_kept_parse_instead_of_the_yaml(definitions, tmp_path, monkeypatch):
    """A second load with a fresh process-level cache takes the file's data from disk: no YAML parse, no checks."""
    store = ParsedFiles(tmp_path / "cache")
    assert _load(definitions, store) == ["first"]
    assert len(_entries(store)) == 1

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr("gateway.yamlsource._Loader", no_parse)
    monkeypatch.setattr("gateway.checks.check_document", no_parse)
    monkeypatch.setattr("gateway.checks.check_tool", no_parse)
    assert _load(definitions, ParsedFiles(tmp_path / "cache")) == ["first"]


def test_an_edited_file_is_never_served_from_its_old_entry(definitions, tmp_path):
    """After an edit the file's new content is served (entries are named by content), then kept as well."""
    store = ParsedFiles(tmp_path / "cache")
    assert _load(definitions, store) == ["first"]
    (definitions / "a.yaml").write_text(TOOL.format(id="second"), encoding="utf-8")
    assert _load(definitions, ParsedFiles(tmp_path / "cache")) == ["second"]
    assert len(_entries(store)) == 2


def test_a_gateway_upgrade_never_reads_the_older_entries(definitions, tmp_path, monkeypatch):
    """Another gateway release or code (another code digest) uses its own directory and removes the old one."""
    assert _load(definitions, ParsedFiles(tmp_path / "cache")) == ["first"]
    old = ParsedFiles(tmp_path / "cache").directory
    monkeypatch.setattr(buildcache_disk, "code_digest", lambda: "f" * 64)
    upgraded = ParsedFiles(tmp_path / "cache")
    assert upgraded.directory != old and not old.exists()
    assert upgraded.get((definitions / "a.yaml").read_text(), DEFAULT_LIMITS) is buildcache_disk.MISSING
    assert _load(definitions, upgraded) == ["first"]


def test_a_corrupted_entry_is_parsed_again_and_rewritten(definitions, tmp_path):
    """An entry whose bytes changed (a flipped id) is not trusted: the file is parsed again and the entry repaired."""
    store = ParsedFiles(tmp_path / "cache")
    assert _load(definitions, store) == ["first"]
    [entry] = _entries(store)
    entry.write_bytes(entry.read_bytes().replace(b"first", b"fake1"))
    assert _load(definitions, ParsedFiles(tmp_path / "cache")) == ["first"]
    assert b"first" in entry.read_bytes()
    entry.write_bytes(b"garbage")
    assert _load(definitions, ParsedFiles(tmp_path / "cache")) == ["first"]


def test_files_with_problems_or_non_json_data_are_not_kept(tmp_path):
    """A file with a duplicate key, a schema or semantic problem, or data JSON would change (a number as key, NaN)
    is parsed and checked every time, with the same problems."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "scope.yaml").write_text(TOOL.format(id="c") + "    scope: nowhere\n", encoding="utf-8")
    (root / "schema.yaml").write_text(TOOL.format(id="d") + "    input_schema: {type: objekt}\n", encoding="utf-8")
    (root / "dup.yaml").write_text(TOOL.format(id="a") + "tools: []\n", encoding="utf-8")
    (root / "nan.yaml").write_text(TOOL.format(id="b") + "x_nan: .nan\n1: one\n", encoding="utf-8")
    store = ParsedFiles(tmp_path / "cache")
    first = load_definitions(root, DefinitionsCache(store)).problems
    assert {p.file for p in first} == {"dup.yaml", "nan.yaml", "scope.yaml", "schema.yaml"}
    assert _entries(store) == []
    again = load_definitions(root, DefinitionsCache(ParsedFiles(tmp_path / "cache"))).problems
    assert [(p.file, p.line, p.message) for p in again] == [(p.file, p.line, p.message) for p in first]


def test_an_unwritable_cache_directory_only_means_no_cache(definitions, tmp_path):
    """A cache directory that cannot be made (a file stands in its way) does not stop loading."""
    (tmp_path / "cache").write_text("not a directory")
    assert _load(definitions, ParsedFiles(tmp_path / "cache")) == ["first"]
