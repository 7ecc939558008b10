"""The history of reloads, newest first, for the admin console: what each did to the catalog and how it went.

Kept from the ``reload`` events a gateway emits (``gateway.runtime.rebuild``), in a bounded ring (``KEPT``): a
gateway that reloads on every save for weeks holds the last ``KEPT`` outcomes, not all of them. The first
build (made before any observer was attached) opens the history, marked ``initial``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..events import Event, Observer

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

KEPT = 100
# Ids and problems kept per reload: a broken 8 MiB file can have 100,000 problems, and a hundred such reloads
# must not hold ten million strings. The rest is counted in a last entry.
LISTED = 200


class Reloads(Observer):
    def __init__(self, gateway: Gateway, kept: int = KEPT):
        first = gateway.last_reload
        self._records: deque[dict[str, Any]] = deque(maxlen=kept)
        self._lock = threading.Lock()  # reloads are told on the event loop; the console reads there too, but cheap
        self._records.append({
            "at": first.at, "ok": first.ok, "changed": first.changed, "version": first.version,
            "duration_ms": round(first.duration_s * 1000, 1), "tools": len(gateway.catalog.tools),
            "added": [], "removed": [], "modified": [], "problems": _listed(str(p) for p in first.problems),
            "timed_out": first.timed_out, "initial": True,
        })

    def event(self, event: Event) -> None:
        if event.kind != "reload":
            return
        data = event.data
        record = {
            "at": event.at, "ok": data.get("ok"), "changed": data.get("changed"), "version": data.get("version"),
            "duration_ms": round(float(data.get("duration_s") or 0.0) * 1000, 1), "tools": data.get("tools"),
            "added": _listed(data.get("added") or ()), "removed": _listed(data.get("removed") or ()),
            "modified": _listed(data.get("modified") or ()), "problems": _listed(data.get("problems") or ()),
            "timed_out": bool(data.get("timed_out")), "initial": False,
        }
        with self._lock:
            self._records.append(record)

    def history(self) -> list[dict[str, Any]]:
        """The reloads kept, newest first."""
        with self._lock:
            return list(reversed(self._records))


def _listed(items: Iterable[str]) -> list[str]:
    """At most ``LISTED`` of ``items``, then one entry saying how many more there were."""
    listed = list(items)
    if len(listed) <= LISTED:
        return listed
    return [*listed[:LISTED], f"… and {len(listed) - LISTED} more"]


def make(gateway: Gateway) -> Reloads:
    return Reloads(gateway)
