"""The running gateway: the catalog it serves now, how it is replaced, and the parts shared by every call.

One ``Gateway`` per process. Surfaces read ``gateway.catalog.build`` once per request and use that snapshot to the
end, so a swap never changes a call in flight. ``reload()`` builds the next catalog beside the current one and
swaps a single reference only if the whole build succeeded; listeners (MCP ``list_changed``) hear of real
changes only, not of failed or no-op builds.

A build runs admin code (module imports) and may never end, so it runs in a daemon thread (``gateway.daemon``)
and is waited for ``reload_timeout_s`` at most. A build that takes longer is abandoned: the outcome says it
timed out, the last good catalog keeps serving, and the caches that build held are dropped with it, so that
whatever it does later touches nothing the next build uses. The first build, in ``__init__``, has the same
budget; when it runs out there is nothing to serve, and ``DefinitionsInvalid`` says why.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import daemon
from ..bindings import BuildEnv
from ..catalog.build import Catalog, build_catalog
from ..catalog.cache import BuildCache
from ..catalog.disk_cache import ParsedFiles
from ..catalog.per_file import changed_tools
from ..definitions.load import DefinitionsCache
from ..errors import DefinitionsInvalid, Problem
from ..events import EventBus, Observer
from ..settings import Settings, SettingsInvalid
from ..sources import load_all
from ..state import SharedState, open_state
from ..upstream.mcp.pool import McpPool
from .gcpause import paused_gc

if TYPE_CHECKING:
    import httpx

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


def _shared_state(settings: Settings) -> SharedState:
    """The store ``settings.cluster`` names; cluster mode without its extra is a settings error that says what to
    install (the ``redis`` package is optional, and a bare ModuleNotFoundError left operators a traceback)."""
    try:
        return open_state(settings.cluster.get("redis_url"), prefix=settings.cluster.get("prefix", "tool-gateway:"))
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "redis":  # a broken module of our own stays the bug it is
            raise
        raise SettingsInvalid("setting 'cluster.redis_url': cluster mode needs the redis package, which is "
                              "missing; install it with: pip install 'tool-gateway[cluster]'") from None


class Gateway:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.bridge: Any = None  # gateway.runtime.bridge.Bridge, set by the server when it starts
        self.events = EventBus()  # calls, reloads and admin actions, told to metrics, audit, traces (gateway.events)
        self.observers: dict[str, Observer] = {}  # its consumers by name (gateway.observe.attach)
        # What replicas share (gateway.state): Redis in cluster mode, else this process's memory.
        self.state: SharedState = _shared_state(settings)
        self.replicas: Any = None  # gateway.runtime.cluster.Replicas, while the server runs
        self._http: httpx.AsyncClient | None = None
        # Sessions to upstream MCP servers (sources: mcp), kept across catalogs; the reload service starts it.
        self.mcp_pool = McpPool()
        # What a build reuses from the builds before it: handed to each build as it is started, replaced when a
        # build is abandoned (it may still be running, and caches serve one build at a time).
        # Parses kept on disk between runs (gateway.catalog.disk_cache): a restart skips unchanged files' YAML.
        self._parsed = ParsedFiles.default(settings.definitions)
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
        # The first build must succeed: there is nothing older to serve.
        started = time.perf_counter()
        try:
            with paused_gc():  # nothing serves yet; bounded by the build's budget (gateway.runtime.gcpause)
                self.catalog = self._start_build().result(settings.reload_timeout_s)
        except TimeoutError:
            raise DefinitionsInvalid([self._timeout_problem()]) from None
        self._parsed.save()  # only when the first build parsed a file not kept yet, or left one behind
        self._parsed.release()
        self.last_reload = ReloadOutcome(True, True, self.catalog.version, warnings=self.catalog.warnings,
                                         duration_s=time.perf_counter() - started)

    def http_client(self) -> httpx.AsyncClient:
        """The pooled client every HTTP-bound tool shares; created on first use, closed by ``aclose``."""
        if self._http is None:
            import httpx  # a catalog without an http binding never asks: ~30 ms of a start spared

            from ..upstream.http import new_client

            # new_client: no redirects of its own (the binding checks each hop) and no cookie jar shared by users.
            self._http = new_client(
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
                timeout=httpx.Timeout(self.settings.default_timeout_s),
            )
        return self._http

    def _start_build(self) -> Future[Catalog]:
        caches = self._caches  # taken here: a build abandoned before its thread ran never sees its successor's

        def run() -> Catalog:
            self._handed.caches = caches
            return self._build()

        return daemon.start(run, "gateway-build")

    def _build(self) -> Catalog:
        """Load and build from disk, in a build thread, with the caches that build was handed."""
        loaded, built = getattr(self._handed, "caches", self._caches)
        env = BuildEnv(settings=self.settings, root=self.settings.definitions, http_client=self.http_client,
                       bridge=self, events=self.events, state=self.state, mcp_pool=self.mcp_pool)
        definitions, plugins = load_all(self.settings, loaded)
        return build_catalog(definitions, self.settings, env, built, plugins)

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

    def _timeout_problem(self) -> Problem:
        stuck = sum(not build.done() for build in self._abandoned)
        still = f"; {stuck} abandoned build(s) still running" if stuck else ""
        return Problem(str(self.settings.definitions), 1, 1,
                       f"reload timed out: the build ran longer than reload_timeout_s "
                       f"({self.settings.reload_timeout_s:g} s) and was abandoned{still}")

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def reload(self) -> ReloadOutcome:
        """Rebuild from disk; swap only on success and only if the content changed.

        One build runs at a time. Callers that ask while one runs share the next build, which starts when the
        running one ends: each outcome comes from a build that read the files after its caller asked, and a
        burst of triggers costs two builds, not one each. A caller that gives up (cancelled) stops no build.
        """
        if self._next is None:
            self._next = asyncio.ensure_future(self._reload())
        return await asyncio.shield(self._next)

    async def _reload(self) -> ReloadOutcome:
        async with self._lock:
            self._next = None  # a trigger from now on may follow a write this build has already missed
            started = time.perf_counter()
            build = self._start_build()
            try:
                # Building imports modules and reads files: off the event loop, and under a time budget.
                async with asyncio.timeout(self.settings.reload_timeout_s):
                    catalog = await asyncio.wrap_future(build)
            except TimeoutError:
                return self._abandon(build, started)
            except DefinitionsInvalid as exc:
                return self._failed(exc.problems, started)
            except Exception as exc:  # a bug or an OS error mid-build: the last good catalog keeps serving
                log.debug("reload crashed", exc_info=True)
                where = str(self.settings.definitions)
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

    def _abandon(self, build: Future[Catalog], started: float) -> ReloadOutcome:
        """Give up on a build that ran out of time: it keeps its caches (it may use them still); later builds
        start from fresh ones, and its result, if one ever comes, is dropped."""
        self._caches = (DefinitionsCache(self._parsed), BuildCache())
        self._abandoned = [b for b in self._abandoned if not b.done()] + [build]
        return self._failed((self._timeout_problem(),), started, timed_out=True)

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
        self.events.emit("reload", ok=outcome.ok, changed=outcome.changed, version=outcome.version,
                         tools=len(now.tools), duration_s=outcome.duration_s, timed_out=outcome.timed_out,
                         problems=[str(p) for p in outcome.problems], added=added, removed=removed,
                         modified=modified)

    async def execute(self, session: str, tool_id: str, arguments: dict[str, Any], context: Any) -> Any:
        """Browser bindings call this; the live bridge does the work once the server has attached one."""
        from ..errors import ToolError

        if self.bridge is None:
            raise ToolError(f"Tool '{tool_id}' runs in the user's browser, and no browser bridge is running.")
        return await self.bridge.execute(session, tool_id, arguments, context)

    async def aclose(self) -> None:
        try:
            if self._parsed.dirty:  # parses a reload made that the delayed write has not kept yet
                await asyncio.to_thread(self._parsed.save)
        finally:  # a write that failed never leaves stdio servers or connections behind
            await self.mcp_pool.aclose()  # stops the stdio servers it spawned
            await self.state.aclose()
            if self._http is not None:
                await self._http.aclose()
                self._http = None
