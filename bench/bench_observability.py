"""What observability costs: REST tools/call throughput with every event consumer off, against metrics + audit
trail + call log on, and against those plus OpenTelemetry traces, in the same run.

    python bench/bench_observability.py [--concurrency 16] [--duration 2] [--rounds 3]

Rows (one gateway process each, all serving the shipped examples; every call is ``sum`` with a=1, b=2):

    off           no consumer subscribed at all (gateway.observe.CONSUMERS emptied): the floor
    observed      the default consumers (metrics, SLOs, call log, live view, reload status), the call log at INFO
                  in JSON lines (to /dev/null), the audit trail to a file; tracing off
    traced        the same, plus tracing: on with OTEL_TRACES_EXPORTER=none (spans made, sampled, ended, dropped)
    exported      the same, plus spans exported over OTLP/HTTP (batched) to a receiver on 127.0.0.1 that decodes
                  every request and counts its spans (printed, to show nothing was lost)
    sampled       exported, with one trace in ten kept (OTEL_TRACES_SAMPLER=parentbased_traceidratio, ARG 0.1)

The servers, the load generator and its measures (calls/s and calls per server CPU-second) are
``bench_serving.py``'s: each server pinned to CPU 0, the load on CPU 1, rows interleaved over ``--rounds``
rounds, medians reported. The receiver runs in this process (a thread), unpinned.
Targets: observed >= 0.95 x off; traced and exported >= 0.85 x off.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import EXAMPLES, Server, _pin, add_load_options, measure
from server_processes import ServedHere, free_port, wait_listening

ROWS = ("off", "quiet", "observed", "traced", "exported", "sampled")
# (row, baseline, target): the targets, and what tracing alone costs over the other consumers.
RATIOS = (("quiet", "off", 0.95), ("observed", "off", 0.95), ("traced", "off", 0.85), ("exported", "off", 0.85), ("sampled", "off", 0.85),
          ("traced", "observed", None), ("exported", "observed", None), ("sampled", "observed", None))


def serve(row: str, port: int, scratch: Path) -> None:
    """One gateway configured as ``row`` (a subprocess: ``bench_observability.py serve <row> <port> <dir>``)."""
    _pin(0)
    from gateway import observe
    from gateway.server import serve as serve_gateway
    from gateway.settings import Settings

    definitions = scratch / row / "tool-definitions"
    shutil.copytree(EXAMPLES, definitions, ignore=shutil.ignore_patterns("__pycache__"))
    if row == "off":
        observe.CONSUMERS = ()
        settings = Settings(definitions=definitions, port=port, reload=False, log_level="warning", tracing="off")
    elif row == "quiet":  # every consumer but the call log's line (log_level warning), tracing off
        settings = Settings(definitions=definitions, port=port, reload=False, log_level="warning",
                            log_format="json", audit_log=str(scratch / row / "audit.jsonl"), tracing="off")
    else:
        settings = Settings(definitions=definitions, port=port, reload=False, log_level="info", log_format="json",
                            audit_log=str(scratch / row / "audit.jsonl"),
                            tracing="off" if row == "observed" else "on")
    serve_gateway(settings)


class Gateway(Server):
    """A gateway process for one row (``bench_serving.Server``'s measures, this file's configurations)."""

    def __init__(self, row: str, scratch: Path, env: dict[str, str]):  # not Server's: it starts its own kinds
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, __file__, "serve", row, str(self.port), str(scratch)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_listening(self.process, self.port, f"the {row} gateway")


class Receiver(ServedHere):
    """An OTLP/HTTP trace receiver on 127.0.0.1 (uvicorn in a thread) that decodes each export and counts spans."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        self.spans = 0

        async def traces(request: Request) -> Response:
            export = ExportTraceServiceRequest()
            export.ParseFromString(await request.body())
            self.spans += sum(len(scope.spans) for spans in export.resource_spans for scope in spans.scope_spans)
            return Response(b"", media_type="application/x-protobuf")

        super().__init__(Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("row", choices=ROWS)
    serve_cmd.add_argument("port", type=int)
    serve_cmd.add_argument("scratch", type=Path)
    add_load_options(parser)
    args = parser.parse_args()
    if args.command == "serve":
        return serve(args.row, args.port, args.scratch)

    scratch = Path(tempfile.mkdtemp(prefix="bench-observability-"))
    receiver = Receiver()
    # No OTEL_ variable of the caller's reaches a row: each row's tracing is what the table says.
    clean = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    envs = {"off": clean, "quiet": clean, "observed": clean, "traced": {**clean, "OTEL_TRACES_EXPORTER": "none"},
            "exported": {**clean, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}}
    envs["sampled"] = {**envs["exported"], "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                       "OTEL_TRACES_SAMPLER_ARG": "0.1"}
    servers = {row: Gateway(row, scratch, envs[row]) for row in ROWS}
    runs: dict[str, list[dict[str, float]]] = {row: [] for row in ROWS}
    try:
        for round_ in range(args.rounds):  # interleaved, so that noise from the rest of the box hits every row alike
            # Each round starts one row later: no row is always measured first (or last) in a round.
            for row in ROWS[round_ % len(ROWS):] + ROWS[:round_ % len(ROWS)]:
                runs[row].append(measure(servers[row], "rest", args.concurrency, args.duration))
    finally:
        for server in servers.values():
            server.stop()  # SIGTERM: the exported row exports its last spans on the way out
        receiver.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    def median(row: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[row])

    print(f"REST tools/call (sum), {args.concurrency} connections, {args.rounds} x {args.duration:g} s per row, "
          f"{len(os.sched_getaffinity(0))} CPUs, medians")
    print(f"{'row':<10} {'calls/s':>9} {'calls/CPU-s':>12} {'errors':>7}")
    for row in ROWS:
        errors = sum(run["errors"] for run in runs[row])
        print(f"{row:<10} {median(row, 'per_s'):>9.0f} {median(row, 'per_cpu_s'):>12.0f} {errors:>7}")
    print()
    # Besides the ratio of the medians, each round's own ratio (the two rows measured minutes apart at most): their
    # median and range show how much the machine's other load moved the figure.
    print(f"{'ratio':<20} {'calls/s':>8} {'calls/CPU-s':>12} {'per round: median (range)':>27}  target")
    for row, baseline, target in RATIOS:
        wall = median(row, "per_s") / median(baseline, "per_s")
        cpu = median(row, "per_cpu_s") / median(baseline, "per_cpu_s")
        paired = [ours["per_cpu_s"] / theirs["per_cpu_s"] for ours, theirs in zip(runs[row], runs[baseline])]
        spread = f"{statistics.median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f})"
        print(f"{row + ' / ' + baseline:<20} {wall:>7.2f}x {cpu:>11.2f}x {spread:>27}  "
              f"{f'>= {target:g}x' if target else ''}")
    calls = {row: sum(run["calls"] for run in runs[row]) for row in ("exported", "sampled")}
    print(f"\nspans the receiver decoded: {receiver.spans} (calls to the exported row: {calls['exported']}, "
          f"to the sampled row: {calls['sampled']}, of which about a tenth are traced)")


if __name__ == "__main__":
    main()
