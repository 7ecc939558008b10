"""The latency the gateway adds to a tool of an upstream MCP server: the same official ``mcp`` client calls the
upstream's tool directly, and through the gateway (``sources: [{mcp: {url}}]``, our ``/mcp`` → pooled session →
upstream), with the gateway's own ``tools/call`` post (``gateway.upstream.mcp.fastcall``) and with the SDK's client call
(``TOOL_GATEWAY_MCP_UPSTREAM_FAST=0``), interleaved call by call in one run.

    python bench/bench_mcp_upstream.py [--calls 500]

The upstream (the tests' MCPServer — FastMCP — server, ``echo``) and three gateways (``tool-gateway serve``: fast
path, SDK path, and one serving a local Python tool, the cost of our own /mcp serving) each run in a process of
their own on 127.0.0.1; wall-clock latency per call (p50, p90), the p50 differences, and each gateway's CPU per
call (from /proc: what the machine's load does not inflate as much).
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
from mcp import Client
from server_processes import cpu_seconds, free_port, spawn_gateway, stop, wait_listening

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO / "tests" / "fixtures" / "mcp_upstream" / "mcpserver_http.py"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


PATHS = {"direct to the upstream": "echo", "gateway, fast path": "echo", "gateway, SDK call": "echo",
         "gateway, local python tool": "local_echo"}


async def measure(urls: dict[str, str], pids: dict[str, int], calls: int
                  ) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per call, in turn, each path of ``PATHS`` (the upstream directly, then through each gateway): wall times,
    and each gateway process's CPU seconds per call over the measured calls."""
    paths: dict[str, list[float]] = {label: [] for label in PATHS}
    async with contextlib.AsyncExitStack() as stack:
        clients = {label: await stack.enter_async_context(Client(url)) for label, url in urls.items()}
        for _ in range(50):  # warm every path: connections, the gateway's pooled session, caches
            for label, tool in PATHS.items():
                await clients[label].call_tool(tool, {"text": "warm"})
        cpu = {label: cpu_seconds(pid) for label, pid in pids.items()}
        for _ in range(calls):
            for label, tool in PATHS.items():
                started = time.perf_counter()
                answer = await clients[label].call_tool(tool, {"text": "hello"})
                paths[label].append(time.perf_counter() - started)
                assert answer.content[0].text == "hello" and not answer.is_error, answer
        cpu = {label: (cpu_seconds(pid) - cpu[label]) / calls for label, pid in pids.items()}
    return paths, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    upstream_port = free_port()
    ports = {label: free_port() for label in list(PATHS)[1:]}
    processes = []
    with tempfile.TemporaryDirectory() as scratch:
        defs = Path(scratch) / "defs"
        defs.mkdir()
        (defs / "upstream.yaml").write_text(
            f"sources:\n  - id: weather\n    mcp: {{url: 'http://127.0.0.1:{upstream_port}/mcp'}}\n"
            "tools:\n  - {id: local_echo, name: Echo, user_description: Echo., ai_description: Echo.,"
            " binding: {python: 'bench_echo:echo'}}\n")
        (defs / "python").mkdir()
        (defs / "python" / "bench_echo.py").write_text("def echo(text: str) -> str:\n    return text\n")
        env = {**os.environ, "TOOL_GATEWAY_STATE_DIR": str(Path(scratch) / "state")}
        try:
            processes.append(subprocess.Popen([sys.executable, str(UPSTREAM), str(upstream_port)],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_listening(processes[-1], upstream_port, "the upstream", timeout_s=60)
            pids = {}
            for label, port in ports.items():
                fast = "0" if label == "gateway, SDK call" else "1"
                processes.append(spawn_gateway(
                    defs, port, "--no-reload",
                    env={**env, "TOOL_GATEWAY_LOG_LEVEL": "warning", "TOOL_GATEWAY_MCP_UPSTREAM_FAST": fast}))
                pids[label] = processes[-1].pid
            for label, port in ports.items():
                wait_listening(processes[list(ports).index(label) + 1], port, label, timeout_s=60)
                tools = httpx.get(f"http://127.0.0.1:{port}/tools").json()["tools"]
                assert any(tool["id"] == "echo" for tool in tools), "a gateway does not serve the upstream's tools"
            urls = {"direct to the upstream": f"http://127.0.0.1:{upstream_port}/mcp",
                    **{label: f"http://127.0.0.1:{port}/mcp" for label, port in ports.items()}}
            paths, cpu = asyncio.run(measure(urls, pids, args.calls))
        finally:
            stop(*reversed(processes), timeout_s=20)  # the gateways first: they hold a stream open to the upstream
    ms = 1000
    print(f"{args.calls} calls of the upstream's 'echo', same mcp client, interleaved")
    print(f"{'path':<28} {'p50':>9} {'p90':>9} {'mean':>9} {'gateway CPU/call':>17}")
    for label, values in paths.items():
        used = f"{cpu[label] * ms:>15.3f}ms" if label in cpu else ""
        print(f"{label:<28} {percentile(values, 0.5) * ms:>7.3f}ms {percentile(values, 0.9) * ms:>7.3f}ms "
              f"{statistics.fmean(values) * ms:>7.3f}ms {used}")
    direct = percentile(paths["direct to the upstream"], 0.5)
    for label in ("gateway, fast path", "gateway, SDK call"):
        print(f"added by the gateway ({label.split(', ')[1]}), p50: {(percentile(paths[label], 0.5) - direct) * ms:.3f} ms")


if __name__ == "__main__":
    main()
