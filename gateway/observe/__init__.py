"""The consumers of the event stream (``gateway.events``): each module here makes one ``Observer`` from the
settings, or none when it is turned off.

``attach(gateway)`` subscribes them all to ``gateway.events`` once per gateway and keeps them by name in
``gateway.observers`` (the ``/metrics`` route finds its registry there, ``/status`` its SLO figures, the console
its live feed); ``detach(gateway)`` unsubscribes them and closes what they hold (the audit file's writer).
Producers never import this package: the arrows point from here to ``gateway.events`` only.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

# Module names below gateway.observe; each has ``make(gateway) -> Observer | None``. Order matters only for
# ``begin``: a tracer listed before the call log makes the trace id known to the line the call log writes.
CONSUMERS: tuple[str, ...] = (
    "tracing",
    "reloads",
    "live",
    "calllog",
    "metrics",
    "slo",
    "audit",
    "approval_hook",
)


def attach(gateway: Gateway) -> None:
    if gateway.observers:
        return
    for name in CONSUMERS:
        observer = import_module(f"{__name__}.{name}").make(gateway)
        if observer is not None:
            gateway.observers[name] = observer
            gateway.events.subscribe(observer)


def detach(gateway: Gateway) -> None:
    for name, observer in list(gateway.observers.items()):
        gateway.events.unsubscribe(observer)
        observer.close()
        del gateway.observers[name]
