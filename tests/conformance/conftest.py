"""The conformance run's counts, per protocol revision for the server scenarios and for the client scenarios,
printed at the end of the session (what CI's log should show at a glance)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest
from conformance_suite import INSTALLED, version
from support import NODE_MODULES

CASE = re.compile(r"test_conformance\.py::test_(server|client)_scenario\[(.+)\]$")
OUTCOMES = ("passed", "xfailed", "failed", "xpassed", "skipped")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for outcome in OUTCOMES:
        for report in terminalreporter.stats.get(outcome, []):
            if case := CASE.search(getattr(report, "nodeid", "")):
                kind, case_id = case.groups()
                group = f"server scenarios on {case_id.split('/')[0]}" if kind == "server" else "client scenarios"
                tally[group][outcome] += 1
    if not tally:
        return
    installed = all((NODE_MODULES / path).exists() for path in INSTALLED)
    terminalreporter.write_sep("-", f"MCP conformance suite {version() if installed else '(not installed)'}")
    for group, counts in sorted(tally.items()):
        told = ", ".join(f"{counts[outcome]} {outcome}" for outcome in OUTCOMES if counts[outcome])
        terminalreporter.write_line(f"{group}: {told} (of {sum(counts.values())})")
