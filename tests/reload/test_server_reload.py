"""Hot reload through the real server: traffic during edits, /status, ETags, POST /admin/reload, the CLI's SIGHUP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from reload_support import PROBE, tool_yaml, wait_until, write
from support import free_port

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.settings import ApiKey, Settings, hash_key

ADMIN_KEY = "reload-admin-key"
READER_KEY = "reload-reader-key"


def configmap(directory: Path, stamp: str, files: dict[str, str]) -> None:
    """Publish ``files`` in ``directory`` the way kubelet updates a ConfigMap volume: new timestamped directory,
    ``..data`` swapped to it in one rename, user-visible names linked through ``..data``, old directory removed."""
    target = directory / f"..{stamp}"
    for name, text in files.items():
        write(target / name, text)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    os.symlink(target.name, directory / "..data_tmp")
    os.replace(directory / "..data_tmp", directory / "..data")
    for name in files:
        if not (directory / name).is_symlink():
            os.symlink(f"..data/{name}", directory / name)
    for stale in {p.name for p in directory.iterdir() if p.is_symlink() and not p.name.startswith("..")} - set(files):
        (directory / stale).unlink()
    if old:
        for path in sorted((directory / old).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (directory / old).rmdir()


class Observer:
    """Reads what the server serves: its tool ids and its last reload (admin view of /status)."""

    def __init__(self, http: httpx.AsyncClient):
        self.http = http

    async def status(self) -> dict[str, Any]:
        return (await self.http.get("/status")).raise_for_status().json()

    async def ids(self) -> set[str]:
        return {tool["id"] for tool in (await self.http.get("/tools")).raise_for_status().json()["tools"]}

    async def settled(self, ids: set[str], after: float, *, version_was: str | None = None) -> dict[str, Any]:
        """Wait until a successful rebuild after ``after`` serves exactly ``ids`` (under a version other than
        ``version_was``, when the edit changes no id); return /status."""
        state: dict[str, Any] = {}

        async def check() -> bool:
            state.update(await self.status())
            last = state["last_reload"]
            return (last["at"] > after and last["ok"] and state["version"] != version_was
                    and await self.ids() == ids)

        await until_async(check, f"the server to serve {sorted(ids)}")
        return state

    async def failing(self, file: str, words: str, after: float, serving: set[str]) -> dict[str, Any]:
        """Wait until /status reports the failed rebuild (a problem in ``file`` saying ``words``); meanwhile the
        last good tools keep being served."""
        state: dict[str, Any] = {}

        async def check() -> bool:
            state.update(await self.status())
            last = state["last_reload"]
            return last["at"] > after and not last["ok"]

        await until_async(check, f"/status to report the problem in {file}")
        problems = state["last_reload"]["problems"]
        assert not state["last_reload_ok"]
        assert any(p["file"] == file and words in p["message"] for p in problems), problems
        assert all(p["text"] == f"{p['file']}:{p['line']}:{p['column']}: {p['message']}" for p in problems)
        assert await self.ids() == serving
        return state


def at(state: dict[str, Any]) -> float:
    """When the reload shown in a /status body ran."""
    return state["last_reload"]["at"]


async def until_async(check: Any, what: str, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_clients_see_no_failures_while_definitions_change(defs, serve):
    """Four clients call and list tools while files are edited, broken, added, renamed, deleted, re-imported and
    swapped ConfigMap-style: no request fails but calls of tools the edits removed, each invalid state shows on
    /status while it lasts, and the final catalog is exactly the files' last valid state."""
    configmap(defs / "cm", "2026_01_01_00_00_00.0", {"cm.yaml": tool_yaml("cm_start")})
    served = serve(defs)
    stop = asyncio.Event()
    failures: list[str] = []
    requests = 0

    async def client(n: int) -> None:
        nonlocal requests
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            while not stop.is_set():
                call = await http.post("/tools/echo/call", json={"text": f"client {n}"})
                body = call.json()
                if call.status_code != 200 or body["is_error"] or body["result"] != f"client {n}":
                    failures.append(f"echo: {call.status_code} {call.text}")
                listing = await http.get("/tools")
                if listing.status_code != 200 or "echo" not in {t["id"] for t in listing.json()["tools"]}:
                    failures.append(f"listing: {listing.status_code}")
                # A tool the edits add and remove: only "unknown tool" may be caused by the edit itself.
                volatile = await http.post("/tools/x0/call", json={"text": "v"})
                if volatile.status_code not in (200, 404) or (volatile.status_code == 200 and volatile.json()["is_error"]):
                    failures.append(f"volatile: {volatile.status_code} {volatile.text}")
                requests += 3

    clients = [asyncio.create_task(client(n)) for n in range(4)]
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        see = Observer(http)
        ids = {"echo", "cm_start"}
        configmap_tool = "cm_start"
        for k in range(3):
            state = await see.settled(ids, 0)

            write(defs / "main.yaml", tool_yaml("echo", f"a{k}"))
            ids = ids - {f"b{k - 1}"} | {f"a{k}"}
            state = await see.settled(ids, at(state))

            write(defs / "main.yaml", tool_yaml("echo") + "  - id: 'not an id'\n    name: x\n")
            state = await see.failing("main.yaml", "not an id", at(state), ids)

            write(defs / "main.yaml", tool_yaml("echo", f"b{k}"))
            ids = ids - {f"a{k}"} | {f"b{k}"}
            state = await see.settled(ids, at(state))

            write(defs / "extra.yaml", tool_yaml(f"x{k}"))
            state = await see.settled(ids | {f"x{k}"}, at(state))

            (defs / "sub").mkdir(exist_ok=True)
            os.rename(defs / "extra.yaml", defs / "sub" / f"renamed{k}.yaml")
            # Where a tool is declared is part of the catalog: a rename is a new version.
            state = await see.settled(ids | {f"x{k}"}, at(state), version_was=state["version"])

            (defs / "sub" / f"renamed{k}.yaml").unlink()
            state = await see.settled(ids, at(state))

            write(defs / "python" / "reload_probe.py", "def echo(text: str) -> str:\n    return (\n")
            state = await see.failing("main.yaml", "syntax error", at(state), ids)

            write(defs / "python" / "reload_probe.py", PROBE.format(version=f"round {k}"))
            state = await see.settled(ids, at(state), version_was=state["version"])

            new_tool = f"cm{k}"
            configmap(defs / "cm", f"2026_01_01_00_0{k + 1}_00.{k + 1}", {"cm.yaml": tool_yaml(new_tool)})
            ids = ids - {configmap_tool} | {new_tool}
            configmap_tool = new_tool
            state = await see.settled(ids, at(state))

            version = state["version"]
            write(defs / "main.yaml", (defs / "main.yaml").read_text())
            state = await see.settled(ids, at(state))
            assert state["version"] == version and not state["last_reload"]["changed"]
        final = await see.status()
    stop.set()
    await asyncio.gather(*clients)

    assert failures == []
    assert requests > 100
    offline = build_catalog(load_definitions(defs), Settings(definitions=defs))
    assert final["version"] == offline.version == served.gateway.catalog.version
    assert set(served.gateway.catalog.tools) == set(offline.tools) == ids


async def test_a_symlink_loop_is_a_problem_at_its_path_and_the_last_good_tools_stay_served(defs, serve):
    """Links that lead round in the definitions directory (a.yaml -> b.yaml -> a.yaml, a link to itself) are
    problems at each link naming the way round, on /status (the reload failed as a bare `OSError`), and the last
    good tools stay served; once they are gone the next reload serves again. A directory linked to its parent is
    walked once, not a problem."""
    served = serve(defs)
    async with httpx.AsyncClient(base_url=served.url) as http:
        see = Observer(http)
        state = await see.settled({"echo"}, 0)
        os.symlink("b.yaml", defs / "a.yaml")
        os.symlink("a.yaml", defs / "b.yaml")
        os.symlink("self.yaml", defs / "self.yaml")
        state = await see.failing("a.yaml", "(Too many levels of symbolic links: a.yaml -> b.yaml -> a.yaml): "
                                  "not loaded", at(state), {"echo"})
        messages = {p["file"]: p["message"] for p in state["last_reload"]["problems"]}
        assert set(messages) == {"a.yaml", "b.yaml", "self.yaml"}, messages
        assert "self.yaml -> self.yaml" in messages["self.yaml"], messages
        for name in messages:
            (defs / name).unlink()
        write(defs / "sub" / "more.yaml", tool_yaml("more"))
        os.symlink("..", defs / "sub" / "up")
        await see.settled({"echo", "more"}, at(state))


async def test_listing_etag_changes_with_the_catalog_version(defs, serve):
    """GET /tools answers 304 to its own ETag until a reload changes the version, then 200 with the new ETag."""
    served = serve(defs)
    async with httpx.AsyncClient(base_url=served.url) as http:
        first = await http.get("/tools")
        etag = first.headers["etag"]
        assert etag == f'"{served.gateway.catalog.version}"'
        assert (await http.get("/tools", headers={"If-None-Match": etag})).status_code == 304
        assert (await http.get("/tools/echo", headers={"If-None-Match": etag})).status_code == 304

        write(defs / "main.yaml", tool_yaml("echo", "tagged"))
        changed: dict[str, httpx.Response] = {}

        async def modified() -> bool:
            changed["r"] = await http.get("/tools", headers={"If-None-Match": etag})
            return changed["r"].status_code == 200

        await until_async(modified, "the listing to change")
        new_etag = changed["r"].headers["etag"]
        assert new_etag != etag and new_etag == f'"{served.gateway.catalog.version}"'
        assert "tagged" in {t["id"] for t in changed["r"].json()["tools"]}
        assert (await http.get("/tools", headers={"If-None-Match": new_etag})).status_code == 304
        assert (await http.get("/tools/echo", headers={"If-None-Match": etag})).status_code == 200


async def test_admin_reload_needs_the_admin_key_and_answers_with_the_outcome(defs, serve):
    """POST /admin/reload: 401 without a key, 403 with a non-admin key; with the admin key it rebuilds and
    answers the outcome: unchanged, changed with the new version, or 422 with every problem as file:line:col."""
    keys = (ApiKey("admin", hash_key(ADMIN_KEY), admin=True), ApiKey("reader", hash_key(READER_KEY)))
    served = serve(defs, api_keys=keys, reload=False)  # only the admin endpoint rebuilds here
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx.AsyncClient(base_url=served.url) as http:
        assert (await http.post("/admin/reload")).status_code == 401
        assert (await http.post("/admin/reload", headers={"Authorization": f"Bearer {READER_KEY}"})).status_code == 403
        assert (await http.post("/admin/reload", headers={"Authorization": "Bearer wrong"})).status_code == 401

        same = await http.post("/admin/reload", headers=admin)
        assert same.status_code == 200
        assert same.json()["ok"] and not same.json()["changed"]

        write(defs / "main.yaml", tool_yaml("echo", "by_admin"))
        changed = await http.post("/admin/reload", headers=admin)
        assert changed.status_code == 200 and changed.json()["changed"]
        assert changed.json()["version"] == served.gateway.catalog.version
        tools = (await http.get("/tools", headers=admin)).json()["tools"]
        assert "by_admin" in {t["id"] for t in tools}

        write(defs / "main.yaml", tool_yaml("echo") + "  - id: 'not an id'\n    name: x\n")
        failed = await http.post("/admin/reload", headers=admin)
        assert failed.status_code == 422
        body = failed.json()
        assert not body["ok"] and body["version"] == changed.json()["version"]
        assert body["problems"] and all(p["text"].startswith("main.yaml:") for p in body["problems"])
        status = (await http.get("/status", headers=admin)).json()
        assert status["last_reload"]["problems"] == body["problems"]


def test_cli_server_without_reload_rebuilds_on_sighup(defs):
    """`tool-gateway serve --no-reload` leaves an edit unserved until SIGHUP, which rebuilds the catalog."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "gateway", "serve", str(defs), "--port", str(port), "--no-reload"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:

            def up() -> bool:
                try:
                    return http.get("/healthz").status_code == 200
                except httpx.TransportError:
                    return False

            def ids() -> set[str]:
                return {t["id"] for t in http.get("/tools").json()["tools"]}

            wait_until(lambda: process.poll() is not None or up(), "the CLI server to start", timeout=60)
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            write(defs / "main.yaml", tool_yaml("echo", "hup"))
            assert "hup" not in ids()  # nothing watches: only the signal can rebuild
            process.send_signal(signal.SIGHUP)
            wait_until(lambda: "hup" in ids(), "the SIGHUP rebuild")
    finally:
        process.terminate()
        process.communicate(timeout=15)  # reaps it and closes its pipe
