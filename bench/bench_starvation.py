"""Latency of an unrelated sync tool while another sync tool (or sync filter) hangs, against the same server idle.

    python bench/bench_starvation.py [--calls 300] [--hung 60] [--sleep 5] [--seconds 20] [--baseline SRC]
                                     [--hang-in tool|filter]

A gateway serves two sync Python tools in a process of its own (``tool-gateway serve``, uvicorn): ``hang``
sleeps ``--sleep`` seconds (5: the issue's case; 60: a tool that hangs) under a 1 s timeout, ``hello`` returns
at once (timeout 5 s). The probe calls ``hello`` over REST one call after another, ``--calls`` times (or for
``--seconds``, whichever ends first):

    idle   nothing else runs
    hung   another process keeps ``--hung`` calls of ``hang`` in flight, re-sending each as it times out

with default settings (``max_concurrent_calls_per_tool: 16``). ``--hang-in filter`` moves the hang into an
invocation filter: ``hang_filtered``'s sync filter sleeps, and the probe calls ``hello_filtered``, whose sync
filter only calls ``next()``. ``--baseline SRC`` runs the same against the gateway package of another source tree
as well, e.g. the code before the per-tool cap: ``git archive 8c68a6c | tar -x -C /tmp/before`` then
``--baseline /tmp/before``. The table gives p50 and p99 of the probed tool (ms), the hung/idle ratio of the
p50s, how many of its calls failed (timed out), and the server's thread count at the end of the phase.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from server_processes import free_port, spawn_gateway, stop, wait_healthy

REPO = Path(__file__).resolve().parent.parent
TOOLS_PY = '''
import time


def hang(seconds: float) -> str:
    time.sleep(seconds)
    return "late"


def hello() -> str:
    return "hello"


def hang_filter(call, next):
    time.sleep(call.arguments["seconds"])
    return next()


def pass_filter(call, next):
    return next()
'''
TOOLS_YAML = """
tools:
  - {id: hang, name: Hang, user_description: u, ai_description: a, timeout_s: 1, binding: {python: "starve:hang"}}
  - {id: hello, name: Hello, user_description: u, ai_description: a, timeout_s: 5, binding: {python: "starve:hello"}}
  - {id: hang_filtered, name: Hang filtered, user_description: u, ai_description: a, timeout_s: 1,
     binding: {python: "starve:hang"}, filters: ["starve:hang_filter"]}
  - {id: hello_filtered, name: Hello filtered, user_description: u, ai_description: a, timeout_s: 5,
     binding: {python: "starve:hello"}, filters: ["starve:pass_filter"]}
"""
# --hang-in: (the tool kept hung, the tool probed)
TOOLS = {"tool": ("hang", "hello"), "filter": ("hang_filtered", "hello_filtered")}


def start_gateway(definitions: Path, source: Path | None) -> tuple[subprocess.Popen, str]:
    """``tool-gateway serve`` on a free port, from ``source``'s gateway package when given."""
    port = free_port()
    env = {**os.environ, "TOOL_GATEWAY_LOG_LEVEL": "error"}
    process = spawn_gateway(definitions, port, "--no-reload", env=env, cwd=source or REPO)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url + "/healthz", process, "the gateway", timeout_s=30, poll_s=0.1)
    return process, url


async def keep_hung(url: str, hung: int, sleep: float, tool: str) -> None:
    """The load process: ``hung`` calls of ``tool`` in flight until killed."""
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=hung + 10)) as http:
        async def one() -> None:
            while True:
                # A kept-alive connection the server closed as this call reused it: send again, or the load ends.
                with contextlib.suppress(httpx.TransportError):
                    await http.post(f"/tools/{tool}/call", json={"seconds": sleep})

        await asyncio.gather(*(one() for _ in range(hung)))


def probe(http: httpx.Client, tool: str, calls: int, seconds: float) -> tuple[list[float], int]:
    """Latencies of sequential calls of ``tool``, and how many of them were errors."""
    samples: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    while len(samples) < calls and time.monotonic() < deadline:
        started = time.perf_counter()
        answer = http.post(f"/tools/{tool}/call", json={}).json()
        samples.append(time.perf_counter() - started)
        errors += bool(answer["is_error"])
    return samples, errors


def threads(process: subprocess.Popen) -> int:
    """The server process's thread count (Linux)."""
    status = Path(f"/proc/{process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def run(definitions: Path, source: Path | None, args: argparse.Namespace
        ) -> dict[str, tuple[list[float], int, int]]:
    process, url = start_gateway(definitions, source)
    probed = TOOLS[args.hang_in][1]
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            for _ in range(20):  # warm-up: connection, first calls
                http.post(f"/tools/{probed}/call", json={})
            results = {"idle": (*probe(http, probed, args.calls, args.seconds), threads(process))}
            load = subprocess.Popen([sys.executable, __file__, "--load", url, "--hung", str(args.hung),
                                     "--sleep", str(args.sleep), "--hang-in", args.hang_in])
            try:
                time.sleep(min(args.sleep, 5) + 1)  # past the first sleeps: the hung calls hold what they will hold
                results["hung"] = (*probe(http, probed, args.calls, args.seconds), threads(process))
            finally:
                load.kill()
                load.wait(10)
        return results
    finally:
        # SIGKILL: the hung calls' threads would hold a graceful exit until they return, which measures nothing.
        stop(process, timeout_s=10, kill=True)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--hung", type=int, default=60)
    parser.add_argument("--sleep", type=float, default=5, help="how long each call of 'hang' sleeps")
    parser.add_argument("--seconds", type=float, default=20, help="longest a probe phase runs")
    parser.add_argument("--baseline", type=Path, help="also run the gateway package of this source tree")
    parser.add_argument("--hang-in", choices=sorted(TOOLS), default="tool",
                        help="whether a sync tool or a sync filter hangs (and is probed)")
    parser.add_argument("--load", help=argparse.SUPPRESS)  # internal: be the load process for this url
    args = parser.parse_args()
    if args.load:
        asyncio.run(keep_hung(args.load, args.hung, args.sleep, TOOLS[args.hang_in][0]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        definitions = Path(tmp)
        (definitions / "python").mkdir()
        (definitions / "python" / "starve.py").write_text(TOOLS_PY)
        (definitions / "tools.yaml").write_text(TOOLS_YAML)
        hung, probed = TOOLS[args.hang_in]
        print(f"'{probed}' over REST while {args.hung} calls of '{hung}' (its {args.hang_in} sleeps {args.sleep:g} s, "
              f"timeout 1 s) are in flight (ms)")
        print(f"{'server':<18} {'phase':<5} {'calls':>6} {'p50':>8} {'p99':>8} {'errors':>6} {'p50 ratio':>9} "
              f"{'threads':>7}")
        servers = {"this tree": None} | ({"baseline": args.baseline} if args.baseline else {})
        for label, source in servers.items():
            results = run(definitions, source, args)
            idle_p50 = statistics.median(results["idle"][0])
            for phase, (samples, errors, count) in results.items():
                p50 = statistics.median(samples)
                ratio = f"{p50 / idle_p50:9.2f}" if phase == "hung" else ""
                print(f"{label:<18} {phase:<5} {len(samples):>6} {p50 * 1000:8.2f} "
                      f"{percentile(samples, 0.99) * 1000:8.2f} {errors:>6} {ratio:>9} {count:>7}")


if __name__ == "__main__":
    main()
