"""Running admin Python code: the worker threads of sync tools and sync invocation filters, each tool's share of
them, and exits turned into errors.

Python cannot stop a thread, so a sync tool that outlives its timeout keeps its worker until it returns on its
own. Two rules keep such tools from starving the others:

- **A cap per tool.** A sync call takes one of its tool's ``max_concurrent_calls_per_tool`` slots before it gets
  a thread, and the *thread* gives the slot back when the function really returns — not when the caller gave up.
  A hung tool therefore holds at most that many workers; its further calls wait for a slot inside their own
  timeout and end as the ordinary timeout error, without ever taking a thread.
- **Room for hung calls in the pool.** Threads are made on demand up to ``WORKERS``. Calls whose callers still
  wait are bounded by the gateway's ``max_concurrent_calls`` (64 by default); the rest of the pool is room for
  threads that outlived their callers: at the defaults, ``(256 - 64) / 16 = 12`` tools may hang at their cap at
  once before live sync calls wait for a thread (they then still end within their timeout). Threads of hung calls
  come back only when the calls return; a tool that never returns holds its slots until the process restarts.

The slots live per event loop (one per server process), keyed by the definitions directory and tool id, so a
reload that rebuilds a tool keeps counting the threads its previous build left running.

Sync filters (``gateway.filters.chains``) run under the same two rules, with slots of their own per tool and place in
its chain, in a pool of their own (``FILTER_POOL``): a filter's thread waits in ``next()`` while the tool it wraps
runs, so sharing the tools' pool or slots would let hung filters keep their own tools from a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

WORKERS = 256
# Up to 8 sync filter places hung at their cap (128 / 16) before live sync filters queue for a thread.
FILTER_WORKERS = 128
# What a tool may raise that Python does not count as an error (``except Exception`` misses them). asyncio's
# CancelledError is not among them: it must keep meaning "this call was cancelled".
_EXITS = (SystemExit, KeyboardInterrupt, GeneratorExit)

_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, tuple[int, asyncio.Semaphore]]] = \
    weakref.WeakKeyDictionary()


class ToolAborted(RuntimeError):
    """A tool raised SystemExit, KeyboardInterrupt or GeneratorExit: a failure of that tool, nothing more.

    Raised ``from`` the original, so the log shows what the tool raised; the name of its type is the message.
    """

    def __init__(self, original: BaseException):
        self.original = original
        super().__init__(f"the tool raised {type(original).__name__}({', '.join(map(repr, original.args))})")


async def call_async(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        return await function(**kwargs)
    except _EXITS as exc:
        raise ToolAborted(exc) from exc


async def call_sync(key: Any, limit: int, function: Callable[..., Any], kwargs: dict[str, Any],
                    pool: _Pool | None = None) -> Any:
    """Run ``function`` in a thread of ``pool`` (the tools' by default) once one of the ``limit`` slots of ``key``
    is free.

    The tool sees the caller's context variables, as in anyio.
    """
    loop = asyncio.get_running_loop()
    slot = _slot(loop, key, limit)
    await slot.acquire()  # cancelled by the caller's timeout while waiting: no slot taken, no thread used
    call = _Call(loop, slot, contextvars.copy_context(), function, kwargs)
    (pool or _POOL).submit(call)
    try:
        return await call.future
    finally:
        call.leave()


class _Pool:
    """Worker threads taking calls from a C ``queue.SimpleQueue``, made on demand up to ``WORKERS``.

    Leaner than ``loop.run_in_executor`` on a ``ThreadPoolExecutor`` (a ``concurrent.futures.Future`` with its
    ``Condition`` per call, chained to an asyncio future by callbacks): a call is one queue item, and its outcome
    one ``call_soon_threadsafe``. Measured: ~100 µs less CPU per call (docs/benchmarks.md, "Where the serving time goes").
    Threads are daemons: a tool that outlived its caller never holds up the process's exit.
    """

    def __init__(self, limit: int, name: str) -> None:
        self.limit, self.name, self.queue, self.lock = limit, name, queue.SimpleQueue(), threading.Lock()
        self.idle = self.threads = 0  # idle: threads that finished a call and wait (or are about to) for another

    def submit(self, call: _Call) -> None:
        self.queue.put(call)
        with self.lock:
            if self.idle:  # a waiting thread takes it
                self.idle -= 1
                return
            if self.threads >= self.limit:  # all busy: the call waits in the queue for the first one free
                return
            self.threads += 1
        threading.Thread(target=self._work, name=f"{self.name}_{self.threads}", daemon=True).start()

    def _work(self) -> None:
        _batch_policy()
        get, lock = self.queue.get, self.lock
        while True:
            get().run()
            with lock:
                self.idle += 1


def _batch_policy() -> None:
    """Put the calling worker thread under Linux's ``SCHED_BATCH``: same share of the CPU, but waking it (a call
    put on the queue) does not preempt the event loop's thread, which holds the GIL — the woken worker would only
    find the GIL taken and sleep again, two context switches for nothing. It runs when the loop waits or its
    time slice ends. Measured with a trivial sync tool, 16 calls at once, server on one core: context switches
    per REST call 1.25 -> 0.49 (docs/benchmarks.md, "Where the serving time goes"). Elsewhere (no such policy, or not
    permitted) the thread keeps the default policy. Threads and processes a tool starts inherit the policy (Linux
    offers no reset for it), which changes their wake-ups only, not their share of the CPU."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


_POOL = _Pool(WORKERS, "gateway-tool")
FILTER_POOL = _Pool(FILTER_WORKERS, "gateway-filter")


class _Call:
    """One sync call: run by a worker, which posts its outcome to the loop; its hold on its slot is given back by
    whichever of the caller and the worker is done last.

    A caller that leaves before a worker took the call also keeps the call from ever running.
    """

    __slots__ = ("context", "function", "future", "holders", "kwargs", "left", "lock", "loop", "slot", "started")

    def __init__(self, loop: asyncio.AbstractEventLoop, slot: asyncio.Semaphore, context: contextvars.Context,
                 function: Callable[..., Any], kwargs: dict[str, Any]):
        self.loop, self.slot, self.lock = loop, slot, threading.Lock()
        self.context, self.function, self.kwargs = context, function, kwargs
        self.future: asyncio.Future[Any] = loop.create_future()
        self.started = self.left = False
        self.holders = 2  # the caller and the worker

    def run(self) -> None:
        """In a worker thread."""
        with self.lock:
            if self.left:
                return  # the caller gave up before a thread was free; nobody waits for this result
            self.started = True
        value = error = None
        try:
            value = self.context.run(self.function, **self.kwargs)
        except _EXITS as exc:
            error = ToolAborted(exc)
            error.__cause__ = exc
        except BaseException as exc:  # noqa: BLE001 — the tool's own failure, raised to its caller on the loop
            error = exc
        # Dropped before posting, so that in the usual order (the worker first) the caller gives the slot back
        # itself and one post per call suffices.
        last = self._drop()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits, its semaphores went
            self.loop.call_soon_threadsafe(self._settle, value, error, last)

    def _settle(self, value: Any, error: BaseException | None, last: bool) -> None:
        """On the loop: the caller's answer (unless it left), and the slot if the worker was the last holder."""
        if not self.future.done():
            if error is None:
                self.future.set_result(value)
            else:
                self.future.set_exception(error)
        if last:
            self.slot.release()

    def leave(self) -> None:
        """The caller is done (answered, or gave up): on the loop, so the slot is given back directly."""
        with self.lock:
            self.left = True
            never_ran = not self.started
        if never_ran or self._drop():
            self.slot.release()

    def _drop(self) -> bool:
        with self.lock:
            self.holders -= 1
            return self.holders == 0


def _slot(loop: asyncio.AbstractEventLoop, key: Any, limit: int) -> asyncio.Semaphore:
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = {}
    known = slots.get(key)
    if known is None or known[0] != limit:
        # A changed limit starts a new count; threads still running give their slots back to the old one.
        known = slots[key] = (limit, asyncio.Semaphore(limit))
    return known[1]
