"""Running Python tools: the worker threads of sync tools, each tool's share of them, and exits turned into errors.

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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# asyncio's executor hop costs half the CPU of anyio.to_thread's (~70 vs ~150 µs a call, measured under load).
WORKERS = 256
_THREADS = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="gateway-tool")
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


async def call_sync(key: Any, limit: int, function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run ``function`` in a worker thread once one of the ``limit`` slots of ``key`` is free.

    The tool sees the caller's context variables, as in anyio.
    """
    loop = asyncio.get_running_loop()
    slot = _slot(loop, key, limit)
    await slot.acquire()  # cancelled by the caller's timeout while waiting: no slot taken, no thread used
    call = _Call(loop, slot)
    try:
        return await loop.run_in_executor(_THREADS, call.run, contextvars.copy_context().run, function, kwargs)
    finally:
        call.leave()


class _Call:
    """One sync call's hold on its slot, given back by whichever of the caller and the worker is done last.

    A caller that leaves before a worker took the call also keeps the call from ever running.
    """

    __slots__ = ("holders", "left", "lock", "loop", "slot", "started")

    def __init__(self, loop: asyncio.AbstractEventLoop, slot: asyncio.Semaphore):
        self.loop, self.slot, self.lock = loop, slot, threading.Lock()
        self.started = self.left = False
        self.holders = 2  # the caller and the worker

    def run(self, run: Callable[..., Any], function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        with self.lock:
            if self.left:
                return None  # the caller gave up before a thread was free; nobody waits for this result
            self.started = True
        try:
            return run(function, **kwargs)
        except _EXITS as exc:
            raise ToolAborted(exc) from exc
        finally:
            if self._drop():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: its semaphores went with it
                    self.loop.call_soon_threadsafe(self.slot.release)

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
