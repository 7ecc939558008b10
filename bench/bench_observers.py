"""What each consumer of the event stream costs per call, on its own (call log, live view, metrics, SLOs, audit
trail, tracer — recorded and sampled out — and the OTLP encoding of a span), against an in-process ``invoke`` of
the ``sum`` example with no consumer.

    python bench/bench_observers.py [--rounds 7]

Each figure is the best of ``--rounds`` rounds in process CPU time (every thread's: the audit writer's work
counts), in microseconds, so that other load on the machine weighs on all alike. Log lines go to /dev/null through
the handler ``configure_logging`` installs (as ``serve`` does); "secret known" rows have one ``{{ secrets.NAME }}`` named, so every
record is redacted. ``bench_observability.py`` measures the whole server with every consumer on.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import tempfile
import time
import timeit
from pathlib import Path

from gateway import secrets
from gateway.context import CallContext
from gateway.events import CallActivity
from gateway.invoke import invoke
from gateway.observe import audit, calllog, live, metrics, slo
from gateway.observe.logs import configure_logging
from gateway.runtime.gateway import Gateway
from gateway.settings import Settings

EXAMPLES = Path(__file__).resolve().parent.parent / "tool-definitions"
SECRET = "BENCH_OBSERVERS_TOKEN"


def ended_call() -> CallActivity:
    call = CallActivity("call", id="0123456789abcdef", tool="sum", surface="rest", caller="key", user="ann",
                        arguments={"a": 1, "b": 2}, version="0babc2aa49bd7f10")
    call.outcome, call.duration_s, call.result_chars = "ok", 0.0012, 3
    return call


def fresh() -> CallActivity:
    """An ended call with an id of its own (the live view's ring turns); the ids are counted, so that how invoke
    makes them weighs on none of these rows."""
    call = ended_call()
    call.id = f"{next(_ids):016x}"
    return call


_ids = itertools.count()


def both(observer, call: CallActivity) -> None:
    observer.begin(call)
    observer.end(call)


def tracer_rows(best) -> list[tuple[str, float]]:
    """A call span recorded and sampled out (begin + end, no exporter), and what the OTLP encoder takes per span."""
    try:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from gateway.observe import otel
    except ImportError:  # the [otel] extra is not installed
        return []
    kept = InMemorySpanExporter()
    recorded = otel.Tracer(otel.make_provider([]))
    recorded.provider.add_span_processor(SimpleSpanProcessor(kept))
    os.environ["OTEL_TRACES_SAMPLER"] = "always_off"
    try:
        sampled_out = otel.Tracer(otel.make_provider([]))
    finally:
        del os.environ["OTEL_TRACES_SAMPLER"]
    rows = [("tracer begin() + end(), span recorded (no exporter)", best(lambda: both(recorded, fresh()), 5_000)),
            ("tracer begin() + end(), span sampled out", best(lambda: both(sampled_out, fresh()), 5_000))]
    spans = kept.get_finished_spans()[-512:]
    rows.append(("OTLP encoding of a call span (batches of 512, SDK's encoder)",
                 best(lambda: encode_spans(spans).SerializeToString(), 3) / len(spans)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds

    def best(work, number: int) -> float:
        timer = timeit.Timer(work, timer=time.process_time)
        return min(timer.repeat(rounds, number)) / number * 1e6

    gateway = Gateway(Settings(definitions=EXAMPLES, reload=False))
    loop = asyncio.new_event_loop()
    context = CallContext(surface="rest")

    async def calls(n: int) -> None:
        for i in range(n):
            await invoke(gateway.catalog, "sum", {"a": i, "b": 1}, context)

    rows = [("invoke('sum') in process, no consumer (the floor)", best(lambda: loop.run_until_complete(calls(200)),
                                                                       1) / 200)]
    devnull = open(os.devnull, "w")  # noqa: SIM115 — held until the process ends

    def log_to_devnull(log_format: str, level: str) -> None:  # as serve does, the stream aside
        configure_logging(Settings(log_format=log_format, log_level=level))
        logging.getLogger().handlers[0].setStream(devnull)

    call, call_log, live_calls, counted = ended_call(), calllog.CallLog(), live.LiveCalls(), metrics.Metrics(gateway)
    log_to_devnull("text", "warning")
    rows.append(("call log, gateway.calls below its level", best(lambda: call_log.end(call), 20_000)))
    for known in ("no secret known", "secret known"):
        if known == "secret known":
            os.environ[SECRET] = "S3cr3t-bench-token-value"
            secrets.remember({SECRET})
        for log_format in ("text", "json"):
            log_to_devnull(log_format, "info")
            rows.append((f"call log line, {log_format}, {known}", best(lambda: call_log.end(call), 5_000)))
    rows.append(("live view end() (record kept, nobody reading)", best(lambda: live_calls.end(fresh()), 20_000)))
    rows.append(("metrics begin() + end()", best(lambda: both(counted, fresh()), 20_000)))
    rows.extend(tracer_rows(best))
    slos = slo.make(gateway)
    rows.append(("slo end()", best(lambda: slos.end(call), 20_000)))
    rows.append((f"slo figures(), a tool with {slo.SAMPLES} samples (per scrape)", best(slos.figures, 100)))
    with tempfile.TemporaryDirectory() as scratch:
        trail = audit.AuditTrail(audit.Sink(os.path.join(scratch, "put.jsonl"), 10_000_000, 5))
        rows.append(("audit end() on the call's thread", best(lambda: trail.end(call), 5_000)))
        trail.close()
        sink, known_values = audit.Sink(os.path.join(scratch, "lines.jsonl"), 10_000_000, 5), secrets.known_values()
        batch = [call] * 100
        rows.append(("audit writer, per line (record, redaction, JSON, batched write)",
                     best(lambda: sink.write([audit._text(item, known_values) for item in batch]), 20) / 100))
        sink.close()
    for label, micros in rows:
        print(f"{label:<66} {micros:8.2f} us")


if __name__ == "__main__":
    main()
