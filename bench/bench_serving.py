"""Throughput of tools/call: the gateway's REST and MCP surfaces against a bare Starlette endpoint and FastMCP.

    python bench/bench_serving.py [--concurrency 16] [--duration 2] [--rounds 3]

Each server runs in its own process pinned to one CPU; the load generator runs in another process on the other
CPU (when there are two): ``--concurrency`` keep-alive connections, each sending its next request as soon as
the last answer is in, for a 1 s warm-up and ``--duration`` seconds. Rows are interleaved over ``--rounds``
rounds and the medians reported, so that whatever else runs on the machine weighs on every row alike. Every
row does the same work — the ``sum`` tool, ``math_tools.add`` from the shipped examples, a=1, b=2 — and every
answer is checked (status 200, result 3.0, no error flag).

    bare          Starlette POST /sum: read JSON, call add, answer JSON (the floor of any Python HTTP tool), on
                  uvicorn's plain defaults (h11, asyncio: PLAIN_UVICORN), as is FastMCP below; the gateway runs on
                  httptools and uvloop (its defaults). ``serve bare-fast`` is the same endpoint on those too
    bare thread   the same, calling add in Starlette's thread pool (run_in_threadpool), as Starlette runs sync
                  code and as the gateway runs sync tools: off the event loop, which a blocking tool would stall
    rest          the gateway, POST /tools/sum/call
    mcp 2025      the gateway's /mcp, one 2025-11-25 session per connection (initialize handshake first)
    fastmcp 2025  MCPServer (the SDK's FastMCP) with default settings, same sessions
    mcp 2026      the gateway's /mcp, 2026-07-28 stateless requests (envelope in _meta, no session)
    fastmcp 2026  MCPServer, same requests

Two measures per row: calls/s as the load generator saw them, and calls per CPU-second of the server process
(from /proc), which is what one dedicated core would serve and is immune to other load on the machine.
Targets: rest >= 0.5 x bare; mcp >= 2 x fastmcp (per protocol revision).
The load generator speaks HTTP/1.1 over raw asyncio streams so that it is not the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from server_processes import PLAIN_UVICORN, cpu_seconds, free_port, stop, wait_listening

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tool-definitions"
ARGUMENTS = {"a": 1, "b": 2}
EXPECTED = b"3.0"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


# -- servers (each in its own process: `bench_serving.py serve <kind> <port>`) ------------------------------------

def serve(kind: str, port: int) -> None:
    import uvicorn

    _pin(0)
    if kind == "gateway":
        from gateway.server import serve as serve_gateway
        from gateway.settings import Settings

        definitions = Path(tempfile.mkdtemp()) / "tool-definitions"
        shutil.copytree(EXAMPLES, definitions, ignore=shutil.ignore_patterns("__pycache__"))
        serve_gateway(Settings(definitions=definitions, port=port, reload=False, log_level="warning"))
        return
    sys.path.insert(0, str(EXAMPLES / "python"))
    from math_tools import add

    if kind in ("bare", "bare-fast"):
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def call_sum(request: Request) -> JSONResponse:
            arguments = await request.json()
            return JSONResponse({"result": add(float(arguments["a"]), float(arguments["b"]))})

        async def call_sum_in_thread(request: Request) -> JSONResponse:
            arguments = await request.json()
            result = await run_in_threadpool(add, float(arguments["a"]), float(arguments["b"]))
            return JSONResponse({"result": result})

        app = Starlette(routes=[Route("/sum", call_sum, methods=["POST"]),
                                Route("/sum-in-thread", call_sum_in_thread, methods=["POST"])])
    else:
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("bench")

        @server.tool(name="sum")
        def call_sum(a: float, b: float) -> float:
            """Returns a + b."""
            return add(a, b)

        app = server.streamable_http_app()
    stack = {"http": "httptools", "loop": "uvloop"} if kind == "bare-fast" else PLAIN_UVICORN
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, **stack)  # type: ignore[arg-type]


def _pin(cpu: int) -> None:
    """Servers on CPU 0, the load generator on CPU 1: neither steals the other's core."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})


# -- the load generator (`bench_serving.py load <scenario> <port> <concurrency> <duration>`) ---------------------

@dataclass(frozen=True)
class Scenario:
    path: str
    protocol: str | None  # None: plain REST; else the MCP revision spoken

    def call(self, host: str, request_id: int, session: str | None) -> bytes:
        if self.protocol is None:
            return _post(host, self.path, json.dumps(ARGUMENTS).encode(), _credentials())
        params: dict = {"name": "sum", "arguments": ARGUMENTS}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": self.protocol}
        if self.protocol == MODERN:
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                               "io.modelcontextprotocol/clientCapabilities": {}}
            headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "sum"}
        if session:
            headers["Mcp-Session-Id"] = session
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return _post(host, self.path, json.dumps(body).encode(), headers)


SCENARIOS = {
    "bare": ("bare", Scenario("/sum", None)),
    "bare thread": ("bare", Scenario("/sum-in-thread", None)),
    "rest": ("gateway", Scenario("/tools/sum/call", None)),
    "mcp 2025": ("gateway", Scenario("/mcp", LEGACY)),
    "fastmcp 2025": ("fastmcp", Scenario("/mcp", LEGACY)),
    "mcp 2026": ("gateway", Scenario("/mcp", MODERN)),
    "fastmcp 2026": ("fastmcp", Scenario("/mcp", MODERN)),
}


def _credentials() -> dict[str, str]:
    """``Authorization`` for a bench whose gateway needs one (bench_identity.py): its value in BENCH_AUTHORIZATION."""
    value = os.environ.get("BENCH_AUTHORIZATION")
    return {"Authorization": value} if value else {}


def _post(host: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    body = bytearray()
    if headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            body += (await reader.readexactly(size + 2))[:-2]
        await reader.readuntil(b"\r\n")
    return status, headers, bytes(body)


async def _initialize(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str) -> str:
    """The 2025-11-25 handshake on this connection; returns the session id."""
    accept = {"Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    writer.write(_post(host, path, json.dumps(init).encode(), accept))
    _, headers, _ = await _response(reader)
    session = headers["mcp-session-id"]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    writer.write(_post(host, path, json.dumps(done).encode(),
                       accept | {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}))
    await _response(reader)
    return session


async def _connection(scenario: Scenario, port: int, until: float, warm_until: float, tally: list[int]) -> None:
    host = f"127.0.0.1:{port}"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    session = await _initialize(reader, writer, host, scenario.path) if scenario.protocol == LEGACY else None
    request_id = 1
    while (now := time.perf_counter()) < until:
        writer.write(scenario.call(host, request_id, session))
        status, _, body = await _response(reader)
        good = status == 200 and EXPECTED in body and b'"isError":true' not in body and b'"is_error":true' not in body
        if now >= warm_until:
            tally[0 if good else 1] += 1
        tally[2] += 1
        request_id += 1
    writer.close()


async def _load(scenario: Scenario, port: int, concurrency: int, duration: float) -> dict[str, float]:
    warm_until = time.perf_counter() + 1.0
    until = warm_until + duration
    tally = [0, 0, 0]  # good and bad answers after the warm-up; every answer
    await asyncio.gather(*(_connection(scenario, port, until, warm_until, tally) for _ in range(concurrency)))
    return {"ok": tally[0], "errors": tally[1], "per_s": tally[0] / duration, "calls": tally[2]}


def load(name: str, port: int, concurrency: int, duration: float) -> None:
    _pin(1)
    print(json.dumps(asyncio.run(_load(SCENARIOS[name][1], port, concurrency, duration))))


# -- the run -----------------------------------------------------------------------------------------------------

class Server:
    """One server process for the whole run; rows against it are interleaved with the others' rows."""

    def __init__(self, kind: str):
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, __file__, "serve", kind, str(self.port)],
                                        stderr=subprocess.DEVNULL)
        wait_listening(self.process, self.port, f"{kind} server")

    def cpu_seconds(self) -> float:
        """User + system CPU time the server process has used (from /proc: immune to other load on the box)."""
        return cpu_seconds(self.process.pid)

    def stop(self) -> None:
        stop(self.process, timeout_s=10)


def measure(server: Server, name: str, concurrency: int, duration: float) -> dict[str, float]:
    cpu = server.cpu_seconds()
    out = subprocess.run([sys.executable, __file__, "load", name, str(server.port), str(concurrency), str(duration)],
                         check=True, capture_output=True, text=True)
    result = json.loads(out.stdout)
    # Calls per second of server CPU: the throughput one dedicated core would give (the warm-up's calls and CPU
    # are both left in, so the ratio stays honest).
    result["per_cpu_s"] = result["calls"] / max(server.cpu_seconds() - cpu, 1e-9)
    return result


def add_load_options(parser: argparse.ArgumentParser) -> None:
    """How ``measure`` loads each row: these options mean the same in every bench built on it."""
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per row and round, after warm-up")
    parser.add_argument("--rounds", type=int, default=3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("kind", choices=["gateway", "bare", "bare-fast", "fastmcp"])
    serve_cmd.add_argument("port", type=int)
    load_cmd = sub.add_parser("load")
    load_cmd.add_argument("scenario", choices=list(SCENARIOS))
    load_cmd.add_argument("port", type=int)
    load_cmd.add_argument("concurrency", type=int)
    load_cmd.add_argument("duration", type=float)
    add_load_options(parser)
    args = parser.parse_args()
    if args.command == "serve":
        return serve(args.kind, args.port)
    if args.command == "load":
        return load(args.scenario, args.port, args.concurrency, args.duration)

    servers = {kind: Server(kind) for kind in ("bare", "gateway", "fastmcp")}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in SCENARIOS}
    try:
        for _ in range(args.rounds):  # interleaved, so that noise from the rest of the box hits every row alike
            for name, (kind, _scenario) in SCENARIOS.items():
                runs[name].append(measure(servers[kind], name, args.concurrency, args.duration))
    finally:
        for server in servers.values():
            server.stop()

    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[name])

    print(f"tools/call, {args.concurrency} connections, {args.rounds} x {args.duration:g} s per row, "
          f"{len(os.sched_getaffinity(0))} CPUs, medians")
    print(f"{'row':<14} {'calls/s':>9} {'calls/CPU-s':>12} {'errors':>7}")
    for name in SCENARIOS:
        errors = sum(run["errors"] for run in runs[name])
        print(f"{name:<14} {median(name, 'per_s'):>9.0f} {median(name, 'per_cpu_s'):>12.0f} {errors:>7}")
    print()
    print(f"{'ratio':<24} {'calls/s':>8} {'calls/CPU-s':>12}  target")
    for ours, baseline, target in (("rest", "bare", 0.5), ("rest", "bare thread", 0.5),
                                   ("mcp 2025", "fastmcp 2025", 2.0),
                                   ("mcp 2026", "fastmcp 2026", 2.0)):
        wall = median(ours, "per_s") / median(baseline, "per_s")
        cpu = median(ours, "per_cpu_s") / median(baseline, "per_cpu_s")
        print(f"{ours + ' / ' + baseline:<24} {wall:>7.2f}x {cpu:>11.2f}x  >= {target:g}x")


if __name__ == "__main__":
    main()
