"""A gateway restarted on its state directory (gateway.catalog.disk_cache) serves what a cold start would: after an
edit of a YAML file or of a python/ module, after an upgrade, with its snapshot corrupted or its state directory
unwritable."""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import fields
from pathlib import Path

import pytest
from support import EXAMPLES

from gateway.catalog import disk_cache as buildcache_disk
from gateway.catalog.disk_cache import ParsedFiles
from gateway.definitions.load import DefinitionsCache, load_definitions
from gateway.definitions.model import ToolDefinition
from gateway.runtime.gateway import Gateway
from gateway.settings import Settings

MODULE = '''
def look(query: str, limit: int = 10) -> dict:
    return {"query": query, "limit": limit}
'''
TOOLS = """
tools:
  - id: look
    name: Look
    user_description: Looks.
    ai_description: Looks something up.
    binding: {python: "finder:look"}
    tags: [a, b]
    annotations: {read_only: true}
  - id: look_too
    name: Look too
    user_description: Looks too.
    ai_description: Looks something else up.
    scope: server
    binding: {python: "finder:look"}
    input_schema:
      type: object
      properties: {query: {type: string}}
      required: [query]
    examples: [{title: one, arguments: {query: x}}]
"""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(directory))
    return directory


@pytest.fixture
def definitions(write_definitions) -> Path:
    return write_definitions({"python/finder.py": MODULE, "tools.yaml": TOOLS})


def _start(root: Path) -> Gateway:
    return Gateway(Settings(definitions=root, reload=False))


def _snapshot(state: Path) -> Path:
    # Not the temporary file a save in progress writes before it renames it over the snapshot.
    [path] = [p for p in (state / "build").rglob("*") if p.is_file() and not p.name.startswith(".tmp-")]
    return path


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a kept file was parsed again")

    monkeypatch.setattr("gateway.definitions.parse.parse_yaml", refuse)


def _fields(definition: ToolDefinition) -> dict:
    return {f.name: getattr(definition, f.name) for f in fields(ToolDefinition) if f.name != "document"}


TESTS = Path(__file__).parent


@pytest.mark.parametrize("root", [EXAMPLES, TESTS / "fixtures" / "broken", TESTS / "console" / "tools",
                                  TESTS / "browser" / "tools"], ids=["examples", "broken", "console", "browser"])
def test_a_kept_file_loads_to_the_definitions_a_parse_gives(root, tmp_path):
    """Every definition made from the snapshot equals, field by field, the one the parse and checks make."""
    parsed = load_definitions(root)
    store = ParsedFiles(tmp_path / "cache", root)
    load_definitions(root, DefinitionsCache(store))
    store.save()
    kept = load_definitions(root, DefinitionsCache(ParsedFiles(tmp_path / "cache", root)))
    assert [_fields(d) for d in kept.tools] == [_fields(d) for d in parsed.tools]
    assert [(f.file, f.digest, f.problems, f.sources and len(f.sources)) for f in kept.files] == \
        [(f.file, f.digest, f.problems, f.sources and len(f.sources)) for f in parsed.files]
    assert [d.document.text for d in kept.tools] == [d.document.text for d in parsed.tools]


def test_a_restart_serves_from_the_snapshot_what_the_first_start_served(definitions, state, monkeypatch):
    """The second start parses nothing and serves the same catalog (version, schemas, listing entries)."""
    first = _start(definitions)
    assert _snapshot(state).exists()
    _no_parse(monkeypatch)
    again = _start(definitions)
    assert again.catalog.version == first.catalog.version
    assert [t.describe() for t in again.catalog.tools.values()] == [t.describe() for t in first.catalog.tools.values()]


def test_a_yaml_edit_between_runs_is_served(definitions, state):
    """A file edited while the gateway was down is parsed again and served as it is now."""
    _start(definitions)
    (definitions / "tools.yaml").write_text(TOOLS.replace("Looks something up.", "Finds it."), encoding="utf-8")
    again = _start(definitions)
    assert again.catalog.get("look").definition.ai_description == "Finds it."


def test_a_python_module_edit_between_runs_is_served(definitions, state):
    """A python/ module edited while the gateway was down is imported again: the derived schema is the new one."""
    first = _start(definitions)
    assert set(first.catalog.get("look").input_schema["properties"]) == {"query", "limit"}
    (definitions / "python" / "finder.py").write_text(MODULE.replace("limit: int = 10", "top: int = 3")
                                                      .replace('"limit": limit', '"top": top'), encoding="utf-8")
    again = _start(definitions)
    assert set(again.catalog.get("look").input_schema["properties"]) == {"query", "top"}
    assert again.catalog.version != first.catalog.version


def test_an_upgrade_never_reads_the_older_snapshot(definitions, state, monkeypatch):
    """Another gateway release or code (another code digest) parses every file again and removes the old snapshot."""
    _start(definitions)
    old = _snapshot(state)
    monkeypatch.setattr(buildcache_disk, "code_digest", lambda: "e" * 64)
    parsed = []
    real = buildcache_disk.ParsedFiles.put
    monkeypatch.setattr(buildcache_disk.ParsedFiles, "put", lambda self, *a: parsed.append(a) or real(self, *a))
    again = _start(definitions)
    assert len(parsed) == 1 and not old.exists() and _snapshot(state) != old
    assert again.catalog.get("look").definition.ai_description == "Looks something up."


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_corrupted_snapshot_is_never_served(definitions, state, caplog, damage):
    """A snapshot whose bytes say another thing (a description changed in place) or that was cut short is a
    warning: the files are parsed again, the catalog is the true one, and the snapshot is rewritten."""
    first = _start(definitions)
    snapshot = _snapshot(state)
    good = snapshot.read_bytes()
    assert b"Looks something up." in good
    snapshot.write_bytes(good.replace(b"Looks something up.", b"Deletes it all.....") if damage == "flipped"
                         else good[: len(good) // 2])
    with caplog.at_level(logging.WARNING, "gateway.catalog.disk_cache"):
        again = _start(definitions)
    assert "corrupted" in caplog.text
    assert again.catalog.get("look").definition.ai_description == "Looks something up."
    assert again.catalog.version == first.catalog.version
    assert b"Looks something up." in snapshot.read_bytes()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_state_directory_only_means_no_cache(definitions, state):
    """A state directory that cannot be written: the gateway starts and serves, every time."""
    state.mkdir()
    state.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert "look" in _start(definitions).catalog.tools
        assert "look" in _start(definitions).catalog.tools
    finally:
        state.chmod(stat.S_IRWXU)


def test_a_state_path_that_is_a_file_only_means_no_cache(definitions, state):
    """A state directory that cannot be made (a file stands in its way): the gateway starts and serves."""
    state.write_text("not a directory")
    assert "look" in _start(definitions).catalog.tools
    assert "look" in _start(definitions).catalog.tools


def test_an_edit_reloaded_while_serving_is_kept_for_the_next_start(definitions, state, monkeypatch):
    """A file a running gateway reloaded is written to the snapshot after the reload (in a thread of its own), so
    the next start parses nothing and serves the edit."""
    import asyncio
    import time

    from gateway.runtime import rebuild as runtime

    monkeypatch.setattr(runtime, "SAVE_DELAY_S", 0.0)
    gateway = _start(definitions)
    before = _snapshot(state).stat().st_mtime_ns
    (definitions / "tools.yaml").write_text(TOOLS.replace("Looks something up.", "Finds it."), encoding="utf-8")
    assert asyncio.run(gateway.reload()).changed
    deadline = time.monotonic() + 30
    while _snapshot(state).stat().st_mtime_ns == before and time.monotonic() < deadline:
        time.sleep(0.02)
    _no_parse(monkeypatch)
    assert _start(definitions).catalog.get("look").definition.ai_description == "Finds it."


def test_a_burst_of_reloads_is_written_to_the_snapshot_once_after_it(definitions, state, monkeypatch):
    """Edits reloaded one after another are kept with one write, once the reloads pause (a write each time had
    slowed the next reloads of a burst), and that write holds the last edit."""
    import asyncio
    import time

    from gateway.runtime import rebuild as runtime

    monkeypatch.setattr(runtime, "SAVE_DELAY_S", 1.0)
    gateway = _start(definitions)
    saves = []
    save = gateway.rebuilder._parsed.save
    monkeypatch.setattr(gateway.rebuilder._parsed, "save", lambda: (saves.append(time.monotonic()), save()))

    async def burst() -> None:
        for edit in range(4):
            (definitions / "tools.yaml").write_text(TOOLS.replace("Looks something up.", f"Edit {edit}."),
                                                    encoding="utf-8")
            assert (await gateway.reload()).changed

    asyncio.run(burst())
    deadline = time.monotonic() + 30
    while not saves and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(1.5)  # a second save, were one due, would have come by now
    assert len(saves) == 1
    _no_parse(monkeypatch)
    assert _start(definitions).catalog.get("look").definition.ai_description == "Edit 3."


def test_a_reload_whose_delayed_write_gets_no_thread_still_serves_and_the_next_one_writes(definitions, state,
                                                                                         monkeypatch):
    """A process out of threads when a reload asks for its delayed write: the reload's catalog is served all the
    same, and the next reload starts the write (nothing is left waiting for a saver that never ran)."""
    import asyncio

    from gateway import daemon
    from gateway.runtime import rebuild as runtime

    monkeypatch.setattr(runtime, "SAVE_DELAY_S", 0.0)
    gateway = _start(definitions)
    started = daemon.start
    refused = []

    def start(work, name):
        if name == "gateway-keep-parses" and not refused:
            refused.append(name)
            raise RuntimeError("can't start new thread")
        return started(work, name)

    monkeypatch.setattr(runtime.daemon, "start", start)
    saved = []
    save = gateway.rebuilder._parsed.save

    def save_then_say():
        # Said after the write, not before: the next start must find the snapshot complete.
        result = save()
        saved.append(True)
        return result

    monkeypatch.setattr(gateway.rebuilder._parsed, "save", save_then_say)

    async def edit(text: str) -> None:
        (definitions / "tools.yaml").write_text(TOOLS.replace("Looks something up.", text), encoding="utf-8")
        assert (await gateway.reload()).changed

    asyncio.run(edit("No thread."))
    assert refused and gateway.catalog.get("look").definition.ai_description == "No thread."
    asyncio.run(edit("A thread."))
    deadline = time.monotonic() + 30
    while not saved and time.monotonic() < deadline:
        time.sleep(0.02)
    assert saved
    _no_parse(monkeypatch)
    assert _start(definitions).catalog.get("look").definition.ai_description == "A thread."


def test_a_gateway_that_stops_keeps_the_edits_it_reloaded(definitions, state, monkeypatch):
    """An edit reloaded shortly before the gateway stops (before the delayed write) is written as it closes, so the
    next start parses nothing and serves the edit."""
    import asyncio

    gateway = _start(definitions)
    (definitions / "tools.yaml").write_text(TOOLS.replace("Looks something up.", "Stopped soon after."),
                                            encoding="utf-8")

    async def reload_then_stop() -> None:
        assert (await gateway.reload()).changed
        await gateway.aclose()

    asyncio.run(reload_then_stop())
    _no_parse(monkeypatch)
    assert _start(definitions).catalog.get("look").definition.ai_description == "Stopped soon after."
