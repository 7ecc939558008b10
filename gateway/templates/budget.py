"""How much time and memory one render of admins' templates may take, and where it runs.

Every guarded operation of the sandbox (``gateway.templates.sandbox``) reports to the budget of the render it belongs to:
``tick()`` as it runs (loop iterations, calls, operators, filters, output) and ``spend(size)`` for what it makes.
A render that runs past its deadline, or makes more than ``MAX_PRODUCED`` characters and items in all, stops
with ``TemplateTooCostly``.

``run_bounded(work, deadline)`` runs a piece of work that renders templates (an HTTP request's parts, a
response template) so that it cannot hold the event loop: it first runs inline for ``INLINE_SLICE_S`` (the
common template is done in microseconds, and a thread hop would cost more), and if that is not enough — or a
filter is about to work on a large input (``INLINE_MAX_INPUT``) — it starts over in a worker thread, bounded by ``RENDER_TIME_S`` and the caller's deadline. Each single operation is kept
short by the sandbox's size limits; a long render is many operations, so the thread gives the GIL back to the
event loop every few milliseconds (``sys.getswitchinterval()``) and stops itself at its deadline, even when the
caller has stopped waiting (a tool's timeout).

The budget of the running render is per thread: the inline attempt and the worker each install their own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from jinja2.exceptions import SecurityError

T = TypeVar("T")

RENDER_TIME_S = 1.0  # one render, however long the tool's timeout: a longer one is a runaway template
INLINE_SLICE_S = 0.002  # how long a render may run on the event loop before it moves to a worker thread
# A filter given more characters and members than this moves an inline render to a worker thread before it
# runs: once running, one filter call (a sort, striptags, urlize over a large text) cannot be interrupted.
INLINE_MAX_INPUT = 2_000
MAX_PRODUCED = 8_000_000  # characters and items one render may make in all (each value is capped by the sandbox)
COMPILE_TIME_S = 0.5  # Jinja computes constant expressions while compiling: the most it may spend on one template
# What compiling may make per character of the template's source (constant folding of `'ab' | upper` and the like).
COMPILE_PRODUCED_PER_CHAR = 64

# Few threads: renders that need one are rare (a runaway template, a huge loop); each stops at its deadline.
_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="gateway-render")
_local = threading.local()


class TemplateTooCostly(SecurityError):
    """A template tried to compute more than its limits allow (a size, the time of a render, all it makes)."""


class SliceSpent(Exception):
    """The inline slice is spent: the work starts over in a worker thread. Never leaves ``run_bounded``."""


class Budget:
    """What the render running in this thread may still spend."""

    __slots__ = ("deadline", "max_produced", "produced", "slice_end", "time_s")

    def __init__(self, time_s: float, *, max_produced: int = MAX_PRODUCED, slice_s: float | None = None,
                 named_s: float | None = None):
        now = time.monotonic()
        # The budget the error names: the whole render's, also where a thread carries on with what is left of it.
        self.time_s = time_s if named_s is None else named_s
        self.deadline = now + time_s
        self.slice_end = now + slice_s if slice_s is not None else None
        self.produced = 0
        self.max_produced = max_produced

    def tick(self) -> None:
        now = time.monotonic()
        if self.slice_end is not None and now > self.slice_end:
            raise SliceSpent
        if now > self.deadline:
            raise TemplateTooCostly(f"the template ran longer than {self.time_s:.2g} s (a loop or recursion too "
                                    "large for a template)")

    @property
    def inline(self) -> bool:
        """Whether this render runs on the event loop (it then hands over to a thread when it gets long)."""
        return self.slice_end is not None

    def spend(self, size: int) -> None:
        self.produced += size
        if self.produced > self.max_produced:
            raise TemplateTooCostly(f"the template made more than {self.max_produced:,} characters and items "
                                    "in all")


def current() -> Budget:
    """The budget of the render running in this thread; outside any render, a fresh default one."""
    budget = getattr(_local, "budget", None)
    return budget if budget is not None else Budget(RENDER_TIME_S)


@contextmanager
def bounded(time_s: float = RENDER_TIME_S, *, max_produced: int = MAX_PRODUCED,
            slice_s: float | None = None, named_s: float | None = None) -> Iterator[Budget]:
    """Install a budget for what runs in this thread inside the block; within a render already bounded, that
    render's budget keeps counting (so the parts of one request share one)."""
    active = getattr(_local, "budget", None)
    if active is not None:
        yield active
        return
    _local.budget = budget = Budget(time_s, max_produced=max_produced, slice_s=slice_s, named_s=named_s)
    try:
        yield budget
    finally:
        _local.budget = None


def compiling(source: str):
    """The budget of compiling one template: constant folding may make a little per character of source."""
    return bounded(COMPILE_TIME_S, max_produced=4096 + COMPILE_PRODUCED_PER_CHAR * len(source))


async def run_bounded(work: Callable[[], T], deadline: float | None = None) -> T:
    """``work()`` under a render budget, never holding the event loop for longer than a slice: see the module
    docstring. ``deadline`` is in event-loop time (the tool's); the render stops by then or after
    ``RENDER_TIME_S``, whichever is first."""
    loop = asyncio.get_running_loop()
    time_s = RENDER_TIME_S if deadline is None else max(min(RENDER_TIME_S, deadline - loop.time()), 0.0)
    try:
        with bounded(time_s, slice_s=INLINE_SLICE_S):
            return work()
    except SliceSpent:
        pass
    started = time.monotonic()
    return await loop.run_in_executor(_THREADS, _in_thread, work, started + time_s, time_s)


def _in_thread(work: Callable[[], T], deadline: float, time_s: float) -> T:
    # Time spent waiting for a free thread counts: the render ends by the caller's deadline either way.
    with bounded(max(deadline - time.monotonic(), 0.0), named_s=time_s):
        return work()
