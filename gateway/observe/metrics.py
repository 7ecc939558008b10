"""Prometheus metrics from the event stream (``gateway.events``), scraped at ``GET /metrics``
(``gateway.server.metrics``).

Each gateway has its own ``CollectorRegistry`` (``Metrics.registry``), never prometheus_client's global one: a
process may hold several gateways (the tests build many apps), and each must count only its own traffic.

Every metric is named ``tool_gateway_*`` and documented by its HELP text (docs/observability.md, "Metrics", lists
them). Label values are only ever tool ids (those served now: a reload that removes a tool removes its series),
surfaces, outcomes, provider names from the settings and fixed words — never what a caller sent: an unknown tool id is refused before a call
begins, so it creates no series. A timeout is the outcome ``timeout`` of ``tool_gateway_calls_total``, not a
counter of its own; a rate-limited call will be the outcome ``rejected``.

Per-tool SLO figures are not counted here: a collector reads the SLO observer's ``figures()`` at scrape time,
so ``/metrics`` and ``/status`` show the same window.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..events import Activity, CallActivity, Event, Observer

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

PREFIX = "tool_gateway"
# Seconds: tool calls range from a cached lookup to a slow upstream near its timeout.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LLM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
RELOAD_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ROUND_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30)
UNKNOWN = "unknown"  # a label whose producer did not say (an LLM activity without a provider)


class Metrics(Observer):
    """The metrics of one gateway, kept in ``registry``."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway  # its catalog says which tools may have series
        self.registry = registry = CollectorRegistry()

        def counter(name: str, help_: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"{PREFIX}_{name}", help_, labels, registry=registry)

        def histogram(name: str, help_: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"{PREFIX}_{name}", help_, labels, registry=registry, buckets=buckets)

        def gauge(name: str, help_: str) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", help_, registry=registry)

        self.calls = counter("calls", "Tool calls ended, by tool, surface (rest, mcp, chat) and outcome (ok, error, "
                             "invalid_arguments, timeout, rejected, failed, cancelled).", ("tool", "surface", "outcome"))
        self.call_seconds = histogram("call_duration_seconds", "Duration of tool calls, by tool.", ("tool",),
                                      CALL_BUCKETS)
        self.in_flight = gauge("calls_in_flight", "Tool calls running now.")
        # The calls running now, counted when scraped: a set's add and discard are one atomic C call each, where the
        # gauge's inc and dec took a lock each per call.
        self._running: set[int] = set()
        self.in_flight.set_function(lambda: len(self._running))
        self.upstream = counter("upstream_responses", "HTTP requests sent by HTTP-bound tools (each redirect hop "
                                "is one), by tool and status class (1xx..5xx; error: no answer).",
                                ("tool", "status_class"))
        self.llm = counter("llm_requests", "Requests to LLM providers, by provider and outcome.",
                           ("provider", "outcome"))
        self.llm_seconds = histogram("llm_request_duration_seconds", "Duration of LLM requests, by provider.",
                                     ("provider",), LLM_BUCKETS)
        self.tokens = counter("llm_tokens", "Tokens LLM providers reported, by provider and type (input, output).",
                              ("provider", "type"))
        self.rounds = histogram("chat_rounds", "LLM requests per chat turn, by provider.", ("provider",),
                                ROUND_BUCKETS)
        self.reloads = counter("reloads", "Catalog reloads, by outcome (ok, failed, timeout).", ("outcome",))
        self.reload_seconds = histogram("reload_duration_seconds", "Duration of catalog reloads.", (),
                                        RELOAD_BUCKETS)
        self.catalog = Info(f"{PREFIX}_catalog", "The catalog served now.", registry=registry)
        self.tools = gauge("catalog_tools", "Tools in the catalog served now.")
        self.held = gauge("catalog_tools_held", "Tools the lock file holds now: changed since it, or not in it.")
        self.bridge_sessions = gauge("bridge_sessions", "Browser pages connected to the bridge now.")
        self.approvals = counter("approvals", "Approvals of calls, by action (requested, approved, denied, used).",
                                 ("action",))
        self.auth_failures = counter("auth_failures", "Requests refused for their credentials, by surface and "
                                     "reason (missing, invalid, forbidden).", ("surface", "reason"))
        registry.register(SloFigures(gateway.observers))
        # The children of the busiest series, by label values: one dict lookup per call instead of labels()'s
        # validation and lock.
        self._call_series: dict[tuple[str, str, str], Any] = {}
        self._duration_series: dict[str, Any] = {}
        self._upstream_series: set[tuple[str, str]] = set()
        self._served(gateway.catalog.version, len(gateway.catalog.tools))

    def _served(self, version: str, tools: int) -> None:
        self.catalog.info({"version": version})
        self.tools.set(tools)
        self.held.set(len(self.gateway.catalog.held))

    def begin(self, activity: Activity) -> None:
        if activity.kind == "call":
            self._running.add(id(activity))

    def end(self, activity: Activity) -> None:
        if isinstance(activity, CallActivity):
            self._call_ended(activity)
        elif activity.kind == "upstream":
            status = activity.attributes.get("status")
            answered = activity.outcome != "error" and isinstance(status, int)
            key = (activity.attributes.get("tool") or UNKNOWN, f"{status // 100}xx" if answered else "error")
            if key not in self._upstream_series:
                if key[0] != UNKNOWN and key[0] not in self.gateway.catalog.tools:  # removed meanwhile
                    return
                self._upstream_series.add(key)
            self.upstream.labels(*key).inc()
        elif activity.kind == "llm":
            self._llm_ended(activity.attributes, activity.outcome, activity.duration_s)

    def _call_ended(self, call: CallActivity) -> None:
        self._running.discard(id(call))
        key = (call.tool, call.surface or UNKNOWN, call.outcome)
        series = self._call_series.get(key)
        if series is None:
            if call.tool not in self.gateway.catalog.tools:  # it ended after a reload removed its tool: no series
                return
            series = self._call_series[key] = self.calls.labels(*key)
        series.inc()
        duration = self._duration_series.get(call.tool)
        if duration is None:
            duration = self._duration_series[call.tool] = self.call_seconds.labels(call.tool)
        duration.observe(call.duration_s)

    def _forget(self, removed: set[str]) -> None:
        """Drop the series of tools a reload removed: label values stay bounded by the tools served now, not by
        every tool ever served. A call to one still running when it was removed is not counted when it ends."""
        if not removed:
            return
        for key in [k for k in self._call_series if k[0] in removed]:
            del self._call_series[key]
            self.calls.remove(*key)
        for tool in removed & self._duration_series.keys():
            del self._duration_series[tool]
            self.call_seconds.remove(tool)
        for key in [k for k in self._upstream_series if k[0] in removed]:
            self._upstream_series.discard(key)
            self.upstream.remove(*key)

    def _llm_ended(self, attributes: Mapping[str, Any], outcome: str, duration_s: float) -> None:
        provider = str(attributes.get("provider") or UNKNOWN)
        self.llm.labels(provider, outcome or UNKNOWN).inc()
        self.llm_seconds.labels(provider).observe(duration_s)
        for kind in ("input", "output"):
            count = attributes.get(f"{kind}_tokens")
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                self.tokens.labels(provider, kind).inc(count)

    def event(self, event: Event) -> None:
        data = event.data
        if event.kind == "reload":
            outcome = "timeout" if data.get("timed_out") else "ok" if data.get("ok") else "failed"
            self.reloads.labels(outcome).inc()
            self.reload_seconds.observe(float(data.get("duration_s") or 0.0))
            if "version" in data and "tools" in data:
                self._served(str(data["version"]), int(data["tools"]))
            self._forget(set(data.get("removed") or ()))
        elif event.kind == "chat_turn":
            rounds = data.get("rounds")
            if isinstance(rounds, int):
                self.rounds.labels(str(data.get("provider") or UNKNOWN)).observe(rounds)
        elif event.kind == "bridge_session":
            self.bridge_sessions.set(int(data.get("sessions") or 0))
        elif event.kind == "approval":
            self.approvals.labels(str(data.get("action") or UNKNOWN)).inc()
        elif event.kind == "auth_failure":
            self.auth_failures.labels(str(data.get("surface") or UNKNOWN), str(data.get("reason") or UNKNOWN)).inc()


class SloFigures(Collector):
    """Each tool's p50, p95 and error rate over the SLO window, and whether its SLO holds, read from the
    ``slo`` observer (``gateway.observe.slo``) at scrape time; nothing when that observer is not attached."""

    GAUGES = (
        ("tool_p50_seconds", "Median duration of the tool's calls over the SLO window."),
        ("tool_p95_seconds", "95th percentile duration of the tool's calls over the SLO window."),
        ("tool_error_rate", "Share of the tool's calls over the SLO window that were not ok (0..1)."),
        ("tool_slo_holds", "1 while the tool meets its declared slo, 0 while it breaks it (tools with an slo)."),
    )

    def __init__(self, observers: Mapping[str, Observer]):
        self.observers = observers  # the gateway's, by name: the slo observer may be attached after this one

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for name, help_ in self.GAUGES:
            yield GaugeMetricFamily(f"{PREFIX}_{name}", help_, labels=("tool",))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        slo = self.observers.get("slo")
        if slo is None:
            return
        p50, p95, errors, holds = (GaugeMetricFamily(f"{PREFIX}_{name}", help_, labels=("tool",))
                                   for name, help_ in self.GAUGES)
        for tool, figures in slo.figures().items():  # type: ignore[attr-defined]
            for family, value in ((p50, _seconds(figures.get("p50_ms"))), (p95, _seconds(figures.get("p95_ms"))),
                                  (errors, figures.get("error_rate"))):
                if isinstance(value, (int, float)):
                    family.add_metric((tool,), value)
            if figures.get("holds") is not None:
                holds.add_metric((tool,), 1.0 if figures["holds"] else 0.0)
        yield from (p50, p95, errors, holds)


def _seconds(ms: Any) -> float | None:
    return ms / 1000 if isinstance(ms, (int, float)) else None


def make(gateway: Gateway) -> Metrics:
    return Metrics(gateway)
