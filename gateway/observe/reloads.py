"""The history of reloads, newest first, for the admin console: what each did to the catalog and how it went.

Kept from the ``reload`` events ``Gateway`` emits (``gateway.runtime``), in a bounded ring (``KEPT``): a
gateway that reloads on every save for weeks holds the last ``KEPT`` outcomes, not all of them. The first
build (made before any observer was attached) opens the history, marked ``initial``.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from ..events import Event, Observer

if TYPE_CHECKING:
    from ..runtime import Gateway

KEPT = 100


class Reloads(Observer):
    def __init__(self, gateway: Gateway, kept: int = KEPT):
        first = gateway.last_reload
        self._records: deque[dict[str, Any]] = deque(maxlen=kept)
        self._lock = threading.Lock()  # reloads are told on the event loop; the console reads there too, but cheap
        self._records.append({
            "at": first.at, "ok": first.ok, "changed": first.changed, "version": first.version,
            "duration_ms": round(first.duration_s * 1000, 1), "tools": len(gateway.catalog.tools),
            "added": [], "removed": [], "modified": [], "problems": [str(p) for p in first.problems],
            "timed_out": first.timed_out, "trigger": "start", "initial": True,
        })

    def event(self, event: Event) -> None:
        if event.kind != "reload":
            return
        data = event.data
        record = {
            "at": event.at, "ok": data.get("ok"), "changed": data.get("changed"), "version": data.get("version"),
            "duration_ms": round(float(data.get("duration_s") or 0.0) * 1000, 1), "tools": data.get("tools"),
            "added": list(data.get("added") or ()), "removed": list(data.get("removed") or ()),
            "modified": list(data.get("modified") or ()), "problems": list(data.get("problems") or ()),
            "timed_out": bool(data.get("timed_out")), "trigger": data.get("trigger"), "initial": False,
        }
        with self._lock:
            self._records.append(record)

    def history(self) -> list[dict[str, Any]]:
        """The reloads kept, newest first."""
        with self._lock:
            return list(reversed(self._records))


def make(gateway: Gateway) -> Reloads:
    return Reloads(gateway)
