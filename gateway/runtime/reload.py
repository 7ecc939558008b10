"""Hot reload: rebuild the catalog when the definitions change on disk, or on ``SIGHUP``.

``reloading(gateway)`` is a service for the app's lifespan. While it runs:

- ``watchfiles`` watches the real definitions directory (YAML, ``python/`` modules, browser scripts; caches and
  editor swap files are ignored) and, without recursion, the directory holding the definitions path, so that
  swapping a symlinked definitions path, or deleting and recreating the directory, is seen too. A Kubernetes
  ConfigMap update (new ``..<timestamp>`` directory, ``..data`` link renamed over) happens inside the watched
  directory and needs nothing more.
- a burst of writes becomes one change: ``watchfiles`` waits until no new event arrived for ``STEP_MS``
  (a save is a handful of events within microseconds, a ``git checkout`` or ConfigMap swap within a few
  milliseconds), and never groups for longer than ``DEBOUNCE_MS``.
- ``SIGHUP`` asks for a rebuild too (when the event loop runs in the main thread, as under ``serve``).

Every trigger sets one flag; a single task rebuilds while it is set, so one rebuild runs at a time and the
triggers that arrive during a rebuild cost one more rebuild, not one each. What a rebuild means — all or nothing,
swap on content change only, problems on ``/status`` and in the log, listeners told — is ``Gateway.reload``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from watchfiles import Change, DefaultFilter, awatch

from .gateway import Gateway

log = logging.getLogger("gateway.reload")

# The watcher's own notice of a write is about twice its step (64 ms at 30, 23 ms at 10: bench/bench_reload.py's
# floor), and it is part of every reload's latency; 10 ms still groups a save or a checkout's writes.
STEP_MS = 10
DEBOUNCE_MS = 1_600


@dataclass(frozen=True)
class _Place:
    """Where the definitions path leads now: a change here means watching a different directory."""

    real: str | None  # None while the path does not exist
    inode: int | None

    @classmethod
    def of(cls, root: Path) -> _Place:
        try:
            return cls(os.path.realpath(root), os.stat(root).st_ino) if root.is_dir() else cls(None, None)
        except OSError:
            return cls(None, None)


@dataclass
class _Watch:
    path: Path
    stop: asyncio.Event  # awatch checks it between steps: stopping takes one step, not a cancelled thread's wait
    task: asyncio.Task[None] | None = None


class Reloader:
    """Rebuilds ``gateway``'s catalog on each trigger: file changes (when ``watch``), ``SIGHUP``, ``trigger()``."""

    def __init__(self, gateway: Gateway, *, watch: bool = True, poll: bool = False, step_ms: int = STEP_MS,
                 debounce_ms: int = DEBOUNCE_MS):
        self.gateway = gateway
        self.watch = watch
        self.poll = poll
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.root = Path(os.path.abspath(gateway.settings.definitions))
        self._wanted = asyncio.Event()
        self._place = _Place(None, None)
        self._parent: _Watch | None = None
        self._directory: _Watch | None = None
        self._rebuilder: asyncio.Task[None] | None = None
        self._sighup = False

    @property
    def watched(self) -> tuple[Path, ...]:
        """The directories watched now: the definitions directory (recursively) and its parent (not)."""
        return tuple(w.path for w in (self._directory, self._parent) if w and w.task and not w.task.done())

    def trigger(self) -> None:
        """Ask for a rebuild (from the event loop's thread, where signal handlers run too)."""
        self._wanted.set()

    async def start(self) -> None:
        # watchfiles logs every batch at INFO; this module says it at DEBUG.
        logging.getLogger("watchfiles.main").setLevel(logging.WARNING)
        self._rebuilder = asyncio.create_task(self._rebuild_forever(), name="gateway-reload")
        # An upstream MCP server's tools/list_changed (or its coming back) asks for a rebuild, like a file change.
        self.gateway.mcp_pool.start(self.trigger)
        if self.watch:
            self._follow_root()
            self._parent = self._start_watch(self.root.parent, recursive=False,
                                             accept=lambda path: Path(path).name == self.root.name)
            log.info("watching %s for changes%s", self.root, " (polling)" if self.poll else "")
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not the main thread: no signals
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.trigger)
            self._sighup = True

    async def stop(self) -> None:
        if self._sighup:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            self._sighup = False
        watches = [w for w in (self._directory, self._parent) if w is not None]
        for watch in watches:
            watch.stop.set()
        if self._rebuilder is not None:
            self._rebuilder.cancel()  # a build already running finishes in its thread; its result is dropped
        await asyncio.gather(*(w.task for w in watches if w.task), *([self._rebuilder] if self._rebuilder else []),
                             return_exceptions=True)
        self._directory = self._parent = self._rebuilder = None

    async def _rebuild_forever(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            try:
                await self.gateway.reload()  # logs and records its own outcome
            except Exception:  # the reload loop must outlive any single failure
                log.exception("reload failed unexpectedly")
            if self.watch:
                self._follow_root()

    def _follow_root(self) -> None:
        """(Re)start the recursive watch when the definitions path leads to a different directory than before."""
        place = _Place.of(self.root)
        running = self._directory is not None and self._directory.task is not None and not self._directory.task.done()
        if place == self._place and (running or place.real is None):
            return
        if self._directory is not None:
            self._directory.stop.set()
            self._directory = None
        self._place = place
        if place.real is not None:
            ignored = DefaultFilter()
            self._directory = self._start_watch(Path(place.real), recursive=True,
                                                accept=lambda path: ignored(Change.modified, path))

    def _start_watch(self, path: Path, *, recursive: bool, accept: Callable[[str], bool]) -> _Watch:
        watch = _Watch(path, asyncio.Event())
        watch.task = asyncio.create_task(self._watch(watch, recursive=recursive, accept=accept, poll=self.poll),
                                         name=f"gateway-watch {path}")
        return watch

    async def _watch(self, watch: _Watch, *, recursive: bool, accept: Callable[[str], bool], poll: bool) -> None:
        # awatch sets up its watch before it first waits; this callback runs after that, so one rebuild covers
        # whatever changed before the watch began (since the last build, or while the watch was moved).
        asyncio.get_running_loop().call_soon(self._wanted.set)
        try:
            async for changes in awatch(watch.path, watch_filter=lambda _change, changed: accept(changed),
                                        stop_event=watch.stop, debounce=self.debounce_ms, step=self.step_ms,
                                        recursive=recursive, force_polling=poll, ignore_permission_denied=True):
                log.debug("%d change(s) below %s", len(changes), watch.path)
                self._wanted.set()
        except FileNotFoundError:  # gone before the watch began; the parent's watch sees it come back
            self._wanted.set()
        except OSError as exc:  # out of inotify watches, or a file system without notifications
            if poll:
                log.error("cannot watch %s: %s; reload with SIGHUP or POST /admin/reload", watch.path, exc)
                return
            log.warning("cannot watch %s for notifications (%s): polling it instead", watch.path, exc)
            await self._watch(watch, recursive=recursive, accept=accept, poll=True)


@contextlib.asynccontextmanager
async def reloading(gateway: Gateway) -> AsyncIterator[Reloader]:
    """The reload service for the app's lifespan: watches unless ``settings.reload`` is off; SIGHUP always."""
    reloader = Reloader(gateway, watch=gateway.settings.reload, poll=gateway.settings.reload_poll)
    await reloader.start()
    try:
        yield reloader
    finally:
        await reloader.stop()
