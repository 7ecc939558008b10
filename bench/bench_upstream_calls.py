"""Issue 29's ratios: a tool whose work is another service's, called through the gateway, against calling that
service directly, with wrk, in the same run.

    python bench/bench_upstream_calls.py [--duration 5] [--rounds 3]

Two upstreams, each in a process of its own on uvicorn's plain defaults (h11, asyncio: PLAIN_UVICORN in
server_processes.py, as the issue measured them; the gateway runs on httptools and uvloop, its own defaults):

    echo      a bare Starlette ``POST /echo`` that answers the JSON it was sent
    mcp       the tests' SDK server (``tests/fixtures/mcp_upstream/mcpserver_http.py``), its ``echo`` tool

and one gateway (``tool-gateway serve``) serving a YAML HTTP-bound tool on the first (``echo_http``: POST, a JSON
body from the arguments, the answer's ``text`` selected) and the second's tools (``sources: [{mcp: {url}}]``).

Rows, interleaved round by round (so the machine's other load weighs on each alike); per row the best round's
requests per second, its ratio to the direct row of the same upstream, the median of the per-round ratios, and
the gateway's CPU per call (from /proc: what one dedicated core would spend, immune to other load):

    echo direct               wrk → POST /echo
    echo REST                 wrk → gateway POST /tools/echo_http/call → POST /echo
    local tool REST           wrk → gateway POST /tools/echo_local/call, a Python tool: the gateway's own floor
                              (what an upstream that cost nothing would leave), against echo direct
    echo MCP 2025 / 2026      wrk → gateway /mcp tools/call echo_http → POST /echo
    mcp direct 2025 / 2026    wrk → upstream /mcp tools/call echo (one 2025-11-25 session / stateless requests)
    mcp via gateway 2025/2026 wrk → gateway /mcp tools/call echo → its pooled session → upstream; each against the
                              direct row of the same revision (what its client would get calling the upstream)

Targets (issue 29): an HTTP-bound tool >= 0.5x its direct call over REST and MCP with <= 1 ms of gateway CPU a
call; a federated MCP tool >= 0.85x its direct call. wrk runs one thread, 16 connections, pinned to the last CPU;
servers are not pinned (the gateway and its upstream share the machine's cores, as they would in production).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from server_processes import (
    PLAIN_UVICORN,
    cpu_seconds,
    free_port,
    plain_uvicorn,
    spawn_gateway,
    stop,
    wait_healthy,
    wait_listening,
    wrk_requests,
)

REPO = Path(__file__).resolve().parent.parent
MCP_UPSTREAM = REPO / "tests" / "fixtures" / "mcp_upstream" / "mcpserver_http.py"
LEGACY, MODERN = "2025-11-25", "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream"}
TEXT = {"text": "hello"}

TOOL = """\
tools:
  - id: echo_http
    name: Echo over HTTP
    user_description: Sends the text to the echo service.
    ai_description: Sends the text to the echo service and returns what it answered.
    input_schema:
      type: object
      required: [text]
      properties: {{text: {{type: string, maxLength: 1000}}}}
      additionalProperties: false
    binding:
      http:
        method: POST
        url: "http://127.0.0.1:{port}/echo"
        json: {{text: "{{{{ args.text }}}}"}}
        response: {{select: /text}}
  - {{id: echo_local, name: Echo here, user_description: Echoes., ai_description: Returns the text.,
     binding: {{python: "bench_echo:echo"}}}}
sources:
  - id: upstream
    mcp: {{url: "http://127.0.0.1:{mcp_port}/mcp"}}
"""


def serve_echo(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse(await request.json())

    uvicorn.run(Starlette(routes=[Route("/echo", echo, methods=["POST"])]), host="127.0.0.1", port=port,
                log_level="warning", access_log=False, **PLAIN_UVICORN)  # type: ignore[arg-type]


def _session(url: str) -> str:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    session = httpx.post(url, json=init, headers=ACCEPT, timeout=60).headers["mcp-session-id"]
    httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
               headers=ACCEPT | {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}, timeout=60)
    return session


def _call(tool: str, revision: str) -> tuple[dict, dict[str, str]]:
    """A tools/call body and its headers for ``revision`` (the 2025 session id is added by the caller)."""
    body: dict = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": TEXT}}
    headers = ACCEPT | {"MCP-Protocol-Version": revision}
    if revision == MODERN:
        body["params"]["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                                   "io.modelcontextprotocol/clientCapabilities": {}}
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": tool}
    return body, headers


def _check(port: int, path: str, body: dict, headers: dict[str, str]) -> None:
    """One request of a row before it is measured: it must answer the echo, not an error wrk would count."""
    answer = httpx.post(f"http://127.0.0.1:{port}{path}", json=body, headers=headers, timeout=60)
    if answer.status_code != 200 or "hello" not in answer.text or '"isError":true' in answer.text.replace(" ", ""):
        raise SystemExit(f"{path} on port {port} did not echo: {answer.status_code} {answer.text[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    echo_port, mcp_port, gateway_port = free_port(), free_port(), free_port()
    processes: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        (tmp / "defs").mkdir()
        (tmp / "defs" / "bench.yaml").write_text(TOOL.format(port=echo_port, mcp_port=mcp_port))
        (tmp / "defs" / "python").mkdir()
        (tmp / "defs" / "python" / "bench_echo.py").write_text("def echo(text: str) -> str:\n    return text\n")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        try:
            processes.append(subprocess.Popen([sys.executable, __file__, "--serve-echo", str(echo_port)], **quiet))
            processes.append(subprocess.Popen(plain_uvicorn(MCP_UPSTREAM, str(mcp_port)), **quiet))
            wait_listening(processes[0], echo_port, "the echo upstream")
            wait_listening(processes[1], mcp_port, "the MCP upstream", timeout_s=60)
            env = {**os.environ, "TOOL_GATEWAY_STATE_DIR": str(tmp / "state"), "TOOL_GATEWAY_LOG_LEVEL": "warning"}
            gateway = spawn_gateway(tmp / "defs", gateway_port, "--no-reload", env=env)
            processes.append(gateway)
            wait_healthy(f"http://127.0.0.1:{gateway_port}/healthz", gateway, "the gateway", timeout_s=120)
            rows = _rows(echo_port, mcp_port, gateway_port)
            for port, path, body, headers in rows.values():
                _check(port, path, body, headers)
            measured = _measure(rows, gateway.pid, gateway_port, args.duration, args.rounds, tmp)
        finally:
            # SIGKILL: open MCP streams would hold a graceful stop for its whole grace period.
            stop(*reversed(processes), timeout_s=10, kill=True)
    _report(measured, args.duration, args.rounds)


def _rows(echo_port: int, mcp_port: int, gateway_port: int) -> dict[str, tuple[int, str, dict, dict[str, str]]]:
    upstream_session, gateway_session = _session(f"http://127.0.0.1:{mcp_port}/mcp"), _session(
        f"http://127.0.0.1:{gateway_port}/mcp")
    rows = {"echo direct": (echo_port, "/echo", TEXT, {}),
            "echo REST": (gateway_port, "/tools/echo_http/call", TEXT, {}),
            "local tool REST": (gateway_port, "/tools/echo_local/call", TEXT, {})}
    for revision in (LEGACY, MODERN):
        body, headers = _call("echo_http", revision)
        if revision == LEGACY:
            headers["Mcp-Session-Id"] = gateway_session
        rows[f"echo MCP {revision[:4]}"] = (gateway_port, "/mcp", body, headers)
    body, headers = _call("echo", LEGACY)
    rows["mcp direct 2025"] = (mcp_port, "/mcp", body, headers | {"Mcp-Session-Id": upstream_session})
    rows["mcp direct 2026"] = (mcp_port, "/mcp", *_call("echo", MODERN))
    for revision in (LEGACY, MODERN):
        body, headers = _call("echo", revision)
        if revision == LEGACY:
            headers["Mcp-Session-Id"] = gateway_session
        rows[f"mcp via gateway {revision[:4]}"] = (gateway_port, "/mcp", body, headers)
    return rows


def _measure(rows: dict, gateway_pid: int, gateway_port: int, duration: float, rounds: int, tmp: Path) -> dict:
    per_s: dict[str, list[float]] = {name: [] for name in rows}
    cpu_per_call: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(rounds):
        for name, (port, path, body, headers) in rows.items():
            cpu = cpu_seconds(gateway_pid)
            answered = wrk_requests(port, path, body, headers, duration, tmp)
            per_s[name].append(answered / duration)
            if port == gateway_port:
                cpu_per_call[name].append((cpu_seconds(gateway_pid) - cpu) / max(answered, 1))
    return {"per_s": per_s, "cpu": cpu_per_call}


def _report(measured: dict, duration: float, rounds: int) -> None:
    per_s, cpu = measured["per_s"], measured["cpu"]
    print(f"tools/call with wrk, 16 connections, {rounds} interleaved rounds x {duration:g} s; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"  {'':<22} {'best req/s':>10} {'x direct':>9} {'median x':>9} {'gateway CPU/call':>17}")
    for name, rates in per_s.items():
        # A federated call against the upstream called directly on the client's own revision.
        direct = f"mcp direct {name[-4:]}" if name.startswith("mcp") else "echo direct"
        ratio = max(rates) / max(per_s[direct])
        median = statistics.median(rate / base for rate, base in zip(rates, per_s[direct], strict=True))
        used = f"{min(cpu[name]) * 1000:14.3f} ms" if cpu[name] else ""
        target = "" if "direct" in name or "local" in name else ("  (target >= 0.5x, <= 1 ms)" if name.startswith("echo")
                                               else "  (target >= 0.85x)")
        print(f"  {name:<22} {max(rates):10.0f} {ratio:8.2f}x {median:8.2f}x {used:>17}{target}")
    print(json.dumps({name: {"best": max(rates), "cpu_ms": min(cpu[name]) * 1000 if cpu[name] else None}
                      for name, rates in per_s.items()}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-echo"]:
        serve_echo(int(sys.argv[2]))
    else:
        main()
