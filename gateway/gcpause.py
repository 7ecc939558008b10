"""The cyclic garbage collector paused while a catalog is built from scratch.

A build allocates ~100 container objects per tool and frees few of them: at 10,000 tools CPython's collector ran
dozens of collections over a growing heap that found nothing to free (~0.2 s of a 0.8 s warm start; loading
10,000 tools' kept data took 0.13 s with them, 0.035 s without). Reference counting still frees everything at once; only cycles wait for the collector,
which runs again when the pause ends. The pause is bounded by whoever holds it (a build is waited for with a
deadline), and a collector the host process turned off stays off.

The collections skipped come due when it ends (~50 ms at 10,000 tools, before the first request). Freezing the
first build's objects out of them (``gc.freeze``) spared those, but made every later reload of one file in a
serving gateway 30-70 ms slower (bench_speed.py reload: rebuild 22 -> 54-99 ms): not done.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_holders = 0  # pauses under way (two gateways may start at once in one process)
_was_enabled = False


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic collection until the last of the pauses under way ends."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
