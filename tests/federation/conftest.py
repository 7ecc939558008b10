"""The federation matrix's shared upstreams and gateway (one set for the session: started side by side once), the
order its tests run in (the idle minute before the restarts, the docs' table last), the outcome of each check
recorded for the compatibility table of docs/interop.md, and the idle counts printed at the end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack

import compat_table
import harness
import pytest
from harness import IDLE, OUTCOMES, REVISIONS
from matrix import CHECKS, PEERS

# The order of the federation's tests: a restart disturbs an upstream, so the idle minute comes before it.
ORDER = ("test_matrix.py::test_listed", "test_matrix.py::test_called", "test_matrix.py::test_content",
         "test_idle.py", "test_matrix.py::test_restart", "test_compat_table.py")


@pytest.fixture(scope="session")
def federation(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Federation]:
    """The upstreams the session's tests ask for (all of them for a test that takes no ``peer``: the idle minute)."""
    asked = [getattr(item, "callspec", None) and item.callspec.params.get("peer") for item in request.session.items
             if "federation" in getattr(item, "fixturenames", ())]
    wanted = PEERS if None in asked else [peer for peer in PEERS if peer in asked]
    with ExitStack() as stack:
        running = harness.start(tmp_path_factory.mktemp("federation"), [p for p in wanted if not p.missing], stack)
        REVISIONS.update({key: up.direct.revision for key, up in running.upstreams.items() if up.direct})
        yield running


@pytest.fixture(scope="session")
def restarts(federation: harness.Federation, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict | str]:
    """Every upstream restarted and called once (side by side, each through a gateway of its own)."""
    return federation.restart_all(tmp_path_factory.mktemp("restarts"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((n for n, name in enumerate(ORDER) if name in item.nodeid), -1)

    ours = [n for n, item in enumerate(items) if "federation/" in item.nodeid and rank(item) >= 0]
    for n, item in zip(ours, sorted((items[n] for n in ours), key=rank)):
        items[n] = item


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    check = item.name.split("[")[0].removeprefix("test_")
    peer = getattr(item, "callspec", None) and item.callspec.params.get("peer")
    if check in CHECKS and peer is not None and (report.when == "call" or report.outcome != "passed"):
        outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
        OUTCOMES.setdefault(peer.key, {})[check] = "failed" if report.failed and report.when != "call" else outcome
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    if (whole := harness.rows()) is not None:
        compat_table.RESULTS.write_text(json.dumps(whole, indent=1))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not IDLE:
        return
    terminalreporter.write_sep("-", "federation: requests each upstream got from an idle gateway in 60 s")
    for key, sent in IDLE.items():
        kinds = ", ".join(f"{sent.count(kind)} {kind}" for kind in sorted(set(sent))) or "nothing"
        terminalreporter.write_line(f"{key:10} {len(sent):3}  {kinds}")
