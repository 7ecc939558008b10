"""The cyclic garbage collector paused while a catalog is built from scratch.

A build allocates ~100 container objects per tool and frees few of them: at 10,000 tools CPython's collector ran
dozens of collections over a growing heap that found nothing to free (~0.2 s of a 0.8 s warm start; loading
10,000 tools' kept data took 0.13 s with them, 0.035 s without). Reference counting still frees everything at
once; only cycles wait for the collector, which runs again when the pause ends. The pause is bounded by whoever
holds it (a build is waited for with a deadline), a collector the host process turned off stays off, and objects
it froze stay frozen.

When it ends, what the pause allocated goes to the oldest generation at once. Left in the youngest, it was walked
once per younger generation as it aged: at 10,000 tools a ~65 ms walk and a ~90 ms one, both before the first
request, as part of a ~0.9-1.0 s warm restart. Nothing stays frozen, so the full collections still find cycles
among those objects. The first one walks the whole heap once (~125 ms at 10,000 tools), when CPython's count of
objects that survived since the last full collection says so: a while into serving instead of at start-up.
Measured in one run, five starts each, frozen then unfrozen against left young: `serve` start -> /healthz ok
1.04-1.15 s against 1.17-1.41 s (no bytecode cache). `bench_speed.py reload`: 10,000 tools 51/54 ms against
58/75 ms, 100,000 tools 211 ms against 243 ms. An earlier measurement found this slowed reloads, but it was
taken while the build cache's write still landed in the next reload.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_holders = 0  # pauses under way (two gateways may start at once in one process)
_was_enabled = False
_host_froze = False  # the host process froze objects itself (gc.freeze before a fork): not unfrozen here


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic collection until the last of the pauses under way ends."""
    global _holders, _was_enabled, _host_froze
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            _host_froze = gc.get_freeze_count() > 0
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                # Freeze then unfreeze moves every tracked object to the oldest generation (two list splices):
                # what the pause allocated skips the walks of the younger ones, and nothing stays frozen. Not
                # when the host froze objects: unfreeze would hand back all of them, not only ours.
                if not _host_froze:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
