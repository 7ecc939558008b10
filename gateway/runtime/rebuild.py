"""The rebuild engine: the catalog served now, how the next one is built beside it, and how it is swapped in.

Surfaces read the catalog once per request and use that snapshot to the end, so a swap never changes a call in
flight. ``reload()`` builds the next catalog beside the current one and swaps a single reference only if the whole
build succeeded; listeners (MCP ``list_changed``) hear of real changes only, not of failed or no-op builds.

A build runs admin code (module imports) and may never end, so it runs in a daemon thread (``gateway.daemon``)
and is waited for ``reload_timeout_s`` at most. A build that takes longer is abandoned: the outcome says it
timed out, the last good catalog keeps serving, and the caches that build held are dropped with it, so that
whatever it does later touches nothing the next build uses. The first build has the same budget; when it runs
out there is nothing to serve, and ``DefinitionsInvalid`` says why.

What a build is made of (the services it is handed) is the gateway's (``gateway.runtime.gateway``): the engine
is given the build as a function, and decides when it runs, in which thread, and with which caches.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import daemon
from ..catalog.cache import BuildCache
from ..catalog.disk_cache import ParsedFiles
from ..catalog.per_file import changed_tools
from ..catalog.snapshot import Catalog
from ..definitions.load import DefinitionsCache
from ..errors import DefinitionsInvalid, Problem
from ..events import EventBus
from ..settings import Settings
from .gcpause import paused_gc

log = logging.getLogger("gateway")
Listener = Callable[[Catalog], Awaitable[None]]
# How long after the last of a burst of reloads the parses they made are written to the build cache (and at the
# latest after the first, for edits that never stop). The cache serves the next start only, and a gateway that
# stops writes what it has not written yet; a write at 100,000 tools holds the GIL ~0.3 s, so with 2 s it landed
# in the next reload of one admin's edits (a listing and an edit every ~2 s) and slowed it 2-3x.
SAVE_DELAY_S = 10.0
SAVE_WITHIN_S = 60.0


@dataclass(frozen=True)
class ReloadOutcome:
    ok: bool
    changed: bool
    version: str  # the version served after this reload
    problems: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()
    duration_s: float = 0.0
    at: float = field(default_factory=time.time)
    timed_out: bool = False  # the build ran past reload_timeout_s and was abandoned

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "timed_out": self.timed_out,
            "version": self.version,
            "problems": [p.as_dict() | {"text": str(p)} for p in self.problems],
            "warnings": [p.as_dict() | {"text": str(p)} for p in self.warnings],
            "duration_ms": round(self.duration_s * 1000, 1),
            "at": self.at,
        }


class Rebuilder:
    """Builds catalogs from ``definitions`` with ``build`` and serves the latest good one (``catalog``).

    ``build`` runs in a build thread and takes its caches from ``handed()``. Each reload is given the settings it
    runs under (its time budget, and the definitions directory its problems name)."""

    catalog: Catalog  # set by ``first_build``, then swapped by reloads
    last_reload: ReloadOutcome

    def __init__(self, definitions: Path, build: Callable[[], Catalog], events: EventBus):
        self._build = build
        self._events = events  # told of each reload (gateway.events)
        # What a build reuses from the builds before it: handed to each build as it is started, replaced when a
        # build is abandoned (it may still be running, and caches serve one build at a time).
        # Parses kept on disk between runs (gateway.catalog.disk_cache): a restart skips unchanged files' YAML.
        self._parsed = ParsedFiles.default(definitions)
        self._caches = (DefinitionsCache(self._parsed), BuildCache())
        self._parsed_at = 0.0  # when the latest reload that parsed a file ended
        self._saver_lock = threading.Lock()
        self._saver_waiting = False  # a saver thread waits for reloads to pause
        self._handed = threading.local()  # in a build's thread: the caches it was handed
        self._abandoned: list[Future[Catalog]] = []  # timed-out builds, until their threads end
        self._listeners: list[Listener] = []
        self._lock = asyncio.Lock()
        self._notify_lock = asyncio.Lock()
        self._next: asyncio.Future[ReloadOutcome] | None = None

    def first_build(self, settings: Settings) -> None:
        """The first catalog, which must be built: there is nothing older to serve."""
        started = time.perf_counter()
        try:
            with paused_gc():  # nothing serves yet; bounded by the build's budget (gateway.runtime.gcpause)
                self.catalog = self._start_build().result(settings.reload_timeout_s)
        except TimeoutError:
            raise DefinitionsInvalid([self._timeout_problem(settings)]) from None
        self._parsed.save()  # only when the first build parsed a file not kept yet, or left one behind
        self._parsed.release()
        self.last_reload = ReloadOutcome(True, True, self.catalog.version, warnings=self.catalog.warnings,
                                         duration_s=time.perf_counter() - started)

    def handed(self) -> tuple[DefinitionsCache, BuildCache]:
        """In a build thread: the caches that build was handed."""
        return getattr(self._handed, "caches", self._caches)

    def _start_build(self) -> Future[Catalog]:
        caches = self._caches  # taken here: a build abandoned before its thread ran never sees its successor's

        def run() -> Catalog:
            self._handed.caches = caches
            return self._build()

        return daemon.start(run, "gateway-build")

    def _keep_parses_later(self) -> None:
        """Write the parses a reload made to the build cache once reloads have paused for ``SAVE_DELAY_S``: the
        write reads, merges and writes the whole snapshot (100,000 tools: ~0.2-0.4 s holding the GIL), which must
        slow neither the requests that first see the reloaded catalog nor the next reloads of a burst. A burst
        writes once."""
        self._parsed_at = time.monotonic()
        with self._saver_lock:
            if self._saver_waiting:  # the waiting saver sees the new time
                return
            self._saver_waiting = True
        try:
            daemon.start(self._save_parsed_later, "gateway-keep-parses")
        except RuntimeError as exc:  # no thread to be had: the reload stands, and the next one tries again
            log.warning("build cache not written after this reload (%s): the next reload or stop writes it", exc)
            with self._saver_lock:
                self._saver_waiting = False

    def _save_parsed_later(self) -> None:
        latest = time.monotonic() + SAVE_WITHIN_S
        while (wait := min(self._parsed_at + SAVE_DELAY_S, latest) - time.monotonic()) > 0:
            time.sleep(wait)
        with self._saver_lock:
            self._saver_waiting = False  # a reload from now on starts a saver of its own (writes are ordered)
        self._parsed.save()

    def _timeout_problem(self, settings: Settings) -> Problem:
        stuck = sum(not build.done() for build in self._abandoned)
        still = f"; {stuck} abandoned build(s) still running" if stuck else ""
        return Problem(str(settings.definitions), 1, 1,
                       f"reload timed out: the build ran longer than reload_timeout_s "
                       f"({settings.reload_timeout_s:g} s) and was abandoned{still}")

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def reload(self, settings: Settings) -> ReloadOutcome:
        """Rebuild from disk; swap only on success and only if the content changed.

        One build runs at a time. Callers that ask while one runs share the next build, which starts when the
        running one ends: each outcome comes from a build that read the files after its caller asked, and a
        burst of triggers costs two builds, not one each. A caller that gives up (cancelled) stops no build.
        """
        if self._next is None:
            self._next = asyncio.ensure_future(self._reload(settings))
        return await asyncio.shield(self._next)

    async def _reload(self, settings: Settings) -> ReloadOutcome:
        async with self._lock:
            self._next = None  # a trigger from now on may follow a write this build has already missed
            started = time.perf_counter()
            build = self._start_build()
            try:
                # Building imports modules and reads files: off the event loop, and under a time budget.
                async with asyncio.timeout(settings.reload_timeout_s):
                    catalog = await asyncio.wrap_future(build)
            except TimeoutError:
                return self._abandon(build, started, settings)
            except DefinitionsInvalid as exc:
                return self._failed(exc.problems, started)
            except Exception as exc:  # a bug or an OS error mid-build: the last good catalog keeps serving
                log.debug("reload crashed", exc_info=True)
                where = str(settings.definitions)
                return self._failed((Problem(where, 1, 1, f"reload failed: {type(exc).__name__}: {exc}"),), started)
            if self._parsed.dirty:  # a file parsed anew: kept on disk later, off the reload's path
                self._keep_parses_later()
            changed = catalog.version != self.catalog.version
            before = self.catalog
            if changed:
                self.catalog = catalog
            if not self.last_reload.ok:
                log.info("reload ok: the problem(s) of the previous reload are gone")
            outcome = ReloadOutcome(True, changed, self.catalog.version, warnings=catalog.warnings,
                                    duration_s=time.perf_counter() - started)
            self._record(outcome, before)
            if not changed:
                return outcome
            # Taken before the build lock is let go, so listeners hear of catalogs in the order they were served.
            await self._notify_lock.acquire()
        try:
            log.info("catalog %s now serves %d tool(s)", catalog.version, len(catalog.tools))
            for listener in list(self._listeners):
                try:
                    await listener(catalog)
                except Exception:  # a listener's failure must not undo or hide a good reload
                    log.exception("catalog change listener failed")
        finally:
            self._notify_lock.release()
        return outcome

    def _abandon(self, build: Future[Catalog], started: float, settings: Settings) -> ReloadOutcome:
        """Give up on a build that ran out of time: it keeps its caches (it may use them still); later builds
        start from fresh ones, and its result, if one ever comes, is dropped."""
        self._caches = (DefinitionsCache(self._parsed), BuildCache())
        self._abandoned = [b for b in self._abandoned if not b.done()] + [build]
        return self._failed((self._timeout_problem(settings),), started, timed_out=True)

    def _failed(self, problems: tuple[Problem, ...], started: float, *, timed_out: bool = False) -> ReloadOutcome:
        if not self.last_reload.ok and self.last_reload.problems == problems:
            log.warning("reload failed again with the same %d problem(s)", len(problems))
        else:
            for problem in problems:
                log.error("reload failed: %s", problem)
        outcome = ReloadOutcome(False, False, self.catalog.version, problems, duration_s=time.perf_counter() - started,
                                timed_out=timed_out)
        self._record(outcome, self.catalog)
        return outcome

    def _record(self, outcome: ReloadOutcome, before: Catalog) -> None:
        """The outcome becomes ``last_reload`` and a ``reload`` event, with the tools it added, removed, changed."""
        self.last_reload = outcome
        now = self.catalog
        added, removed, modified = changed_tools(before, now)
        self._events.emit("reload", ok=outcome.ok, changed=outcome.changed, version=outcome.version,
                          tools=len(now.tools), duration_s=outcome.duration_s, timed_out=outcome.timed_out,
                          problems=[str(p) for p in outcome.problems], added=added, removed=removed,
                          modified=modified)

    async def aclose(self) -> None:
        """Write the parses a reload made that the delayed write has not kept yet."""
        if self._parsed.dirty:
            await asyncio.to_thread(self._parsed.save)
