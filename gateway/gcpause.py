"""The cyclic garbage collector paused while a catalog is built from scratch.

A build allocates ~100 container objects per tool and frees few of them: at 10,000 tools CPython's collector ran
dozens of collections over a growing heap that found nothing to free (~0.2 s of a 0.8 s warm start, ~0.1 s of
a 0.04 s snapshot load). Reference counting still frees everything at once; only cycles wait for the collector,
which runs again when the pause ends. The pause is bounded by whoever holds it (a build is waited for with a
deadline), and a collector the host process turned off stays off.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

# Set by a process that serves (``tool-gateway serve``): what the first build made lives as long as the process, so
# it is frozen (``gc.freeze``) out of every later collection instead of being walked by the first full one (~50 ms
# at 10,000 tools, right after the pause, before the first request). Cycles among those objects are never
# collected; a reload's catalog replaces them without cycles (freed by reference counting). A library host keeps
# its own collector's rules: False.
freeze_after_first_build = False
_lock = threading.Lock()
_holders = 0  # pauses under way (two gateways may start at once in one process)
_was_enabled = False


@contextlib.contextmanager
def paused_gc(*, first_build: bool = False) -> Iterator[None]:
    """No cyclic collection until the last of the pauses under way ends; the first build's objects then frozen
    when the process asked for it (``freeze_after_first_build``)."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    ok = False
    try:
        yield
        ok = True
    finally:
        with _lock:
            _holders -= 1
            if ok and first_build and freeze_after_first_build:
                gc.freeze()
            if _holders == 0 and _was_enabled:
                gc.enable()
