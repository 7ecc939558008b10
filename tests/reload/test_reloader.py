"""The reloader in process: what the watcher picks up, what a rebuild swaps, logs and tells listeners."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from reload_support import PROBE, tool_yaml, until, write

from gateway.catalog.snapshot import Catalog
from gateway.context import CallContext
from gateway.invoke import invoke
from gateway.runtime.gateway import Gateway
from gateway.runtime.reload import Reloader, reloading
from gateway.settings import Settings


class Recorder:
    """A change listener that keeps the catalogs it was told about."""

    def __init__(self) -> None:
        self.catalogs: list[Catalog] = []

    async def __call__(self, catalog: Catalog) -> None:
        self.catalogs.append(catalog)


@pytest.fixture
def bytecode_cache(monkeypatch):
    """Python writes and trusts __pycache__ as in production (the test environment may turn it off)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


@pytest.fixture
async def watched(defs: Path) -> AsyncIterator[tuple[Gateway, Reloader, Recorder]]:
    """A gateway over ``defs`` with its reloader running and a listener recording changes."""
    gateway = Gateway(Settings(definitions=defs))
    recorder = Recorder()
    gateway.on_change(recorder)
    reloader = Reloader(gateway)
    built = gateway.last_reload.at  # the first build's
    await reloader.start()
    # The watch's first rebuild (covering anything written before it began) is a no-op: wait it out, or it may
    # read a test's first write and leave the rebuild the watcher then makes with nothing to change.
    await until(lambda: gateway.last_reload.at > built and reloader.watched, "the watch to start")
    yield gateway, reloader, recorder
    await reloader.stop()
    await gateway.aclose()


async def next_reload(gateway: Gateway, after: float) -> None:
    await until(lambda: gateway.last_reload.at > after, "a rebuild")


async def test_valid_edit_swaps_catalog_and_tells_listeners_once(watched, defs):
    """Adding a tool to a file serves a catalog with it, and the listener hears of that catalog exactly once."""
    gateway, _, recorder = watched
    write(defs / "main.yaml", tool_yaml("echo", "echo_two"))
    await until(lambda: "echo_two" in gateway.catalog.tools, "the new tool")
    assert [c.version for c in recorder.catalogs] == [gateway.catalog.version]
    assert gateway.last_reload.ok and gateway.last_reload.changed


async def test_rewrite_with_same_bytes_rebuilds_but_notifies_no_one(watched, defs):
    """Writing a file's own bytes again triggers a rebuild whose content hash is unchanged: no swap, no listener."""
    gateway, _, recorder = watched
    before, served = gateway.last_reload.at, gateway.catalog
    write(defs / "main.yaml", (defs / "main.yaml").read_text())
    await next_reload(gateway, before)
    assert gateway.catalog is served
    assert gateway.last_reload.ok and not gateway.last_reload.changed
    assert recorder.catalogs == []


async def test_invalid_edit_keeps_serving_logs_each_problem_once_and_next_good_build_clears_it(watched, defs, caplog):
    """A broken file changes nothing served, is reported as file:line:col once per problem, and a fix clears it."""
    gateway, _, recorder = watched
    served = gateway.catalog
    caplog.set_level(logging.INFO, logger="gateway")
    broken = tool_yaml("echo") + "  - id: 'bad id'\n    name: x\n"
    write(defs / "main.yaml", broken)
    await until(lambda: not gateway.last_reload.ok, "the failed rebuild")
    problems = gateway.last_reload.problems
    assert problems and all(p.file == "main.yaml" and p.line >= 6 for p in problems)
    assert gateway.catalog is served and recorder.catalogs == []
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged == [f"reload failed: {p}" for p in problems]
    assert gateway.last_reload.as_dict()["problems"][0]["text"].startswith(f"main.yaml:{problems[0].line}:")

    write(defs / "main.yaml", tool_yaml("echo", "fixed"))
    await until(lambda: gateway.last_reload.ok, "the good rebuild")
    assert "fixed" in gateway.catalog.tools and gateway.last_reload.problems == ()


async def test_deleted_and_renamed_and_new_files_are_reflected(watched, defs):
    """A new file adds its tools, a rename keeps them, a deletion removes them."""
    gateway, _, _ = watched
    write(defs / "extra.yaml", tool_yaml("extra"))
    await until(lambda: "extra" in gateway.catalog.tools, "the new file's tool")
    (defs / "sub").mkdir()
    os.rename(defs / "extra.yaml", defs / "sub" / "moved.yaml")
    await until(lambda: gateway.catalog.tools["extra"].definition.file == "sub/moved.yaml", "the renamed file")
    (defs / "sub" / "moved.yaml").unlink()
    await until(lambda: "extra" not in gateway.catalog.tools, "the deleted file's tool to go")
    assert set(gateway.catalog.tools) == {"echo"}


async def test_changed_python_module_is_reimported_and_old_catalog_keeps_its_function(bytecode_cache, watched, defs):
    """Editing python/ re-imports the module for the new catalog, even when the edit keeps the file's size and
    mtime second (where Python would trust its cached bytecode); the old catalog still runs the old function."""
    gateway, _, _ = watched
    write(defs / "main.yaml", tool_yaml("version", function="version"))
    await until(lambda: "version" in gateway.catalog.tools, "the version tool")
    old = gateway.catalog
    assert (await invoke(old, "version", {}, CallContext())).value == "v1"
    module = defs / "python" / "reload_probe.py"
    first = module.stat()
    write(module, PROBE.format(version="v2"))  # same size as v1
    os.utime(module, ns=(first.st_atime_ns, first.st_mtime_ns))  # and the same mtime: an edit within a second
    await until(lambda: gateway.catalog is not old, "the catalog with the new module")
    assert (await invoke(gateway.catalog, "version", {}, CallContext())).value == "v2"
    assert (await invoke(old, "version", {}, CallContext())).value == "v1"


async def test_configmap_data_symlink_swap_is_picked_up(tmp_path):
    """A Kubernetes ConfigMap update (new ..<timestamp> dir, ..data link renamed over it, old dir removed) reloads."""
    root = tmp_path / "configmap"
    first = root / "..2026_01_01_00_00_00.1"
    write(first / "main.yaml", tool_yaml("echo"))
    write(first / "python" / "reload_probe.py", PROBE.format(version="v1"))
    os.symlink(first.name, root / "..data")
    os.symlink("..data/main.yaml", root / "main.yaml")
    os.symlink("..data/python", root / "python")
    gateway = Gateway(Settings(definitions=root))
    async with reloading(gateway):
        second = root / "..2026_01_01_00_01_00.2"
        write(second / "main.yaml", tool_yaml("echo", "from_configmap"))
        write(second / "python" / "reload_probe.py", PROBE.format(version="v2"))
        os.symlink(second.name, root / "..data_tmp")
        os.replace(root / "..data_tmp", root / "..data")  # the atomic swap kubelet does
        for path in sorted(first.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        first.rmdir()
        await until(lambda: "from_configmap" in gateway.catalog.tools, "the swapped ConfigMap content")
        assert gateway.last_reload.ok
    await gateway.aclose()


async def test_swapped_definitions_symlink_is_followed(tmp_path):
    """When the definitions path is a symlink repointed elsewhere, the new target is served and then watched."""
    for release in ("v1", "v2"):
        write(tmp_path / release / "python" / "reload_probe.py", PROBE.format(version=release))
        write(tmp_path / release / "main.yaml", tool_yaml(f"from_{release}"))
    link = tmp_path / "current"
    os.symlink("v1", link)
    gateway = Gateway(Settings(definitions=link))
    async with reloading(gateway) as reloader:
        await until(lambda: reloader.watched, "the watch to start")
        os.symlink("v2", tmp_path / "current.new")
        os.replace(tmp_path / "current.new", link)
        await until(lambda: "from_v2" in gateway.catalog.tools, "the new release")
        await until(lambda: (tmp_path / "v2").resolve() in reloader.watched, "the watch to move")
        write(tmp_path / "v2" / "main.yaml", tool_yaml("from_v2", "edited"))
        await until(lambda: "edited" in gateway.catalog.tools, "an edit in the new target")
    await gateway.aclose()


async def test_polling_mode_picks_up_edits(defs):
    """With reload_poll (file systems without inotify), edits are still picked up."""
    gateway = Gateway(Settings(definitions=defs, reload_poll=True))
    async with reloading(gateway) as reloader:
        assert reloader.poll
        write(defs / "main.yaml", tool_yaml("echo", "polled"))
        await until(lambda: "polled" in gateway.catalog.tools, "the polled edit")
    await gateway.aclose()


async def test_no_reload_watches_nothing_and_sighup_still_rebuilds(defs):
    """With reload off nothing is watched, yet SIGHUP rebuilds: the edit appears only after the signal."""
    gateway = Gateway(Settings(definitions=defs, reload=False))
    async with reloading(gateway) as reloader:
        assert reloader.watched == ()
        write(defs / "main.yaml", tool_yaml("echo", "after_hup"))
        assert "after_hup" not in gateway.catalog.tools
        os.kill(os.getpid(), signal.SIGHUP)
        await until(lambda: "after_hup" in gateway.catalog.tools, "the SIGHUP rebuild")
    await gateway.aclose()


async def test_concurrent_reload_calls_share_builds(defs):
    """Twenty reload() calls at once run at most two builds, and every caller gets a successful outcome."""
    builds = 0

    class Counting(Gateway):
        def _build(self) -> Catalog:
            nonlocal builds
            builds += 1
            return super()._build()

    gateway = Counting(Settings(definitions=defs))
    builds = 0
    outcomes = await asyncio.gather(*(gateway.reload() for _ in range(20)))
    assert all(o.ok for o in outcomes)
    assert 1 <= builds <= 2
    await gateway.aclose()


async def test_unexpected_build_error_keeps_serving_and_is_reported(defs):
    """A build that crashes (not a definitions problem) leaves the catalog serving and reports the error."""

    class Crashing(Gateway):
        crash = False

        def _build(self) -> Catalog:
            if self.crash:
                raise RuntimeError("disk on fire")
            return super()._build()

    gateway = Crashing(Settings(definitions=defs))
    served = gateway.catalog
    gateway.crash = True
    outcome = await gateway.reload()
    assert not outcome.ok and gateway.catalog is served
    assert "RuntimeError: disk on fire" in str(outcome.problems[0])
    gateway.crash = False
    assert (await gateway.reload()).ok
    await gateway.aclose()
