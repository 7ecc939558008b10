"""Reload under load: tool calls never fail while the definitions are edited, broken and repaired underneath.

A real server (``python -m gateway serve``, watcher on) serves a small directory: ``stable.yaml`` (tools ``echo``
and ``add``, bound to ``python/soak_tools.py``), plus ``extra.yaml`` that comes and goes. Clients call ``echo`` and
``add`` at a steady rate, checking every answer, while an editor applies edits of every kind, spread evenly:

- ``valid``: stable.yaml rewritten with a new description;
- ``broken_yaml``: stable.yaml made unparsable (the last good catalog must keep serving);
- ``tool_added`` / ``tool_removed``: extra.yaml written / deleted;
- ``module_changed``: python/soak_tools.py rewritten (same functions, a new constant), so it is imported again;
- ``module_broken``: python/soak_tools.py given a syntax error.

A broken file is repaired by the next edit. A call fails when it does not answer 200 with the right, non-error
result (connection errors included). At the end a last edit of each visible kind (a description, the extra tool,
the module's VERSION, read back through a ``version`` tool) must be served within 30 s — the reloader kept up
and is not wedged — and the server's RSS is read before the load and after it.

    python bench/soak_reload.py                      # 20,000 calls over 60 s against 100 edits
    python bench/soak_reload.py --calls 2000 --duration 10 --edits 12

``tests/fuzz/test_soak_reload.py`` runs a few-second version in CI and asserts 0 failed calls.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

# The bench folder's modules, also when a test loads this file by its path.
sys.path.insert(0, str(Path(__file__).parent))
from server_processes import free_port, spawn_gateway, stop, wait_healthy

KINDS = ("valid", "broken_yaml", "tool_added", "module_changed", "tool_removed", "module_broken")
STABLE = """\
tools:
  - id: echo
    name: Echo
    user_description: "Echoes its text ({marker})."
    ai_description: Returns the text it is given.
    binding: {{python: "soak_tools:echo"}}
  - id: add
    name: Add
    user_description: Adds two integers.
    ai_description: Returns a + b.
    binding: {{python: "soak_tools:add"}}
  - id: version
    name: Version
    user_description: The module's VERSION.
    ai_description: Returns which edit of the module is loaded.
    binding: {{python: "soak_tools:version"}}
"""
BROKEN_YAML = "tools:\n  - id: echo\n    name: [unclosed\n"
EXTRA = """\
tools:
  - id: extra
    name: Extra
    user_description: A tool that comes and goes.
    ai_description: Returns its text.
    binding: {python: "soak_tools:echo"}
"""
MODULE = '''\
"""Tools of the reload soak; VERSION changes with every module edit."""

VERSION = {version}


def echo(text: str) -> str:
    return text


def add(a: int, b: int) -> int:
    return a + b


def version() -> int:
    return VERSION
'''
BROKEN_MODULE = "def echo(text: str) -> str\n    return text\n"


@dataclass
class SoakReport:
    calls: int = 0
    failed: int = 0
    failures: Counter[str] = field(default_factory=Counter)  # reason -> count
    edits: Counter[str] = field(default_factory=Counter)  # kind -> count
    duration_s: float = 0.0
    rss_before_kb: int = 0
    rss_after_kb: int = 0
    final_edit_served: bool = False
    last_reload_ok: bool = False
    # Reloads seen on /status (polled, so a reload that another follows within the poll interval is missed).
    reloads: Counter[str] = field(default_factory=Counter)  # "swapped" | "unchanged" | "refused" -> count

    def lines(self) -> list[str]:
        rate = self.calls / self.duration_s if self.duration_s else 0.0
        return [
            f"calls: {self.calls} in {self.duration_s:.1f} s ({rate:.0f}/s), failed: {self.failed}",
            *(f"  failure: {reason} x{count}" for reason, count in self.failures.most_common(10)),
            f"edits: {sum(self.edits.values())} ({', '.join(f'{k} {v}' for k, v in sorted(self.edits.items()))})",
            (f"reloads seen on /status: {self.reloads['swapped']} swapped in, {self.reloads['refused']} refused "
            f"(last good catalog kept), {self.reloads['unchanged']} unchanged"),
            f"final edit served: {self.final_edit_served}, last reload ok: {self.last_reload_ok}",
            (f"server RSS: {self.rss_before_kb / 1024:.1f} MB before, {self.rss_after_kb / 1024:.1f} MB after "
            f"({(self.rss_after_kb - self.rss_before_kb) / 1024:+.1f} MB)"),
        ]


class Definitions:
    """The soak's directory; each edit repairs what the previous one broke, then makes its own change."""

    def __init__(self, root: Path):
        self.root = root
        self.stable, self.extra, self.module = root / "stable.yaml", root / "extra.yaml", root / "python/soak_tools.py"
        self.module.parent.mkdir(parents=True)
        self.stable.write_text(STABLE.format(marker="initial"))
        self.module.write_text(MODULE.format(version=0))
        self.broken: list[tuple[Path, str]] = []

    def apply(self, kind: str, number: int) -> None:
        for path, good in self.broken:
            path.write_text(good)
        self.broken = []
        if kind == "valid":
            self.stable.write_text(STABLE.format(marker=f"edit {number}"))
        elif kind == "broken_yaml":
            self.broken.append((self.stable, self.stable.read_text()))
            self.stable.write_text(BROKEN_YAML)
        elif kind == "tool_added":
            self.extra.write_text(EXTRA)
        elif kind == "tool_removed":
            self.extra.unlink(missing_ok=True)
        elif kind == "module_changed":
            self.module.write_text(MODULE.format(version=number))
        elif kind == "module_broken":
            self.broken.append((self.module, self.module.read_text()))
            self.module.write_text(BROKEN_MODULE)
        else:
            raise ValueError(f"unknown edit kind {kind!r}")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def call_once(http: httpx.AsyncClient, number: int) -> str | None:
    """One call, checked; the reason it failed, or None."""
    if number % 2:
        tool, arguments, expected = "add", {"a": number, "b": 1}, number + 1
    else:
        tool, arguments, expected = "echo", {"text": f"call {number}"}, f"call {number}"
    try:
        answer = await http.post(f"/tools/{tool}/call", json=arguments)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"
    if answer.status_code != 200:
        return f"HTTP {answer.status_code}: {answer.text[:120]}"
    result = answer.json()
    if result["is_error"]:
        return f"is_error: {result['error'][:120]}"
    return None if result["result"] == expected else f"wrong result {result['result']!r}"


async def load(http: httpx.AsyncClient, calls: int, duration_s: float, concurrency: int, report: SoakReport) -> None:
    """``calls`` calls paced evenly over ``duration_s`` (faster is not possible when the server is slower)."""
    numbers = iter(range(calls))
    started = time.monotonic()

    async def worker() -> None:
        for number in numbers:
            await asyncio.sleep(max(0.0, started + number * duration_s / calls - time.monotonic()))
            reason = await call_once(http, number)
            report.calls += 1
            if reason is not None:
                report.failed += 1
                report.failures[reason] += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def edit(definitions: Definitions, edits: int, calls: int, duration_s: float, report: SoakReport) -> None:
    """``edits`` edits spread evenly over the time and over the calls: on a server slower than the pace, the
    edits wait for the calls, so every stretch of calls runs against edits."""
    started = time.monotonic()
    for number, kind in zip(range(edits), itertools.cycle(KINDS)):
        share = (number + 1) / (edits + 1)
        await asyncio.sleep(max(0.0, started + share * duration_s - time.monotonic()))
        while report.calls < share * calls:
            await asyncio.sleep(0.01)
        definitions.apply(kind, number)
        report.edits[kind] += 1


FINAL_VERSION = 10**6


async def final_edit_served(http: httpx.AsyncClient, definitions: Definitions, seconds: float) -> bool:
    """Repair, then a last edit of each visible kind; True once all of it is served (the reloader kept up)."""
    for kind, number in (("valid", FINAL_VERSION), ("tool_added", 0), ("module_changed", FINAL_VERSION)):
        definitions.apply(kind, number)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        echo, extra = await http.get("/tools/echo"), await http.get("/tools/extra")
        if echo.status_code == 200 and f"edit {FINAL_VERSION}" in echo.json()["user_description"] \
                and extra.status_code == 200:
            loaded = (await http.post("/tools/version/call")).json()
            if loaded["result"] == FINAL_VERSION:
                return True
        await asyncio.sleep(0.1)
    return False


async def watch_reloads(http: httpx.AsyncClient, report: SoakReport, stop: asyncio.Event) -> None:
    """Poll /status (admin details: auth is off and the caller is on loopback) and count the reloads seen."""
    seen: set[float] = set()
    while not stop.is_set():
        last = (await http.get("/status")).json()["last_reload"]
        if last["at"] not in seen:
            seen.add(last["at"])
            report.reloads["refused" if not last["ok"] else "swapped" if last["changed"] else "unchanged"] += 1
        await asyncio.sleep(0.05)


async def drive(url: str, pid: int, definitions: Definitions, calls: int, duration_s: float, edits: int,
                concurrency: int) -> SoakReport:
    report = SoakReport()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        for number in range(50):  # warm up: imports, first listings, connections
            await call_once(http, number)
        report.rss_before_kb = rss_kb(pid)
        started, stop = time.monotonic(), asyncio.Event()
        watcher = asyncio.create_task(watch_reloads(http, report, stop))
        await asyncio.gather(load(http, calls, duration_s, concurrency, report),
                             edit(definitions, edits, calls, duration_s, report))
        report.duration_s = time.monotonic() - started
        stop.set()
        await watcher
        report.final_edit_served = await final_edit_served(http, definitions, 30)
        report.last_reload_ok = (await http.get("/status")).json()["last_reload_ok"]
        report.rss_after_kb = rss_kb(pid)
    return report


def soak(calls: int = 20_000, duration_s: float = 60.0, edits: int = 100, concurrency: int = 16) -> SoakReport:
    """Run the soak against a fresh server in a subprocess; the server is stopped before this returns."""
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        definitions = Definitions(Path(tmp) / "defs")
        port = free_port()
        environ = os.environ | {"TOOL_GATEWAY_LOG_LEVEL": "warning"}
        server = spawn_gateway(definitions.root, port, env=environ)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url + "/healthz", server, "the server")
            return asyncio.run(drive(url, server.pid, definitions, calls, duration_s, edits, concurrency))
        finally:
            stop(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds to spread calls and edits over")
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    report = soak(args.calls, args.duration, args.edits, args.concurrency)
    print("\n".join(report.lines()))
    sys.exit(0 if report.failed == 0 and report.final_edit_served else 1)


if __name__ == "__main__":
    main()
