"""Work that may never end (a catalog build runs admin code: imports, file reads), waited for with a deadline.

The work runs in a daemon thread of its own, never in asyncio's default executor: a thread that never returns
cannot be killed, and the executor's threads are joined when the process exits, so one stuck build would keep
``serve`` alive after SIGTERM. A daemon thread is abandoned at exit instead. Whoever gave up on the work must
also make sure it cannot touch state later work uses (the gateway hands each build its own caches).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


class Interrupted(Exception):
    """The work raised ``SystemExit`` or ``KeyboardInterrupt``: admin code's, never a reason to stop the waiter."""


def start(work: Callable[[], T], name: str) -> Future[T]:
    """Run ``work`` in a new daemon thread; its outcome arrives in the returned future."""
    future: Future[T] = Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(work())
        except Exception as exc:  # noqa: BLE001 — the waiter's to judge, with the build's problems
            future.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 — re-raised where the waiter awaits, it would stop the loop
            future.set_exception(Interrupted(f"{type(exc).__name__}: {exc}"))

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
