"""A few seconds of bench/soak_reload.py: calls never fail while definitions are edited, broken and repaired."""

from __future__ import annotations

import importlib.util
import sys

from support import REPO

spec = importlib.util.spec_from_file_location("soak_reload", REPO / "bench" / "soak_reload.py")
assert spec is not None and spec.loader is not None
soak_reload = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
spec.loader.exec_module(soak_reload)


def test_no_call_fails_while_every_kind_of_edit_is_reloaded() -> None:
    """Valid edits, broken YAML, a tool added and removed, a module changed and broken, under steady calls:
    0 failed calls, and a last edit of each kind is served afterwards (the reloader is not wedged)."""
    report = soak_reload.soak(calls=400, duration_s=3.0, edits=12, concurrency=8)
    assert report.calls == 400 and report.failed == 0, "\n".join(report.lines())
    assert set(report.edits) == set(soak_reload.KINDS), report.edits
    assert report.final_edit_served and report.last_reload_ok, "\n".join(report.lines())
