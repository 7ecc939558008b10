"""What one huge source costs the rest of the gateway: start-up, an unrelated call's latency while the source is
read and built, and peak memory, with a source of 100,000 tools against none, in one run.

    python bench/bench_big_source.py [--tools 100000] [--page 0] [--window 20] [--env NAME=VALUE ...]

Each case is a ``tool-gateway serve`` process of its own (``--no-reload``) whose definitions directory serves a
local Python tool (``local_echo``) and, but for the baseline, one source:

- ``no source``: the local tool only;
- ``mcp``: an upstream MCP server (``tests/fixtures/mcp_upstream/many_tools_http.py``) listing ``--tools`` tools,
  ``--page`` per page (0: all in one page);
- ``openapi``: a JSON OpenAPI document of ``--tools`` operations, fetched from a URL (``python -m http.server``):
  a document in the definitions directory past ``source_max_tools`` is an error that stops the start.

Measured: start-up (spawn until ``/healthz`` answers); then the gateway is sent SIGHUP (a rebuild that reads the
source again, as a reload or an upstream's list_changed does) and ``local_echo`` is called back to back for
``--window`` seconds: the slowest and the median call; peak RSS (``VmHWM`` from /proc) at the end; and how many
tools the source serves (``/status``). Ratios are against the baseline of the same run. ``--env`` passes settings
to every gateway (e.g. ``--env TOOL_GATEWAY_SOURCE_MAX_TOOLS=200000`` to measure a source within its bound).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from server_processes import free_port, spawn_gateway, stop, wait_healthy, wait_listening

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO / "tests" / "fixtures" / "mcp_upstream" / "many_tools_http.py"
LOCAL = ("tools:\n  - {id: local_echo, name: Echo, user_description: Echo., ai_description: Echo.,"
         " binding: {python: 'bench_echo:echo'}}\n")


def openapi_document(operations: int) -> str:
    """As small as an operation gets (a path and an operationId): 100,000 fit within max_file_bytes (8 MiB)."""
    paths = {f"/t/{n}": {"get": {"operationId": f"op_{n}"}} for n in range(operations)}
    return json.dumps({"openapi": "3.1.0", "info": {"title": "big", "version": "1"},
                       "servers": [{"url": "http://127.0.0.1:9"}], "paths": paths}, separators=(",", ":"))


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def run_case(defs: Path, env: dict[str, str], window: float) -> dict[str, float]:
    port = free_port()
    started = time.perf_counter()
    log = defs / "serve.log"
    with log.open("wb") as out:
        process = spawn_gateway(defs, port, "--no-reload", env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        startup = wait_healthy(f"{url}/healthz", process, "the gateway", timeout_s=math.inf, request_timeout_s=120,
                               log=log) - started
        process.send_signal(signal.SIGHUP)  # a rebuild reads the source again, now with the server's loop running
        latencies = []
        until = time.monotonic() + window
        with httpx.Client(timeout=120) as client:
            while time.monotonic() < until:
                begun = time.perf_counter()
                answer = client.post(f"{url}/tools/local_echo/call", json={"text": "hi"})
                latencies.append(time.perf_counter() - begun)
                assert answer.status_code == 200 and answer.json()["result"] == "hi", answer.text
            sources = client.get(f"{url}/status").json().get("sources") or [{}]
        return {"startup_s": startup, "max_call_s": max(latencies), "p50_call_s": statistics.median(latencies),
                "calls": len(latencies), "rss_mib": peak_rss_mib(process.pid),
                "served": sources[0].get("tools", 0), "error": sources[0].get("error")}
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--page", type=int, default=0, help="tools per tools/list page (0: one page)")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of calls after the SIGHUP")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    upstream_port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "TOOL_GATEWAY_STATE_DIR": str(Path(scratch) / "state"), "TOOL_GATEWAY_LOG_LEVEL": "warning",
               **dict(item.split("=", 1) for item in args.env)}
        document_port = free_port()
        cases = {"no source": "", "mcp": f"sources:\n  - id: big\n    mcp: {{url: 'http://127.0.0.1:{upstream_port}/mcp',"
                                          " connect_timeout_s: 60}\n",
                 "openapi": f"sources:\n  - id: big\n    openapi: {{url: 'http://127.0.0.1:{document_port}/big.json'}}\n"}
        (Path(scratch) / "big.json").write_text(openapi_document(args.tools))
        servers = [subprocess.Popen([sys.executable, str(UPSTREAM), str(upstream_port), str(args.tools),
                                     str(args.page or args.tools)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                   subprocess.Popen([sys.executable, "-m", "http.server", str(document_port), "--bind", "127.0.0.1",
                                     "--directory", scratch], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        results = {}
        try:
            wait_listening(servers[0], upstream_port, "the upstream", timeout_s=120)
            wait_listening(servers[1], document_port, "the OpenAPI document's server", timeout_s=120)
            for label, sources in cases.items():
                defs = Path(scratch) / label.replace(" ", "_")
                (defs / "python").mkdir(parents=True)
                (defs / "python" / "bench_echo.py").write_text("def echo(text: str) -> str:\n    return text\n")
                (defs / "tools.yaml").write_text(sources + LOCAL)
                results[label] = run_case(defs, env, args.window)
        finally:
            stop(*servers, timeout_s=20)
    base = results["no source"]
    print(f"one source of {args.tools:,} tools ({args.page or args.tools:,} per page) against none; "
          f"{args.window:g} s of local_echo calls after a SIGHUP")
    print(f"{'case':<10} {'start-up':>14} {'slowest call':>16} {'median call':>12} {'peak RSS':>18} {'served':>8}")
    for label, r in results.items():
        print(f"{label:<10} {r['startup_s']:>6.2f}s {r['startup_s'] / base['startup_s']:>5.1f}x "
              f"{r['max_call_s'] * 1000:>8.1f}ms {r['max_call_s'] / base['max_call_s']:>5.1f}x "
              f"{r['p50_call_s'] * 1000:>10.2f}ms {r['rss_mib']:>8.1f}MiB {r['rss_mib'] / base['rss_mib']:>5.1f}x "
              f"{r['served']:>8}")
        if label != "no source" and r["error"]:
            print(f"           error: {r['error']}")


if __name__ == "__main__":
    main()
