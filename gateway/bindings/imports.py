"""Importing an admin's module — running its top-level code — so that nothing it does can stop or wedge a build.

The import runs in a daemon thread of its own and the build waits at most ``import_timeout_s`` for it. Whatever
the module raises, ``SystemExit`` and ``KeyboardInterrupt`` included, becomes a message for the admin instead of
leaving the build (which would end ``validate`` with the module's exit code, or kill the reloader).

A module that is still importing when the limit passes cannot be stopped: its thread keeps running, holding the
import system's lock on that module's name. So each import is remembered until it ends, and the limit is the
import's, not the build's:

- a later build naming the same module, with ``python/`` unchanged, waits for what remains of that import's
  limit (nothing, once it passed) rather than starting another import that would only queue behind its lock; if
  the import has finished meanwhile, its outcome is the answer;
- once ``python/`` changed (the admin fixed the module), the import locks the stuck threads hold are dropped
  from the import system's table, so the new content imports under fresh locks. The stuck threads go on until
  their code returns (a busy loop keeps a core busy until the process restarts). If one ever finishes, the fresh
  module stays in ``sys.modules``; if its code fails instead, the import system removes the fresh module there,
  and the next build imports it again.

Dropping those locks reaches into CPython's ``importlib._bootstrap._module_locks`` (name → weak reference to a
lock whose ``owner`` is a thread id; checked on 3.11). Where that table is missing, nothing is dropped: a module
whose import is stuck stays a problem, even once fixed, until the process restarts.
"""

from __future__ import annotations

import _imp
import importlib
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType


@dataclass(eq=False)
class _Import:
    name: str
    digest: str | None  # of python/ when the import began; None for an installed package, whose code is fixed
    began: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    outcome: ModuleType | str = ""
    thread: threading.Thread | None = None

    def run(self) -> None:
        try:
            self.outcome = _import(self.name)
        finally:
            self.done.set()


_lock = threading.Lock()
_running: dict[str, _Import] = {}  # imports begun and not yet collected by a build, by module name


def import_within(name: str, digest: str | None, timeout: float) -> ModuleType | str:
    """The module ``name``, or why it cannot be had (a message for the admin) within ``timeout`` seconds.

    ``digest`` identifies the content of ``python/`` for a local module (None for an installed package).
    """
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        return module  # imported before, completely: nothing of the admin's runs again
    with _lock:
        if digest is not None:
            _drop_stale(digest)
        attempt = _running.get(name)
        if attempt is None:
            attempt = _running[name] = _Import(name, digest)
            attempt.thread = threading.Thread(target=attempt.run, name=f"gateway-import-{name}", daemon=True)
            attempt.thread.start()
    if not attempt.done.wait(max(0.0, attempt.began + timeout - time.monotonic())):
        running = time.monotonic() - attempt.began
        return (f"importing module '{name}' did not finish within {timeout:g} s (import_timeout_s; still running "
                f"after {running:.0f} s): its top-level code must not block or run long")
    with _lock:
        if _running.get(name) is attempt:
            del _running[name]
    return attempt.outcome


def _import(name: str) -> ModuleType | str:
    try:
        return importlib.import_module(name)
    except SyntaxError as exc:
        where = f"{Path(exc.filename or '?').name}:{exc.lineno}:{exc.offset}"
        return f"cannot import module '{name}': syntax error at {where}: {exc.msg}"
    except BaseException as exc:  # noqa: BLE001 — the module's code may raise anything, exits included
        last = traceback.extract_tb(exc.__traceback__)[-1:] or None
        where = f" ({Path(last[0].filename).name}:{last[0].lineno})" if last else ""
        detail = f": {exc}" if str(exc) else ""
        return f"cannot import module '{name}': {type(exc).__name__}{detail}{where}"


def _drop_stale(digest: str) -> None:
    """Forget the imports of local modules from an older ``python/`` still running, with the locks they hold."""
    stale = [a for a in _running.values() if a.digest is not None and a.digest != digest]
    if not stale:
        return
    owners = {a.thread.ident for a in stale if a.thread is not None}
    for attempt in stale:
        del _running[attempt.name]
    locks = getattr(getattr(importlib, "_bootstrap", None), "_module_locks", None)
    if not isinstance(locks, dict):
        return
    _imp.acquire_lock()  # what CPython's import system holds while it changes _module_locks
    try:
        for name, ref in list(locks.items()):
            lock = ref()
            if lock is not None and getattr(lock, "owner", None) in owners:
                del locks[name]
    finally:
        _imp.release_lock()
