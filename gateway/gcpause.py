"""The cyclic garbage collector paused while a catalog is built from scratch.

A build allocates ~100 container objects per tool and frees few of them: at 10,000 tools CPython's collector ran
dozens of collections over a growing heap that found nothing to free (~0.2 s of a 0.8 s warm start; loading
10,000 tools' kept data took 0.13 s with them, 0.035 s without). Reference counting still frees everything at once; only cycles wait for the collector,
which runs again when the pause ends. The pause is bounded by whoever holds it (a build is waited for with a
deadline), and a collector the host process turned off stays off.

When it ends, what it allocated (~1M objects at 10,000 tools) would sit in the youngest generation: the next
allocations would walk it there, again in the middle one, then in the oldest (~50 ms each, the first before the
first request). It is moved to the oldest generation at once instead (``gc.freeze`` then ``gc.unfreeze``), where
one full collection walks it later, when the process has made enough long-lived objects of its own. Leaving it
frozen spared that walk too, but a frozen heap keeps CPython's count of long-lived objects small, so full
collections came often after: every reload of one file in a serving gateway was 30-70 ms slower (bench_speed.py
reload: rebuild 22 -> 54-99 ms).
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
                # What the pause allocated goes to the oldest generation at once (freeze, then unfreeze): no
                # collection walks it before the first request, and one full collection later, not three.
                gc.freeze()
                gc.unfreeze()
                gc.enable()
