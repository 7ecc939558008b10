"""Per-tool SLOs (gateway.observe.slo): figures over the window, a breach logged once when it starts and once when
it ends, and /status showing the figures to those allowed to see them (issue 13)."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from support import serving

from gateway.context import CallContext
from gateway.events import CallActivity, Event, Observer
from gateway.invoke import invoke
from gateway.observe import slo
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import ApiKey, Settings, hash_key

TOOLS = """
tools:
  - id: slow
    name: Slow
    user_description: Naps.
    ai_description: Naps 50 ms.
    binding: {python: "naps:nap"}
    slo: {p95_ms: %s}
  - id: quick
    name: Quick
    user_description: Answers.
    ai_description: Answers at once.
    binding: {python: "naps:answer"}
    slo: {p95_ms: 100, error_rate: 0.2}
  - id: plain
    name: Plain
    user_description: Answers.
    ai_description: Answers at once, with no slo.
    binding: {python: "naps:answer"}
"""
NAPS = """
import time


def nap() -> str:
    time.sleep(0.05)
    return "rested"


def answer(n: int = 0) -> int:
    return n
"""


@pytest.fixture
def definitions(write_definitions) -> Path:
    return write_definitions({"tools.yaml": TOOLS % 1, "python/naps.py": NAPS})


@pytest.fixture
def gateway(definitions: Path) -> Gateway:
    return Gateway(Settings(definitions=definitions, reload=False))


class Recorder(Observer):
    def __init__(self) -> None:
        self.events: list[Event] = []

    def event(self, event: Event) -> None:
        self.events.append(event)


def ended(tool: str, duration_ms: float, outcome: str = "ok") -> CallActivity:
    call = CallActivity("call", tool=tool)
    call.duration_s, call.outcome = duration_ms / 1000, outcome
    return call


def test_figures_on_known_traffic(gateway):
    """Counted calls give nearest-rank p50/p95 and the error rate; argument errors, rejections and cancellations
    count for nothing; a tool without an slo has holds None, a tool with one but no calls is listed empty."""
    slos = slo.make(gateway)
    for n in range(1, 21):  # 1 … 20 ms, the 19th and 20th are errors (a tool error and a timeout)
        slos.end(ended("quick", n, {19: "error", 20: "timeout"}.get(n, "ok")))
    for outcome in ("invalid_arguments", "rejected", "cancelled"):
        slos.end(ended("quick", 5000, outcome))
    slos.end(ended("plain", 7, "failed"))
    figures = slos.figures()
    assert figures["quick"] == {"calls": 20, "errors": 2, "p50_ms": 10.0, "p95_ms": 19.0, "error_rate": 0.1,
                                "slo": {"p95_ms": 100, "error_rate": 0.2}, "holds": True}
    assert figures["plain"] == {"calls": 1, "errors": 1, "p50_ms": 7.0, "p95_ms": 7.0, "error_rate": 1.0,
                                "slo": None, "holds": None}
    assert figures["slow"] == {"calls": 0, "errors": 0, "p50_ms": None, "p95_ms": None, "error_rate": None,
                               "slo": {"p95_ms": 1}, "holds": None}


def test_the_ring_keeps_the_latest_calls_only(gateway):
    """Memory is bounded: past SAMPLES calls a tool's figures cover its latest SAMPLES calls."""
    slos = slo.make(gateway)
    for _ in range(slo.SAMPLES):
        slos.end(ended("quick", 500))
    for _ in range(slo.SAMPLES):
        slos.end(ended("quick", 2))
    figures = slos.figures()["quick"]
    assert (figures["calls"], figures["p95_ms"], figures["holds"]) == (slo.SAMPLES, 2.0, True)


def test_calls_before_the_window_are_left_out():
    """Only the calls that ended within the window count, before and after the ring wraps around."""
    ring = slo.Ring()
    for n in range(slo.SAMPLES + 10):  # ends at 1, 2, …; durations 1, 2, … ms; every other call an error
        ring.add(float(n + 1), float(n + 1), n % 2 == 1)
    last = slo.SAMPLES + 10
    figures = ring.figures(last - 4, None)  # the calls that ended at last-3 … last
    assert (figures["calls"], figures["errors"], figures["p50_ms"], figures["p95_ms"]) == (4, 2, last - 2, last)
    assert ring.figures(0, None)["calls"] == slo.SAMPLES


async def test_breach_is_logged_once_and_so_is_recovery(gateway, definitions, caplog):
    """A tool napping 50 ms against an slo of 1 ms breaks it: one warning and one "breached" event however many
    calls follow; once a reload gives it a reachable slo, one info line and one "recovered" event."""
    slos = slo.make(gateway)
    slos.judge_every_s = 0  # judge every call, so the test need not wait for the next second
    recorder = Recorder()
    for observer in (slos, recorder):
        gateway.events.subscribe(observer)
    context = CallContext(surface="test")
    with caplog.at_level(logging.INFO, logger="gateway.slo"):
        for _ in range(5):
            assert not (await invoke(gateway.catalog, "slow", {}, context)).is_error
        breached = [r for r in caplog.records if r.name == "gateway.slo"]
        assert [r.levelno for r in breached] == [logging.WARNING] and "slow breaks its slo" in breached[0].message
        (definitions / "tools.yaml").write_text(TOOLS % 60000, encoding="utf-8")
        assert (await gateway.reload()).changed
        for _ in range(3):
            await invoke(gateway.catalog, "slow", {}, context)
    lines = [r for r in caplog.records if r.name == "gateway.slo"]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO] and "meets its slo" in lines[1].message
    changes = [(e.data["tool"], e.data["state"]) for e in recorder.events if e.kind == "slo"]
    assert changes == [("slow", "breached"), ("slow", "recovered")]
    figures = slos.figures()["slow"]
    assert figures["calls"] == 8 and figures["p50_ms"] >= 50 and figures["holds"] is True


@pytest.mark.parametrize(("auth", "key", "shown"), [
    (False, None, True),
    (True, None, False),
    (True, "reader-key", False),
    (True, "admin-key", True),
])
def test_status_shows_slo_figures_to_admins_only(definitions, auth, key, shown):
    """/status lists each tool's figures and whether its slo holds — to anyone with auth off, to admin keys only
    with auth on (anonymous callers and other keys still get the summary)."""
    keys = (ApiKey("reader", hash_key("reader-key")), ApiKey("admin", hash_key("admin-key"), admin=True))
    gateway = Gateway(Settings(definitions=definitions, reload=False, api_keys=keys if auth else ()))
    with serving(create_app(gateway), lifespan="on") as server:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        httpx.post(f"{server.url}/tools/quick/call", json={"n": 3}, headers={"Authorization": "Bearer reader-key"}
                   if auth else {}, timeout=10).raise_for_status()
        status = httpx.get(f"{server.url}/status", headers=headers, timeout=10).json()
    assert status["version"] == gateway.catalog.version
    if shown:
        assert status["tools_slo"]["quick"]["calls"] == 1 and status["tools_slo"]["quick"]["holds"] is True
        assert status["tools_slo"]["slow"]["holds"] is None
    else:
        assert "tools_slo" not in status


async def test_a_breach_ends_when_the_slo_is_removed(gateway, definitions, caplog):
    """A breached tool whose slo a reload removes is no longer breached: when an slo comes back and is broken, that
    is a new breach, logged again."""
    slos = slo.make(gateway)
    slos.judge_every_s = 0
    gateway.events.subscribe(slos)
    tools = definitions / "tools.yaml"
    with caplog.at_level(logging.INFO, logger="gateway.slo"):
        await invoke(gateway.catalog, "slow", {})
        tools.write_text(TOOLS.replace("    slo: {p95_ms: %s}\n", ""), encoding="utf-8")
        await gateway.reload()
        await invoke(gateway.catalog, "slow", {})
        assert slos.figures()["slow"]["holds"] is None
        tools.write_text(TOOLS % 1, encoding="utf-8")
        await gateway.reload()
        await invoke(gateway.catalog, "slow", {})
    assert [r.levelno for r in caplog.records if r.name == "gateway.slo"] == [logging.WARNING] * 2
