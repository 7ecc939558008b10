"""Issue 16's figures, each against a baseline measured in the same run, with the ratio printed.

    python bench/bench_speed.py [cold restart listing reload calls ...] [--tools 10000] [--reload-sizes 10000]

    cold      load + build of N tools (10 per file) in a fresh process, against PyYAML's bare C parse of the same
              files in a fresh process; wall and CPU seconds (CPU is immune to the other load on a shared box),
              and memory: the process's peak RSS added by load + build, per tool
    restart   `serve` start -> /healthz ok, three times in a row on one state directory: the first start fills
              the build cache, the others are warm restarts; baseline: the interpreter importing the server as
              `serve` does (the CLI first). Both run with Python's bytecode cache warm, as an installed wheel has
              it (an editable install under PYTHONDONTWRITEBYTECODE never has .pyc): PYTHONPYCACHEPREFIX in the
              bench's temp directory, filled by a first, untimed import (--no-pyc: as the environment says)
    listing   p50 of GET /tools (each ?format=) and of MCP tools/list (2026-07-28, stateless) on the restarted
              server with N tools, to the body's last byte: gzip as httpx asks by default (decoded, and the
              compressed bytes alone) and identity; baseline: GET /healthz on the same server
    reload    one file of 10 tools rewritten among each size, write -> served (bench_reload.py), against the
              watcher's own notice of a write (watchfiles, the reloader's step and debounce, no build)
    calls     wrk, 16 connections, best of 2 interleaved rounds x 5 s (--duration, --rounds): REST tools/sum/call
              and MCP tools/call on both revisions against a bare Starlette endpoint that reads JSON, adds, answers
              JSON on uvicorn's plain defaults (h11, asyncio; servers from bench_serving.py, each pinned to CPU 0;
              wrk on CPU 1); requests per second and per CPU-second of the server process; the same endpoint on
              httptools and uvloop, as the gateway runs; the MCP rows again on a gateway without the fast path
              (TOOL_GATEWAY_MCP_FAST=0), every request through the SDK. Targets (issue 29): REST >= 1.0x, MCP
              >= 0.8x the bare endpoint
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import ARGUMENTS, LEGACY, MODERN, Server
from generate import generate
from server_processes import cpu_seconds, free_port, spawn_gateway, stop, wait_healthy, wrk_requests

PROBE = r'''
import json, resource, sys, time
from pathlib import Path
root, stage = Path(sys.argv[1]), sys.argv[2]
import yaml
from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.settings import Settings
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
wall, cpu = time.perf_counter(), time.process_time()
if stage == "yaml":
    for path in sorted(root.glob("*.yaml")):
        yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)
else:
    catalog = build_catalog(load_definitions(root), Settings(definitions=root))
    assert len(catalog.tools) == int(sys.argv[3])
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "added_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before}))
'''


def _probe(root: Path, stage: str, count: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(root), stage, str(count)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def cold(root: Path, count: int, runs: int = 2) -> None:
    samples: dict[str, list[dict[str, float]]] = {"yaml": [], "build": []}
    for _ in range(runs):  # interleaved: noise hits both alike
        for stage, rows in samples.items():
            rows.append(_probe(root, stage, count))
    med = {stage: {k: statistics.median(s[k] for s in rows) for k in rows[0]} for stage, rows in samples.items()}
    base, ours = med["yaml"], med["build"]
    print(f"cold start, {count:,} tools in {count // 10:,} files, median of {runs} fresh processes")
    print(f"  bare PyYAML C parse    wall {base['wall']:6.2f} s  CPU {base['cpu']:6.2f} s")
    print(f"  load + build_catalog   wall {ours['wall']:6.2f} s  CPU {ours['cpu']:6.2f} s   "
          f"ratio wall {ours['wall'] / base['wall']:.2f}x, CPU {ours['cpu'] / base['cpu']:.2f}x  (target <= 2x)")
    print(f"  memory: peak RSS +{ours['added_kib'] / 1024:.0f} MiB = {ours['added_kib'] / count:.2f} KiB per tool "
          f"(target <= 4 KiB; the bare parse adds {base['added_kib'] / 1024:.0f} MiB and keeps nothing)")


def _bytecode_env(pycache: Path | None) -> dict[str, str]:
    """The environment with Python's bytecode cache in ``pycache`` (None: as it is)."""
    if pycache is None:
        return dict(os.environ)
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return environ | {"PYTHONPYCACHEPREFIX": str(pycache)}


def _serve(root: Path, state: Path, port: int, pycache: Path | None = None) -> subprocess.Popen:
    environ = _bytecode_env(pycache) | {"TOOL_GATEWAY_STATE_DIR": str(state), "TOOL_GATEWAY_LOG_LEVEL": "warning"}
    return spawn_gateway(root, port, "--no-reload", env=environ)


def restart(root: Path, count: int, state: Path, then: list | None = None, pycache: Path | None = None) -> None:
    # The CLI first, as `serve` imports it: it keeps httpx's command-line client (rich) out of the process.
    floor_command = [sys.executable, "-c", "import gateway.cli.main, gateway.server.app"]
    environ = _bytecode_env(pycache)
    if pycache is not None:
        subprocess.run(floor_command, check=True, env=environ)  # writes the .pyc files both runs then read
    floors = []
    for _ in range(3):
        started = time.perf_counter()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(floor_command, check=True, env=environ)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        floors.append((time.perf_counter() - started,
                       after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime))
    floor, floor_cpu = min(f[0] for f in floors), min(f[1] for f in floors)
    times, cpus = [], []
    for attempt in range(3):
        port = free_port()
        started = time.perf_counter()
        process = _serve(root, state, port, pycache)
        try:
            # Polled every 10 ms, with no deadline: the start-up is what is measured.
            healthy = wait_healthy(f"http://127.0.0.1:{port}/healthz", process, "the server", timeout_s=math.inf,
                                   poll_s=0.01)
            times.append(healthy - started)
            cpus.append(cpu_seconds(process.pid))
            listed = httpx.get(f"http://127.0.0.1:{port}/tools", timeout=60).json()["tools"]
            assert len(listed) == count, len(listed)
            if then and attempt == 2:
                for step in then:
                    step(port)
        finally:
            stop(process)
    print(f"serve start -> /healthz ok with {count:,} tools (full catalog checked), "
          f"{'.pyc warm' if pycache else 'bytecode cache as the environment has it'}")
    print(f"  baseline: interpreter + importing the server  {floor:6.2f} s wall, {floor_cpu:5.2f} s CPU (best of 3)")
    print(f"  first start (fills the build cache)           {times[0]:6.2f} s wall, {cpus[0]:5.2f} s CPU")
    print(f"  warm restarts                                 {min(times[1:]):6.2f} s wall, {min(cpus[1:]):5.2f} s CPU"
          f" (best of 2; the other {max(times[1:]):.2f} s, {max(cpus[1:]):.2f} s)")
    print(f"                                                "
          f"   = {min(cpus[1:]) / floor_cpu:.2f}x the import floor's CPU (target < 1 s)")


def _p50(send, rounds: int = 30) -> float:
    send()  # the first answer computes what is memoised
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        send()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _getter(client: httpx.Client, path: str, params: dict | None, how: str):
    """A GET of ``path`` timed to its last byte: ``gzip`` as httpx sends it by default (Accept-Encoding: gzip,
    ...), the body decoded; ``wire`` the same request, only the compressed bytes received; ``identity`` asking
    for the plain body. Returns (send, body size on the wire)."""
    headers = {"Accept-Encoding": "identity"} if how == "identity" else {}

    def send() -> int:
        with client.stream("GET", path, params=params, headers=headers) as response:
            response.raise_for_status()
            if how == "wire":
                return sum(len(chunk) for chunk in response.iter_raw())
            response.read()
            return response.num_bytes_downloaded
    return send, send()


def listing(port: int) -> None:
    from gateway.formats import FORMATS

    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
    print("listing p50 of 30 sequential requests, to the last byte of the body (target < 20 ms)")
    print(f"  {'':<34} {'gzip (httpx default)':>20} {'gzip, not decoded':>18} {'identity':>10}   bytes gzip / identity")
    print(f"  {'GET /healthz (baseline)':<34} {_p50(_getter(client, '/healthz', None, 'gzip')[0]):17.1f} ms")
    for fmt in (None, *FORMATS):
        params = {"format": fmt} if fmt else None
        timed = {how: _getter(client, "/tools", params, how) for how in ("gzip", "wire", "identity")}
        p50 = {how: _p50(send) for how, (send, _) in timed.items()}
        name = "GET /tools" + (f"?format={fmt}" if fmt else "")
        print(f"  {name:<34} {p50['gzip']:17.1f} ms {p50['wire']:15.1f} ms {p50['identity']:7.1f} ms   "
              f"{timed['gzip'][1] / 1024:,.0f} KiB / {timed['identity'][1] / 1024:,.0f} KiB")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
               "Mcp-Method": "tools/list"}

    def mcp_list() -> None:
        client.post("/mcp", json=body, headers=headers).raise_for_status()
    print(f"  {'MCP tools/list (2026-07-28)':<34} {_p50(mcp_list):17.1f} ms")
    client.close()


def reload(sizes: list[int], tmp: Path, edits: int = 5) -> None:
    import bench_reload

    # A first build of 100,000 tools outlasts the default reload_timeout_s (60 s) on a busy 2-core machine.
    os.environ.setdefault("TOOL_GATEWAY_RELOAD_TIMEOUT_S", "900")
    floor_dir = tmp / "floor"
    floor_dir.mkdir()
    floor = asyncio.run(bench_reload.watch_floor_ms(floor_dir, edits))
    print(f"reload: one file of 10 tools rewritten, median of {edits} edits; baseline: the watcher's own notice "
          f"{floor:.0f} ms")
    for count in sizes:
        root = generate(tmp / f"reload{count}", count)
        row = bench_reload.measure_server(root, edits)
        target = 100 if count <= 10_000 else 300
        print(f"  {count:>7,} tools: write -> served {row['served_ms']:6.0f} ms (min {row['served_min_ms']:.0f}), "
              f"rebuild {row['rebuild_ms']:.0f} ms, server CPU {row['cpu_ms']:.0f} ms, "
              f"{row['served_ms'] / floor:.1f}x the notice (target < {target} ms)")


def _session(port: int) -> str:
    accept = {"Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    # The server's first MCP session waits for the SDK, imported once the server is up (seconds on a busy box).
    answer = httpx.post(f"http://127.0.0.1:{port}/mcp", json=init, headers=accept, timeout=60)
    session = answer.headers["mcp-session-id"]
    httpx.post(f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
               headers=accept | {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY})
    return session


def calls(duration: float, rounds: int, tmp: Path) -> None:
    """Rows interleaved round by round (so the machine's other load weighs on every row alike); per row the best
    round's requests per second, and requests per CPU-second of the server process (from /proc: what one
    dedicated core would serve, immune to the other load)."""
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install -y wrk)")
    servers = {kind: Server(kind) for kind in ("bare", "bare-fast", "gateway")}
    # A second gateway without the fast paths: every MCP request through the SDK, every REST call through the route.
    os.environ["TOOL_GATEWAY_MCP_FAST"] = os.environ["TOOL_GATEWAY_REST_FAST"] = "0"
    try:
        servers["sdk"] = Server("gateway")
    finally:
        del os.environ["TOOL_GATEWAY_MCP_FAST"], os.environ["TOOL_GATEWAY_REST_FAST"]
    try:
        bare, gateway, sdk = servers["bare"], servers["gateway"], servers["sdk"]
        accept = {"Accept": "application/json, text/event-stream"}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sum", "arguments": ARGUMENTS}}
        modern = {**call, "params": {**call["params"], "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}}
        session, sdk_session = _session(gateway.port), _session(sdk.port)
        rows = {
            "bare Starlette /sum": (bare, "/sum", ARGUMENTS, {}),
            "  the same, httptools+uvloop": (servers["bare-fast"], "/sum", ARGUMENTS, {}),
            "REST /tools/sum/call": (gateway, "/tools/sum/call", ARGUMENTS, {}),
            "MCP tools/call 2025-11-25": (gateway, "/mcp", call, accept | {
                "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}),
            "MCP tools/call 2026-07-28": (gateway, "/mcp", modern, accept | {
                "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "sum"}),
            "  the same, REST route": (sdk, "/tools/sum/call", ARGUMENTS, {}),
            "  the same, SDK path 2025": (sdk, "/mcp", call, accept | {
                "Mcp-Session-Id": sdk_session, "MCP-Protocol-Version": LEGACY}),
            "  the same, SDK path 2026": (sdk, "/mcp", modern, accept | {
                "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "sum"}),
        }
        per_s = {name: 0.0 for name in rows}
        per_cpu = {name: 0.0 for name in rows}
        ratios: dict[str, list[float]] = {name: [] for name in rows}  # per round, to the bare row of that round
        for _ in range(rounds):
            this_round = {}
            for name, (server, path, body, headers) in rows.items():
                cpu = server.cpu_seconds()
                answered = wrk_requests(server.port, path, body, headers, duration, tmp)
                per_s[name] = max(per_s[name], answered / duration)
                this_round[name] = answered / max(server.cpu_seconds() - cpu, 1e-9)
                per_cpu[name] = max(per_cpu[name], this_round[name])
            for name in rows:
                ratios[name].append(this_round[name] / this_round["bare Starlette /sum"])
    finally:
        # SIGKILL: open MCP streams would hold a graceful stop for its whole grace period.
        stop(*(server.process for server in servers.values()), timeout_s=10, kill=True)
    base, base_cpu = per_s["bare Starlette /sum"], per_cpu["bare Starlette /sum"]
    print(f"tools/call with wrk, 16 connections, best of {rounds} interleaved rounds x {duration:g} s")
    print(f"  {'':<28} {'req/s':>8} {'x bare':>7}   {'req/CPU-s':>9} {'x bare':>7}   {'median of rounds':>16}")
    for name in rows:
        target = "" if name.startswith(("bare", " ")) else (" (target >= 1.0x)" if name.startswith("REST")
                                                            else " (target >= 0.8x)")
        print(f"  {name:<28} {per_s[name]:8.0f} {per_s[name] / base:6.2f}x   {per_cpu[name]:9.0f} "
              f"{per_cpu[name] / base_cpu:6.2f}x   {statistics.median(ratios[name]):15.2f}x{target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", nargs="*", default=["cold", "restart", "listing", "reload", "calls"])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--reload-sizes", default="10000", help="comma-separated, e.g. 10000,100000")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-pyc", dest="pyc", action="store_false",
                        help="restart: leave the bytecode cache as the environment has it (PYTHONDONTWRITEBYTECODE)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if {"cold", "restart", "listing"} & set(args.what):
            root = generate(tmp / "defs", args.tools)
        if "cold" in args.what:
            cold(root, args.tools)
        if "restart" in args.what or "listing" in args.what:
            then = [listing] if "listing" in args.what else []
            restart(root, args.tools, tmp / "state", then, tmp / "pycache" if args.pyc else None)
        if "reload" in args.what:
            reload([int(n) for n in args.reload_sizes.split(",")], tmp)
        if "calls" in args.what:
            calls(args.duration, args.rounds, tmp)


if __name__ == "__main__":
    main()
