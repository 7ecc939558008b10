"""This gateway against other MCP gateways on the same upstreams: the peer table of the docs' benchmarks page.

    python bench/bench_peers.py [--duration 5] [--rounds 3] [--tools 1000]
                                [--peer NAME=URL ...] [--list-peer NAME=URL ...]
                                [--upstream-port P] [--many-port P]

Never run by CI (minutes of wrk). Two scenarios, each on its own upstream (a process of its own, on uvicorn's plain
defaults: h11 and asyncio, PLAIN_UVICORN in server_processes.py; each system serves on its own defaults):

    call   MCP tools/call of ``echo`` on the tests' SDK server (``tests/fixtures/mcp_upstream/mcpserver_http.py``)
    list   MCP tools/list of an SDK server (``MCPServer``) holding ``--tools`` tools

and, per scenario, each system federating that upstream in a process of its own:

    direct                    the upstream itself: the ceiling (a 2025-11-25 session; ``direct 2026-07-28``:
                              stateless requests, the ceiling of the 2026-07-28 rows)
    tool-gateway              ``tool-gateway serve`` with ``sources: [{mcp: {url}}]`` (2025-11-25 sessions, and
                              2026-07-28 stateless requests in a row of their own)
    fastmcp proxy             FastMCP (the version installed, pinned by the test extra) ``create_proxy(url)``
    fastmcp proxy, one client the same proxy over one connected ``fastmcp.Client`` (its session reused)
    NAME                      each ``--peer NAME=URL`` (call) / ``--list-peer NAME=URL`` (list): an MCP endpoint
                              you started, federating the upstream on ``--upstream-port`` / ``--many-port``

Rows are interleaved round by round (the machine's other load weighs on each alike): wrk, one thread, 16
connections, pinned to the last CPU, each system behind one 2025-11-25 session. Per row: req/s best and median of
rounds (in whole answers: the gateway lists 500 tools a page, so its listing of 1,000 is two requests, counted
as one), p50/p99 latency of the best round (per request), the system's CPU per call (from /proc: processes this bench started),
and failures (answers not 2xx, socket errors; every system's answer is checked once before it is measured).

ContextForge (PyPI ``mcp-contextforge-gateway``) needs Python >= 3.12, which this machine's Debian lacks, so it is
a ``--peer``: run it on another interpreter with SQLite, auth off, its rate limit off and
``SSRF_ALLOW_LOCALHOST=true``, register ``http://127.0.0.1:<--upstream-port>/mcp`` as its gateway, and give its
virtual server's MCP URL here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import server_processes as servers

from gateway.server.mcp.handlers import PAGE_SIZE

REPO = Path(__file__).resolve().parent.parent
ECHO_UPSTREAM = REPO / "tests" / "fixtures" / "mcp_upstream" / "mcpserver_http.py"
LEGACY, MODERN = "2025-11-25", "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream"}


# -- servers (each in its own process: `bench_peers.py --serve KIND PORT ARG`) -----------------------------------

def serve_many(port: int, count: int) -> None:
    """An SDK server with ``count`` tools of two parameters each."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("many")
    for n in range(count):
        def tool(city: str, days: int = 1) -> str:
            return city * days
        tool.__doc__ = f"Forecast number {n}: the weather of a city for some days, from service {n}."
        server.tool(name=f"forecast_{n}")(tool)
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False,
                **servers.PLAIN_UVICORN)  # type: ignore[arg-type]


def serve_fastmcp_proxy(port: int, url: str, reuse: bool) -> None:
    from fastmcp import Client
    from fastmcp.server import create_proxy

    async def run() -> None:
        if not reuse:
            await create_proxy(url).run_async(transport="http", host="127.0.0.1", port=port, log_level="warning")
            return
        async with Client(url) as client:
            await create_proxy(client).run_async(transport="http", host="127.0.0.1", port=port, log_level="warning")

    asyncio.run(run())


# -- the bench --------------------------------------------------------------------------------------------------

class System:
    """One row: an MCP endpoint, the process serving it (None: a peer the operator started), its session."""

    def __init__(self, name: str, url: str, process: subprocess.Popen | None, revision: str = LEGACY,
                 paged: bool = False):
        self.name, self.url, self.process, self.revision = name, url, process, revision
        self.paged = paged  # it lists PAGE_SIZE tools a page: a whole listing is that many requests
        self.session: str | None = None

    def headers(self, method: str, name: str | None) -> dict[str, str]:
        headers = ACCEPT | {"MCP-Protocol-Version": self.revision}
        if self.revision == MODERN:
            headers |= {"Mcp-Method": method, **({"Mcp-Name": name} if name else {})}
        elif self.session:
            headers["Mcp-Session-Id"] = self.session
        return headers

    def open(self) -> None:
        if self.revision == MODERN:
            return
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench-peers", "version": "1"}}}
        answer = httpx.post(self.url, json=init, headers=ACCEPT, timeout=120)
        answer.raise_for_status()
        self.session = answer.headers.get("mcp-session-id")
        httpx.post(self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                   headers=self.headers("notifications/initialized", None), timeout=60)


def pages(system: System, method: str, tools: int) -> list[dict[str, Any]]:
    """The params of each request a whole answer takes: one, or one per page of the gateway's listing."""
    if method != "tools/list" or not system.paged:
        return [{}]
    return [{}, *({"cursor": str(start)} for start in range(PAGE_SIZE, tools, PAGE_SIZE))]


def message(system: System, method: str, params: dict[str, Any]) -> dict[str, Any]:
    if system.revision == MODERN:
        params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                      "io.modelcontextprotocol/clientCapabilities": {}}}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def check(system: System, method: str, params: dict[str, Any], expect: str) -> None:
    name = params.get("name")
    answer = httpx.post(system.url, json=message(system, method, params), headers=system.headers(method, name),
                        timeout=120)
    if answer.status_code != 200 or expect not in answer.text or '"isError":true' in answer.text.replace(" ", ""):
        raise SystemExit(f"{system.name} did not answer {method}: {answer.status_code} {answer.text[:300]}")


def measure(systems: list[System], method: str, params: dict[str, Any], duration: float, rounds: int, tools: int,
            tmp: Path) -> dict[str, dict[str, Any]]:
    """Per system, its wrk runs, with ``requests`` counted in whole answers (a paged listing's pages are one)."""
    rows: dict[str, dict[str, Any]] = {s.name: {"runs": [], "cpu": []} for s in systems}
    for _ in range(rounds):
        for system in systems:
            cpu = servers.cpu_seconds(system.process.pid) if system.process else None
            bodies = [message(system, method, params | page) for page in pages(system, method, tools)]
            run = servers.wrk_run(system.url, bodies, system.headers(method, params.get("name")), duration, tmp)
            run["requests"] /= len(bodies)
            rows[system.name]["runs"].append(run)
            if cpu is not None:
                rows[system.name]["cpu"].append((servers.cpu_seconds(system.process.pid) - cpu) / max(run["requests"], 1))
    return rows


def report(title: str, rows: dict[str, dict[str, Any]], duration: float) -> None:
    print(f"\n{title}")
    print(f"  {'':<28} {'req/s best':>10} {'median':>8} {'x direct':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'CPU/call ms':>11} {'failures':>8}")
    ceilings = {direct: max(run["requests"] for run in rows[direct]["runs"]) / duration
                for direct in ("direct", "direct 2026-07-28")}
    for name, row in rows.items():
        # A 2026-07-28 row against the upstream called on that revision too: what its client would get directly.
        ceiling = ceilings["direct 2026-07-28" if name.endswith("2026-07-28") else "direct"]
        best = max(row["runs"], key=lambda run: run["requests"])
        rates = [run["requests"] / duration for run in row["runs"]]
        cpu = f"{min(row['cpu']) * 1000:11.3f}" if row["cpu"] else f"{'-':>11}"
        print(f"  {name:<28} {max(rates):10.1f} {statistics.median(rates):8.1f} {max(rates) / ceiling:7.3f}x "
              f"{best['p50_ms']:8.2f} {best['p99_ms']:8.2f} {cpu} {sum(r['failures'] for r in row['runs']):8d}")


def scenario(kind: str, upstream_url: str, peers: list[str], args: argparse.Namespace, tmp: Path,
             processes: list[subprocess.Popen]) -> None:
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    systems = [System("direct", upstream_url, None), System("direct 2026-07-28", upstream_url, None, MODERN)]
    defs = tmp / f"defs-{kind}"
    defs.mkdir()
    (defs / "upstream.yaml").write_text(f"sources:\n  - id: upstream\n    mcp: {{url: '{upstream_url}'}}\n")
    port = servers.free_port()
    env = {**os.environ, "TOOL_GATEWAY_STATE_DIR": str(tmp / f"state-{kind}"), "TOOL_GATEWAY_LOG_LEVEL": "warning"}
    gateway = servers.spawn_gateway(defs, port, "--no-reload", env=env)
    processes.append(gateway)
    servers.wait_healthy(f"http://127.0.0.1:{port}/healthz", gateway, "the gateway", timeout_s=300)
    systems += [System("tool-gateway", f"http://127.0.0.1:{port}/mcp", gateway, paged=True),
                System("tool-gateway 2026-07-28", f"http://127.0.0.1:{port}/mcp", gateway, MODERN, paged=True)]
    for label, reuse in (("fastmcp proxy", "0"), ("fastmcp proxy, one client", "1")):
        proxy_port = servers.free_port()
        processes.append(subprocess.Popen([sys.executable, __file__, "--serve", "fastmcp-proxy", str(proxy_port),
                                           upstream_url, reuse], **quiet))
        servers.wait_listening(processes[-1], proxy_port, label, timeout_s=120)
        systems.append(System(label, f"http://127.0.0.1:{proxy_port}/mcp", processes[-1]))
    for peer in peers:
        name, _, url = peer.partition("=")
        systems.append(System(name, url, None))
    for system in systems:
        system.open()
    if kind == "call":
        method, params, expect = "tools/call", {"name": "echo", "arguments": {"text": "hello"}}, "hello"
    else:
        method, params, expect = "tools/list", {}, "forecast_0"
    for system in systems:
        check(system, method, params, expect)
    rows = measure(systems, method, params, args.duration, args.rounds, args.tools, tmp)
    title = ("MCP tools/call of an upstream tool" if kind == "call" else
             f"MCP tools/list of an upstream with {args.tools} tools")
    report(f"{title}: wrk 1 thread x 16 connections, {args.rounds} interleaved rounds x {args.duration:g} s, "
           f"load average {os.getloadavg()[0]:.2f}", rows, args.duration)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=URL")
    parser.add_argument("--list-peer", action="append", default=[], metavar="NAME=URL")
    parser.add_argument("--upstream-port", type=int, default=0)
    parser.add_argument("--many-port", type=int, default=0)
    args = parser.parse_args()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    processes: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            tmp = Path(scratch)
            echo_port = args.upstream_port or servers.free_port()
            processes.append(subprocess.Popen(servers.plain_uvicorn(ECHO_UPSTREAM, str(echo_port)), **quiet))
            servers.wait_listening(processes[-1], echo_port, "the echo upstream", timeout_s=60)
            scenario("call", f"http://127.0.0.1:{echo_port}/mcp", args.peer, args, tmp, processes)
            many_port = args.many_port or servers.free_port()
            processes.append(subprocess.Popen([sys.executable, __file__, "--serve", "many", str(many_port),
                                               str(args.tools)], **quiet))
            servers.wait_listening(processes[-1], many_port, "the many-tools upstream", timeout_s=120)
            scenario("list", f"http://127.0.0.1:{many_port}/mcp", args.list_peer, args, tmp, processes)
    finally:
        servers.stop(*reversed(processes), timeout_s=10, kill=True)  # open MCP streams would hold a graceful stop
    print(json.dumps({"python": sys.version.split()[0]}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        kind, port, extra = sys.argv[2], int(sys.argv[3]), sys.argv[4:]
        if kind == "many":
            serve_many(port, int(extra[0]))
        else:
            serve_fastmcp_proxy(port, extra[0], extra[1] == "1")
    else:
        main()
