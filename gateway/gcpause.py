"""The cyclic garbage collector paused while a catalog is built from scratch.

A build allocates ~100 container objects per tool and frees few of them: at 10,000 tools CPython's collector ran
dozens of collections over a growing heap that found nothing to free (~0.2 s of a 0.8 s warm start; loading
10,000 tools' kept data took 0.13 s with them, 0.035 s without). Reference counting still frees everything at
once; only cycles wait for the collector, which runs again when the pause ends. The pause is bounded by whoever
holds it (a build is waited for with a deadline), and a collector the host process turned off stays off.

When it ends, the collections skipped come due: what the pause allocated (~1M objects at 10,000 tools) is walked
once in each generation as it ages (~50 ms each, the first before the first request), after which CPython counts
it as long-lived and leaves it alone. Two ways to spare those walks were measured and dropped, because each made
reloads of one file in a serving gateway slower (bench_speed.py reload at 10,000 tools: rebuild 17-28 ms ->
54-99 ms in 2 of 2 and 3 of 5 runs): ``gc.freeze`` (a frozen heap keeps CPython's count of long-lived objects
small, so full collections came often after), and freeze-then-unfreeze (the one full collection left came due
later, in the first reloads).
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
