"""No rebuild may wedge the reloader: a build past reload_timeout_s is abandoned and reported, later edits still
apply, the admin endpoint still answers, and signals still stop ``tool-gateway serve``."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from reload_support import tool_yaml, until, wait_until, write
from support import CONSOLE, free_port

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.runtime.gateway import Gateway
from gateway.settings import Settings

HANG = "import time\n\ntime.sleep({seconds})\n\n\ndef f() -> str:\n    return 'never'\n"
HUNG_TOOL = ("  - id: hung\n    name: hung\n    user_description: x\n    ai_description: x\n"
             "    binding: {python: \"hang:f\"}\n")


def settings_file(tmp_path: Path, **values: object) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text("".join(f"{key}: {value}\n" for key, value in values.items()))
    return path


def gateway_process(defs: Path, settings: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gateway", "--settings", str(settings), "serve", str(defs),
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def served(defs: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], httpx.Client]]:
    """`tool-gateway serve` on ``defs`` with a three-second reload budget, and a client for it; killed at teardown."""
    port = free_port()
    process = gateway_process(defs, settings_file(tmp_path, reload_timeout_s=3), port)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def up() -> bool:
        try:
            return http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(lambda: process.poll() is not None or up(), "the server to start", timeout=60)
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        yield process, http
    finally:
        http.close()
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=15)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_hung_rebuild_times_out_later_edits_apply_and_a_signal_stops_the_server(defs, served, stop):
    """A module whose import hangs: the rebuild times out on /status (ok false, timed_out, a problem), the admin
    endpoint answers, a fixed file is served while the hung build still runs, and a signal ends the process."""
    process, http = served
    write(defs / "python" / "hang.py", HANG.format(seconds=600))
    write(defs / "main.yaml", tool_yaml("echo") + HUNG_TOOL)

    def last_reload() -> dict:
        return http.get("/status").json()["last_reload"]

    wait_until(lambda: last_reload()["timed_out"], "the rebuild to time out")
    status = http.get("/status").json()
    assert status["last_reload_ok"] is False and status["tools"] == 1
    assert "reload timed out" in status["last_reload"]["problems"][0]["text"]

    answer = http.post("/admin/reload", auth=CONSOLE)
    assert answer.status_code == 422 and answer.json()["timed_out"]

    write(defs / "main.yaml", tool_yaml("echo", "fixed"))
    wait_until(lambda: "fixed" in {t["id"] for t in http.get("/tools").json()["tools"]}, "the fixed file served")
    assert last_reload()["ok"] and not last_reload()["timed_out"]
    assert http.post("/tools/fixed/call", json={"text": "hi"}).json()["result"] == "hi"

    process.send_signal(stop)
    process.wait(timeout=20)  # the hung build threads (still sleeping) must not keep the process alive


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_serve_while_its_first_build_hangs(defs, tmp_path, stop):
    """While the first build hangs in an import (its budget far away), SIGTERM or SIGINT ends `serve` at once."""
    started = defs / "python" / "started"
    write(defs / "python" / "hang.py", f"import pathlib\npathlib.Path({str(started)!r}).touch()\n"
          + HANG.format(seconds=600))
    write(defs / "main.yaml", tool_yaml("echo") + HUNG_TOOL)
    process = gateway_process(defs, settings_file(tmp_path, reload_timeout_s=600, import_timeout_s=600), free_port())
    try:
        wait_until(started.exists, "the hanging import to start", timeout=60)
        process.send_signal(stop)
        process.wait(timeout=20)
    finally:
        process.kill()
        process.communicate(timeout=15)


def test_first_build_past_the_budget_stops_serve_with_a_message(defs, tmp_path):
    """`serve` whose first build hangs exits 1 saying the build timed out, instead of never starting."""
    write(defs / "python" / "hang.py", HANG.format(seconds=600))
    write(defs / "main.yaml", tool_yaml("echo") + HUNG_TOOL)
    process = gateway_process(defs, settings_file(tmp_path, reload_timeout_s=1), free_port())
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 1
    assert "reload timed out" in stderr and "reload_timeout_s (1 s)" in stderr


async def test_abandoned_build_finishing_late_changes_nothing(defs):
    """A build abandoned mid-way that ends after newer builds neither swaps its catalog in nor spoils the caches:
    later reloads serve exactly what a fresh build of the files gives."""
    release = threading.Event()
    finished = threading.Event()

    class Stalling(Gateway):
        stall = False

        def _build(self):
            if not self.stall:
                return super()._build()
            self.stall = False
            try:
                old = super()._build()  # the files before the edit, with the caches this build was handed
                release.wait(30)
                return old
            finally:
                finished.set()

    gateway = Stalling(Settings(definitions=defs))
    generous = gateway.settings  # for every build but the stalled one: none may time out on a busy host
    gateway.settings, gateway.stall = replace(generous, reload_timeout_s=0.5), True
    timed_out = await gateway.reload()
    assert timed_out.timed_out and not timed_out.ok
    gateway.settings = generous
    write(defs / "main.yaml", tool_yaml("echo", "newer"))
    newer = await gateway.reload()
    assert newer.ok and newer.changed and "newer" in gateway.catalog.tools

    release.set()
    await until(finished.is_set, "the abandoned build to end")
    await asyncio.sleep(0.1)  # room for its result to reach the loop, where it must be dropped
    assert "newer" in gateway.catalog.tools
    write(defs / "main.yaml", tool_yaml("echo", "newer", "newest"))
    newest = await gateway.reload()
    offline = build_catalog(load_definitions(defs), Settings(definitions=defs))
    assert newest.ok and gateway.catalog.version == offline.version
    assert set(gateway.catalog.tools) == {"echo", "newer", "newest"}
    await gateway.aclose()


def test_gateway_without_a_first_catalog_in_time_raises_definitions_invalid(defs):
    """Constructing a Gateway whose first build outlasts reload_timeout_s raises DefinitionsInvalid (timed out)."""
    release = threading.Event()

    class Hanging(Gateway):
        def _build(self):
            release.wait(30)
            raise RuntimeError("released after the test: builds nothing")  # imports would reach the next test

    try:
        with pytest.raises(DefinitionsInvalid) as caught:
            Hanging(Settings(definitions=defs, reload_timeout_s=0.2))
        assert "reload timed out" in str(caught.value.problems[0])
    finally:
        release.set()


async def test_alias_bomb_dropped_into_a_served_directory_is_a_problem_and_later_edits_apply(defs, serve):
    """A billion-laughs file written next to served definitions fails its reload with a file:line:col problem on
    /status; deleting it and editing another file is then picked up as usual."""
    served = serve(defs)
    levels = ["&l0 [" + ", ".join(['"lol"'] * 9) + "]"]
    levels += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    write(defs / "bomb.yaml", tool_yaml("boom") + "    tags: [" + ", ".join(levels) + ", *l8]\n")
    await until(lambda: not served.gateway.last_reload.ok, "the bomb's reload to fail")
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        last = (await http.get("/status")).json()["last_reload"]
        assert [p["text"].split(":")[:2] for p in last["problems"]] == [["bomb.yaml", "7"]]
        assert "max_yaml_nodes" in last["problems"][0]["text"]

        (defs / "bomb.yaml").unlink()
        write(defs / "main.yaml", tool_yaml("echo", "after_bomb"))
        await until(lambda: "after_bomb" in served.gateway.catalog.tools, "the next edit served")
        assert (await http.get("/status")).json()["last_reload"]["ok"]
