"""The latency the gateway adds to a tool of an upstream MCP server: the same official ``mcp`` client calls the
upstream's tool directly, and through the gateway (``sources: [{mcp: {url}}]``, our ``/mcp`` → pooled session →
upstream), interleaved call by call in one run.

    python bench/bench_mcp_upstream.py [--calls 500]

The upstream (the tests' MCPServer — FastMCP — server, ``echo``) and the gateway (``tool-gateway serve``) each run in a
process of their own on 127.0.0.1; wall-clock latency per call, p50 and p90, and the p50 difference.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from mcp import Client

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO / "tests" / "fixtures" / "mcp_upstream" / "mcpserver_http.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise SystemExit(f"a server exited ({process.returncode})")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing listens on {port}")
        time.sleep(0.05)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


async def measure(direct_url: str, gateway_url: str, calls: int) -> dict[str, list[float]]:
    """Per call, in turn: the upstream directly, the upstream through the gateway, and a Python tool of the
    gateway (its own MCP serving, without the upstream hop: what the pooled session adds is the difference)."""
    paths = {"direct to the upstream": [], "through the gateway": [], "gateway, local python tool": []}
    async with Client(direct_url) as upstream, Client(gateway_url) as gateway:
        callers = list(zip(paths.values(), ((upstream, "echo"), (gateway, "echo"), (gateway, "local_echo")),
                           strict=True))
        for _ in range(50):  # warm every path: connections, the gateway's pooled session, caches
            for _, (client, tool) in callers:
                await client.call_tool(tool, {"text": "warm"})
        for _ in range(calls):
            for times, (client, tool) in callers:
                started = time.perf_counter()
                answer = await client.call_tool(tool, {"text": "hello"})
                times.append(time.perf_counter() - started)
                assert answer.content[0].text == "hello" and not answer.is_error, answer
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    upstream_port, gateway_port = free_port(), free_port()
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
            wait_listening(upstream_port, processes[-1])
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve", str(defs), "--port", str(gateway_port), "--no-reload"],
                env={**env, "TOOL_GATEWAY_LOG_LEVEL": "warning"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_listening(gateway_port, processes[-1])
            tools = httpx.get(f"http://127.0.0.1:{gateway_port}/tools").json()["tools"]
            assert any(tool["id"] == "echo" for tool in tools), "the gateway does not serve the upstream's tools"
            paths = asyncio.run(measure(f"http://127.0.0.1:{upstream_port}/mcp",
                                                  f"http://127.0.0.1:{gateway_port}/mcp", args.calls))
        finally:
            for process in reversed(processes):  # the gateway first: it holds a stream open to the upstream
                process.terminate()
                process.wait(20)
    ms = 1000
    print(f"{args.calls} calls of the upstream's 'echo', same mcp client, interleaved")
    print(f"{'path':<28} {'p50':>9} {'p90':>9} {'mean':>9}")
    for label, values in paths.items():
        print(f"{label:<28} {percentile(values, 0.5) * ms:>7.3f}ms {percentile(values, 0.9) * ms:>7.3f}ms "
              f"{statistics.fmean(values) * ms:>7.3f}ms")
    direct, through = paths["direct to the upstream"], paths["through the gateway"]
    added = (percentile(through, 0.5) - percentile(direct, 0.5)) * ms
    print(f"added by the gateway, p50: {added:.3f} ms")


if __name__ == "__main__":
    main()
