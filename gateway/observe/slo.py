"""Per-tool service levels: p50, p95 and error rate over a sliding window, and whether each tool's ``slo`` holds.

What counts: calls the tool answered or failed to answer — outcomes ``ok``, ``error``, ``timeout`` and ``failed``;
the last three are its errors. ``invalid_arguments`` (the caller's mistake), ``rejected`` (refused before it ran)
and ``cancelled`` (the caller went away) say nothing of the tool and are left out of every figure.

Memory is bounded: each tool keeps a ring of its last ``SAMPLES`` counted calls (end time, duration, error), and
figures use those of the ring that ended within ``slo_window_s``; past ``SAMPLES`` calls per window, the figures
cover the latest ``SAMPLES``. Percentiles are nearest-rank over those samples.

A tool's ``slo: {p95_ms, error_rate}`` (from the catalog served now) holds when each limit it names is met;
``holds`` is None for a tool without an slo or without counted calls in the window. The judgement is made when a
call ends, at most once a second per tool (``judge_every_s``), so a call costs a few stores, not a sort; a tool
that starts breaking its slo is logged once (WARNING, ``gateway.slo``) and emits an ``slo`` event (state
``breached``), and once more (INFO, state ``recovered``) when it holds again. A tool that gets no calls keeps
its state until a call is judged.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from array import array
from typing import TYPE_CHECKING, Any

from ..events import Activity, CallActivity, Observer

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..runtime.gateway import Gateway

log = logging.getLogger("gateway.slo")
SAMPLES = 1024
COUNTED = frozenset({"ok", "error", "timeout", "failed"})
ERRORS = frozenset({"error", "timeout", "failed"})


class Ring:
    """The last ``SAMPLES`` counted calls of one tool, in flat arrays (17 bytes a call)."""

    __slots__ = ("breached", "durations_ms", "ended", "errors", "judge_at", "next")

    def __init__(self) -> None:
        self.ended = array("d", [-math.inf]) * SAMPLES  # time.monotonic() at the end; -inf: an empty slot
        self.durations_ms = array("d", bytes(8 * SAMPLES))
        self.errors = bytearray(SAMPLES)
        self.next = 0  # the slot the next call takes
        self.breached = False
        self.judge_at = 0.0  # monotonic time from which the next judgement may be made

    def add(self, ended: float, duration_ms: float, error: bool) -> None:
        slot = self.next
        self.ended[slot], self.durations_ms[slot], self.errors[slot] = ended, duration_ms, error
        self.next = (slot + 1) % SAMPLES

    def figures(self, since: float, slo: Mapping[str, float] | None) -> dict[str, Any]:
        """The figures of the calls that ended after ``since``."""
        # Oldest first, the ring's end times are sorted (empty slots, -inf, lead): the calls in the window are the
        # ones after a bisection, and every step below is one C call, not a Python loop over the samples.
        start = self.next
        first = bisect.bisect_right(self.ended[start:] + self.ended[:start], since)
        durations = (self.durations_ms[start:] + self.durations_ms[:start])[first:]
        errors = (self.errors[start:] + self.errors[:start])[first:]
        return summary(sorted(durations), errors.count(1), slo)


def summary(durations: list[float], errors: int, slo: Mapping[str, float] | None) -> dict[str, Any]:
    """The figures of calls with these durations (sorted) and this many errors, judged against ``slo``."""
    calls = len(durations)
    if not calls:
        return {"calls": 0, "errors": 0, "p50_ms": None, "p95_ms": None, "error_rate": None,
                "slo": dict(slo) if slo else None, "holds": None}
    p95, error_rate = _rank(durations, 0.95), errors / calls
    holds = None
    if slo:
        holds = p95 <= slo.get("p95_ms", math.inf) and error_rate <= slo.get("error_rate", math.inf)
    return {"calls": calls, "errors": errors, "p50_ms": _rank(durations, 0.5), "p95_ms": p95,
            "error_rate": round(error_rate, 4), "slo": dict(slo) if slo else None, "holds": holds}


def _rank(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile of a sorted list."""
    return round(ordered[max(math.ceil(share * len(ordered)) - 1, 0)], 1)


class Slos(Observer):
    judge_every_s = 1.0

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.window_s = gateway.settings.slo_window_s
        self.rings: dict[str, Ring] = {}
        self._lock = threading.Lock()  # figures() may be read from another thread (a scrape)
        self._judging = False  # emitting an slo event re-enters the bus: never judge inside a judgement

    def end(self, activity: Activity) -> None:
        if not isinstance(activity, CallActivity) or activity.outcome not in COUNTED:
            return
        with self._lock:
            now = time.monotonic()  # taken under the lock: each ring's end times stay in order
            ring = self.rings.get(activity.tool)
            if ring is None:
                ring = self.rings[activity.tool] = Ring()
            ring.add(now, activity.duration_s * 1000, activity.outcome in ERRORS)
            due = now >= ring.judge_at and not self._judging
            if due:
                ring.judge_at = now + self.judge_every_s
        if due:
            self._judge(activity.tool, ring, now)

    def _judge(self, tool_id: str, ring: Ring, now: float) -> None:
        self._judging = True
        try:
            with self._lock:
                figures = ring.figures(now - self.window_s, self._slo(tool_id))
            if figures["holds"] is None:  # the tool has no slo (any more): nothing to break, nothing to tell
                ring.breached = False
                return
            if figures["holds"] != ring.breached:
                return
            ring.breached = not figures["holds"]
            state = "breached" if ring.breached else "recovered"
            if ring.breached:
                log.warning("tool %s breaks its slo %s: p95 %s ms, error rate %s over %d call(s) of the last %g s",
                            tool_id, figures["slo"], figures["p95_ms"], figures["error_rate"], figures["calls"],
                            self.window_s)
            else:
                log.info("tool %s meets its slo %s again: p95 %s ms, error rate %s over %d call(s) of the last %g s",
                         tool_id, figures["slo"], figures["p95_ms"], figures["error_rate"], figures["calls"],
                         self.window_s)
            self.gateway.events.emit("slo", tool=tool_id, state=state, p95_ms=figures["p95_ms"],
                                     error_rate=figures["error_rate"])
        finally:
            self._judging = False

    def _slo(self, tool_id: str) -> Mapping[str, float] | None:
        tool = self.gateway.catalog.tools.get(tool_id)
        return tool.definition.slo if tool is not None else None

    def figures(self) -> dict[str, dict[str, Any]]:
        """``{tool_id: {calls, errors, p50_ms, p95_ms, error_rate, slo, holds}}`` for each tool with counted calls
        in the window and each tool of the catalog that has an slo."""
        since = time.monotonic() - self.window_s
        tools = self.gateway.catalog.tools
        with self._lock:
            found = {tool_id: ring.figures(since, self._slo(tool_id)) for tool_id, ring in self.rings.items()}
            # A tool whose calls have all left the window, and which is gone from the catalog, is forgotten.
            for tool_id in [t for t, f in found.items() if not f["calls"] and t not in tools]:
                del self.rings[tool_id], found[tool_id]
        for tool_id, tool in tools.items():
            if tool.definition.slo and tool_id not in found:
                found[tool_id] = summary([], 0, tool.definition.slo)
        return found


def make(gateway: Gateway) -> Slos:
    return Slos(gateway)
