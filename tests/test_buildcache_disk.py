"""The on-disk snapshot of parsed definitions files (gateway.catalog.disk_cache): used when valid, never served stale."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.catalog import disk_cache as buildcache_disk
from gateway.catalog.disk_cache import ParsedFiles
from gateway.definitions.load import DEFAULT_LIMITS, DefinitionsCache, load_definitions

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
    """A load as a gateway's build does it: then the snapshot is written."""
    ids = [tool.id for tool in load_definitions(root, DefinitionsCache(store)).tools]
    store.save()
    return ids


def _store(tmp_path: Path, root: Path) -> ParsedFiles:
    return ParsedFiles(tmp_path / "cache", root)


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    root = tmp_path / "defs"
    root.mkdir()
    (root / "a.yaml").write_text(TOOL.format(id="first"), encoding="utf-8")
    return root


def test_a_restart_reads_the_kept_parse_instead_of_the_yaml(definitions, tmp_path, monkeypatch):
    """A second load with a fresh process-level cache takes the file's data from disk: no YAML parse, no checks."""
    store = _store(tmp_path, definitions)
    assert _load(definitions, store) == ["first"]
    assert len(_entries(store)) == 1

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr("gateway.definitions.yamlsource._Loader", no_parse)
    monkeypatch.setattr("gateway.definitions.checks.check_document", no_parse)
    monkeypatch.setattr("gateway.definitions.checks.check_tool", no_parse)
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]


def test_an_edited_file_is_never_served_from_its_old_entry(definitions, tmp_path, monkeypatch):
    """After an edit the file's new content is served (entries are named by content); the snapshot then keeps the
    new entry and drops the old one, and the next load parses nothing."""
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    (definitions / "a.yaml").write_text(TOOL.format(id="second"), encoding="utf-8")
    assert _load(definitions, _store(tmp_path, definitions)) == ["second"]
    monkeypatch.setattr("gateway.definitions.yamlsource._Loader", None)  # a parse would fail
    store = _store(tmp_path, definitions)
    assert _load(definitions, store) == ["second"]
    assert len(_entries(store)) == 1 and b"first" not in _entries(store)[0].read_bytes()


def test_another_definitions_directory_or_other_limits_have_their_own_snapshot(definitions, tmp_path):
    """Two directories (or one under other YAML limits) never read each other's snapshot, nor overwrite it."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.yaml").write_text(TOOL.format(id="b"), encoding="utf-8")
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    assert _load(other, _store(tmp_path, other)) == ["b"]
    assert len(_entries(_store(tmp_path, definitions))) == 2
    looser = replace(DEFAULT_LIMITS, max_yaml_nodes=DEFAULT_LIMITS.max_yaml_nodes + 1)
    store = _store(tmp_path, definitions)
    digest = DefinitionsCache(store)._digests.digest(definitions / "a.yaml")
    assert store.get(digest, looser) is buildcache_disk.MISSING


def test_a_gateway_upgrade_never_reads_the_older_entries(definitions, tmp_path, monkeypatch):
    """Another gateway release or code (another code digest) uses its own directory and removes the old one."""
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    old = _store(tmp_path, definitions).directory
    monkeypatch.setattr(buildcache_disk, "code_digest", lambda: "f" * 64)
    upgraded = _store(tmp_path, definitions)
    assert upgraded.directory != old and not old.exists()
    digest = DefinitionsCache(upgraded)._digests.digest(definitions / "a.yaml")
    assert upgraded.get(digest, DEFAULT_LIMITS) is buildcache_disk.MISSING
    assert _load(definitions, upgraded) == ["first"]


@pytest.mark.parametrize("damage", ["flipped", "truncated", "garbage", "empty"])
def test_a_corrupted_snapshot_is_a_warning_and_every_file_is_parsed_again(definitions, tmp_path, caplog, monkeypatch,
                                                                        damage):
    """A snapshot whose bytes changed (a flipped id, cut short, replaced, emptied) is not trusted: a warning says
    so, every file is parsed again, and the snapshot is rewritten whole."""
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    [snapshot] = _entries(_store(tmp_path, definitions))
    good = snapshot.read_bytes()
    snapshot.write_bytes({"flipped": good.replace(b"first", b"fake1"), "truncated": good[:-5],
                          "garbage": b"garbage", "empty": b""}[damage])
    with caplog.at_level(logging.WARNING, "gateway.catalog.disk_cache"):
        assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    assert "corrupted" in caplog.text and str(snapshot) in caplog.text
    monkeypatch.setattr("gateway.definitions.yamlsource._Loader", None)  # rewritten: the next load parses nothing
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]


def test_files_with_problems_are_not_kept(tmp_path):
    """A file with a duplicate key, a schema or semantic problem (a number as key, NaN) is parsed and checked every
    time, with the same problems."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "scope.yaml").write_text(TOOL.format(id="c") + "    scope: nowhere\n", encoding="utf-8")
    (root / "schema.yaml").write_text(TOOL.format(id="d") + "    input_schema: {type: objekt}\n", encoding="utf-8")
    (root / "dup.yaml").write_text(TOOL.format(id="a") + "tools: []\n", encoding="utf-8")
    (root / "nan.yaml").write_text(TOOL.format(id="b") + "x_nan: .nan\n1: one\n", encoding="utf-8")
    store = _store(tmp_path, root)
    first = load_definitions(root, DefinitionsCache(store)).problems
    store.save()
    assert {p.file for p in first} == {"dup.yaml", "nan.yaml", "scope.yaml", "schema.yaml"}
    assert _entries(store) == []
    again = load_definitions(root, DefinitionsCache(_store(tmp_path, root))).problems
    assert [(p.file, p.line, p.message) for p in again] == [(p.file, p.line, p.message) for p in first]


def test_an_unwritable_cache_directory_only_means_no_cache(definitions, tmp_path):
    """A cache directory that cannot be made (a file stands in its way) does not stop loading."""
    (tmp_path / "cache").write_text("not a directory")
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]


def test_a_released_store_keeps_the_entries_on_disk_through_a_reload(definitions, tmp_path, monkeypatch):
    """A serving gateway lets go of the entries on disk; an edit reloaded later is kept beside them, a file deleted
    is dropped, and the next start parses nothing."""
    (definitions / "b.yaml").write_text(TOOL.format(id="b"), encoding="utf-8")
    (definitions / "c.yaml").write_text(TOOL.format(id="c"), encoding="utf-8")
    store = _store(tmp_path, definitions)
    cache = DefinitionsCache(store)
    load_definitions(definitions, cache)
    store.save()
    store.release()
    (definitions / "b.yaml").write_text(TOOL.format(id="b2"), encoding="utf-8")
    (definitions / "c.yaml").unlink()
    assert [t.id for t in load_definitions(definitions, cache).tools] == ["first", "b2"]
    store.save()
    monkeypatch.setattr("gateway.definitions.yamlsource._Loader", None)  # a parse would fail
    assert _load(definitions, _store(tmp_path, definitions)) == ["first", "b2"]
    assert len(_store(tmp_path, definitions)._read(DEFAULT_LIMITS)) == 2  # a.yaml's and b.yaml's, not c.yaml's


def test_a_snapshot_others_could_have_written_is_not_read(definitions, tmp_path, caplog, monkeypatch):
    """A snapshot that another user could have written (group- or world-writable, or owned by someone else) is
    a warning and never read: its checksum is no signature, and marshal is not made for hostile bytes. Its
    definitions would otherwise skip the checks. A well-kept one is read (0600, as written)."""
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    [snapshot] = _entries(_store(tmp_path, definitions))
    assert snapshot.stat().st_mode & 0o777 == 0o600
    payload = snapshot.read_bytes()[len(buildcache_disk.MAGIC):].partition(b"\n")[2]
    forged = payload.replace(b"first", b"fake1")  # a forged entry, with its checksum recomputed
    snapshot.write_bytes(buildcache_disk.MAGIC + hashlib.sha256(forged).hexdigest().encode() + b"\n" + forged)
    snapshot.chmod(0o666)
    with caplog.at_level(logging.WARNING, "gateway.catalog.disk_cache"):
        assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    assert "writable by others" in caplog.text
    monkeypatch.setattr("gateway.definitions.yamlsource._Loader", None)  # rewritten, 0600: the next load parses nothing
    assert _load(definitions, _store(tmp_path, definitions)) == ["first"]
    assert snapshot.stat().st_mode & 0o777 == 0o600


def test_an_older_save_that_reaches_the_disk_last_leaves_the_newer_snapshot(definitions, tmp_path, monkeypatch):
    """Two saves whose payloads were taken in one order and whose writes come in the other: the older is not
    written over the newer, so the snapshot holds the latest load."""
    import threading
    import time

    store = _store(tmp_path, definitions)
    _load(definitions, store)
    newer_written = threading.Event()

    class OlderWaits:
        """The write lock, held back for the older save until the newer one has written."""

        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __enter__(self) -> None:
            if threading.current_thread().name == "older":
                newer_written.wait(10)
            self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()
            if threading.current_thread().name == "newer":
                newer_written.set()

    store._write_lock = OlderWaits()
    (definitions / "a.yaml").write_text(TOOL.format(id="second"), encoding="utf-8")
    load_definitions(definitions, DefinitionsCache(store))
    older = threading.Thread(target=store.save, name="older")
    older.start()
    deadline = time.monotonic() + 10
    while store._taken < 2:  # the older save has taken its payload (the second load's)
        assert time.monotonic() < deadline, "the older save never took its payload"
        threading.Event().wait(0.01)
    (definitions / "a.yaml").write_text(TOOL.format(id="third"), encoding="utf-8")
    load_definitions(definitions, DefinitionsCache(store))
    newer = threading.Thread(target=store.save, name="newer")
    newer.start()
    newer.join(10)
    older.join(10)

    def refuse(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr("gateway.definitions.yamlsource._Loader", refuse)
    assert [tool.id for tool in load_definitions(definitions, DefinitionsCache(_store(tmp_path, definitions))).tools] \
        == ["third"]
