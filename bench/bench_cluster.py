"""Cluster mode's throughput and its per-call cost: REST tools/call (``sum``, a=1, b=2) against one process without
cluster mode, one process with it, and 1, 2 and 3 replicas behind nginx, in the same run; and what a 2025-11-25
MCP session costs when nothing is sticky.

    python bench/bench_cluster.py [--concurrency 16] [--duration 2] [--rounds 3]

Rows (every gateway serves a copy of the shipped examples, reload off, log level warning):

    single        one process, no cluster settings: state in memory (the default)
    cluster-solo  one process with ``cluster: {redis_url}`` (a real redis-server): REST calls touch no shared state,
                  so this row against ``single`` is cluster mode's per-call cost (target: >= 0.90 x single)
    nginx-1..3    1, 2, 3 replicas in cluster mode behind nginx (deploy/nginx/nginx.conf.template, round-robin)
    mcp single    MCP 2025-11-25 tools/call (one session per connection) on ``single``
    mcp nginx-3   the same through nginx to 3 replicas: two calls in three reach a replica that does not hold the
                  session and are served from its record (a Redis GET and a transport of their own per call)

The load generator is ``bench_serving.py``'s (raw HTTP/1.1 keep-alive connections, ``--concurrency`` of them,
pinned to the second CPU). ``single`` and ``cluster-solo`` are pinned to the first CPU, as in the other benches.
Replicas are NOT pinned: pinned to one CPU they could not scale at all; unpinned they share the machine's cores
with nginx, Redis and the load generator, which is the honest picture on a 2-core box. Two measures per row:
calls/s as the load generator saw them, and calls per CPU-second of the gateway processes (nginx and Redis not
counted). Rows are interleaved over ``--rounds`` rounds; medians reported.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from bench_serving import EXAMPLES, Server, _pin, add_load_options, measure
from server_processes import free_port, wait_healthy
from support import Nginx, RedisServer

# row -> (the server it loads, bench_serving's scenario)
ROWS = {"single": ("single", "rest"), "cluster-solo": ("cluster-solo", "rest"), "nginx-1": ("nginx-1", "rest"),
        "nginx-2": ("nginx-2", "rest"), "nginx-3": ("nginx-3", "rest"), "mcp single": ("single", "mcp 2025"),
        "mcp nginx-3": ("nginx-3", "mcp 2025")}


def serve(port: int, definitions: Path, redis_url: str, pin: bool) -> None:
    """One gateway (a subprocess: ``bench_cluster.py serve <port> <definitions> <redis_url or -> <pin>``)."""
    if pin:
        _pin(0)
    from gateway.server import serve as serve_gateway
    from gateway.settings import Settings

    cluster = {"redis_url": redis_url} if redis_url != "-" else {}
    serve_gateway(Settings(definitions=definitions, port=port, reload=False, log_level="warning", cluster=cluster))


class Gateway(Server):
    """A gateway process with ``bench_serving.Server``'s measures (its CPU seconds from /proc)."""

    def __init__(self, definitions: Path, redis_url: str | None, *, pin: bool):  # not Server's: other kinds
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "serve", str(self.port), str(definitions), redis_url or "-", str(int(pin))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_healthy(f"http://127.0.0.1:{self.port}/healthz", self.process, "a gateway", poll_s=0.1)


class Front:
    """nginx in front of some replicas: measured as one server whose CPU is the replicas' CPU."""

    def __init__(self, nginx: Nginx, replicas: list[Gateway]):
        self.nginx = nginx
        self.replicas = replicas
        self.port = nginx.port

    def cpu_seconds(self) -> float:
        return sum(r.cpu_seconds() for r in self.replicas)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("port", type=int)
    serve_cmd.add_argument("definitions", type=Path)
    serve_cmd.add_argument("redis_url")
    serve_cmd.add_argument("pin", type=int)
    add_load_options(parser)
    args = parser.parse_args()
    if args.command == "serve":
        return serve(args.port, args.definitions, args.redis_url, bool(args.pin))

    scratch = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    definitions = scratch / "tool-definitions"
    shutil.copytree(EXAMPLES, definitions, ignore=shutil.ignore_patterns("__pycache__"))
    redis = RedisServer(scratch)
    redis.start()
    started: list[Gateway] = []
    fronts: list[Nginx] = []
    try:
        single = Gateway(definitions, None, pin=True)
        solo = Gateway(definitions, redis.url, pin=True)
        replicas = [Gateway(definitions, redis.url, pin=False) for _ in range(3)]
        started += [single, solo, *replicas]
        servers: dict[str, object] = {"single": single, "cluster-solo": solo}
        for n in (1, 2, 3):
            nginx = Nginx(scratch / f"nginx-{n}", [r.port for r in replicas[:n]])
            nginx.start()
            fronts.append(nginx)
            servers[f"nginx-{n}"] = Front(nginx, replicas[:n])
        runs: dict[str, list[dict[str, float]]] = {row: [] for row in ROWS}
        for _ in range(args.rounds):  # interleaved, so that noise from the rest of the box hits every row alike
            for row, (server, scenario) in ROWS.items():
                runs[row].append(measure(servers[server], scenario, args.concurrency, args.duration))  # type: ignore[arg-type]
    finally:
        for nginx in fronts:
            nginx.stop()
        for gateway in started:
            gateway.stop()
        redis.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    medians = {row: {key: statistics.median(r[key] for r in rs) for key in ("per_s", "per_cpu_s")}
               for row, rs in runs.items()}
    errors = {row: sum(r["errors"] for r in rs) for row, rs in runs.items()}
    print(f"tools/call, concurrency {args.concurrency}, {args.duration:g} s x {args.rounds} rounds (medians)")
    print("(x base: against 'single' for REST rows, 'mcp single' for MCP rows)")
    print(f"{'row':<14}{'calls/s':>10}{'x base':>10}{'calls/cpu-s':>13}{'x base':>10}{'errors':>8}")
    for row, m in medians.items():
        base = medians["mcp single" if row.startswith("mcp") else "single"]
        print(f"{row:<14}{m['per_s']:>10.0f}{m['per_s'] / base['per_s']:>10.2f}"
              f"{m['per_cpu_s']:>13.0f}{m['per_cpu_s'] / base['per_cpu_s']:>10.2f}{errors[row]:>8}")
    cost = medians["cluster-solo"]["per_cpu_s"] / medians["single"]["per_cpu_s"]
    print(f"cluster mode's per-call cost (calls per CPU-second, cluster-solo / single): {cost:.2f} "
          f"(target >= 0.90) {'ok' if cost >= 0.90 else 'MISSED'}")


if __name__ == "__main__":
    main()
