"""Hot reload latency: from writing one definitions file to the new catalog being served, at 100 and 10,000 tools.

For each size a real server (``python -m gateway serve``, watcher on) serves a generated directory (10 tools per
file, ``generate.py``). One file of ten tools is rewritten, as an editor saves it; "write → served" is the time
until ``GET /tools/{id}`` of one of its tools answers with a new ETag (the catalog version). The server's own
rebuild time comes from ``/status``; "full listing" is the time until the complete ``GET /tools`` body of the new
catalog has arrived; "server CPU" is the CPU time the server process spent from the write until the new
version answered (the rebuild and the answers to the polls): unlike wall time, other load on the machine does
not inflate it. Medians over the edits.

Baselines, measured in the same run:

- watch floor: the time from the same kind of write to ``watchfiles`` reporting it with the reloader's
  step/debounce and no build at all, which any watchfiles-based reload pays;
- full rebuild: ``load_definitions`` + ``build_catalog`` from scratch (no caches), which a reload would cost
  without the incremental build.

    python bench/bench_reload.py [EDITS]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from watchfiles import awatch

sys.path.insert(0, str(Path(__file__).parent))
from generate import generate, write_file
from server_processes import cpu_seconds, free_port, spawn_gateway, stop, wait_healthy

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.runtime.reload import DEBOUNCE_MS, STEP_MS
from gateway.settings import Settings

SIZES = (100, 10_000)
EDITED_FILE = 3  # tools_00003.yaml: tools 30-39
# Between polls. Each poll is a request the server answers while it rebuilds, and the rebuild thread waits for the
# GIL behind it: polling every 5 ms (200 requests/s) measured 113 ms write -> served at 10,000 tools where 20 ms
# polls measured 51 ms. A poll every 20 ms overstates write -> served by up to 20 ms, never understates it.
POLL_S = 0.02


def full_rebuild_s(root: Path) -> float:
    started = time.perf_counter()
    build_catalog(load_definitions(root), Settings(definitions=root))
    return time.perf_counter() - started


async def watch_floor_ms(directory: Path, edits: int) -> float:
    """Median time from a write to watchfiles yielding it, with the reloader's step and debounce."""
    samples = []
    stop = asyncio.Event()
    written: list[float] = []
    seen: asyncio.Queue[float] = asyncio.Queue()

    async def watch() -> None:
        async for _ in awatch(directory, step=STEP_MS, debounce=DEBOUNCE_MS, stop_event=stop):
            seen.put_nowait(time.perf_counter())

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.5)  # let the watch start (a benchmark, not a test: nothing to poll for)
    for edit in range(edits):
        written.append(time.perf_counter())
        write_file(directory, 0, marker=f"floor {edit}")
        samples.append((await seen.get()) - written[-1])
    stop.set()
    await task
    return statistics.median(samples) * 1000


def measure_server(root: Path, edits: int) -> dict[str, float]:
    port = free_port()
    environ = os.environ | {"TOOL_GATEWAY_LOG_LEVEL": "warning"}
    # The server's output beside the definitions, not among them: the watcher would take each line for an edit.
    log = root.parent / f"{root.name}-serve.log"
    with log.open("wb") as out:
        server = spawn_gateway(root, port, env=environ, stderr=out)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/healthz", server, "the server", timeout_s=300, request_timeout_s=60,
                     log=log)
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        tool = f"/tools/tool_{EDITED_FILE * 10}"
        served, rebuilt, listed, cpu = [], [], [], []
        time.sleep(0.5)  # the watch's first (no-op) rebuild
        for edit in range(edits):
            etag = http.get(tool).headers["etag"]
            started, cpu_before = time.perf_counter(), cpu_seconds(server.pid)
            write_file(root, EDITED_FILE, marker=f"edit {edit}")
            while http.get(tool, headers={"If-None-Match": etag}).status_code == 304:
                time.sleep(POLL_S)
            served.append(time.perf_counter() - started)
            cpu.append(cpu_seconds(server.pid) - cpu_before)
            listing = http.get("/tools")
            listed.append(time.perf_counter() - started)
            assert listing.headers["etag"] != etag
            rebuilt.append(http.get("/status").json()["last_reload"]["duration_ms"] / 1000)
        http.close()
    finally:
        stop(server)
    return {"served_ms": statistics.median(served) * 1000, "served_min_ms": min(served) * 1000,
            "served_max_ms": max(served) * 1000, "rebuild_ms": statistics.median(rebuilt) * 1000,
            "listing_ms": statistics.median(listed) * 1000, "cpu_ms": statistics.median(cpu) * 1000}


def main() -> None:
    edits = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        floor_dir = Path(tmp) / "floor"
        floor_dir.mkdir()
        floor = asyncio.run(watch_floor_ms(floor_dir, edits))
        for count in SIZES:
            root = generate(Path(tmp) / f"tools{count}", count)
            full = full_rebuild_s(root)
            rows.append((count, measure_server(root, edits), full))
    print(f"one file of 10 tools rewritten, median of {edits} edits; watcher step {STEP_MS} ms; "
          f"watch floor (write → watchfiles, no build): {floor:.0f} ms")
    print(f"{'tools':>6} {'write→served ms':>16} {'(min–max)':>12} {'rebuild ms':>11} {'full listing ms':>16} "
          f"{'x floor':>8} {'full rebuild s':>15} {'speed-up':>9}")
    for count, row, full in rows:
        span = f"{row['served_min_ms']:.0f}–{row['served_max_ms']:.0f}"
        print(f"{count:>6} {row['served_ms']:>16.0f} {span:>12} {row['rebuild_ms']:>11.0f} {row['listing_ms']:>16.0f} "
              f"{row['served_ms'] / floor:>8.1f} {full:>15.2f} {full * 1000 / row['rebuild_ms']:>9.0f}x")
    largest = rows[-1][1]["served_ms"]
    print(f"target < 300 ms write → served at {SIZES[-1]:,} tools: {'met' if largest < 300 else 'NOT met'} "
          f"({largest:.0f} ms)")


if __name__ == "__main__":
    main()
