"""Checking a draft: would the whole catalog build if one definitions file held this text? Nothing is written.

The admin console's editor asks before it saves. The draft is built like a reload — every file of the
definitions directory and every listed plugin, the draft read from memory in place of its file on disk — in a
daemon thread under ``reload_timeout_s`` (``gateway.daemon``), and the answer is every problem, warnings too,
of every file (a draft can break another file: a duplicate id).

Drafts keep caches of their own, apart from the running gateway's (which serve one build at a time): checking
the same file again re-parses that file and rebuilds its tools only. Checks run one at a time; a check that runs
out of time is abandoned with its caches, as ``Gateway`` abandons a reload. Nothing built here is served, so the
build needs neither the gateway's HTTP client nor its event stream.

A check never starts a process or makes a request that the served catalog does not already make: an upstream
(`sources:` with an MCP server, an OpenAPI `url`) is checked as declared, statically, and its tools are the ones
the running gateway last listed for the same upstream settings; an upstream it has not listed is a warning, read
when the file is saved and the catalog reloads (``gateway.sources.select``). Any admin key — and, with auth off,
any page on the machine that gets past the console's token — may send a draft: building it live ran the
command of an MCP source it declared.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future

from .. import daemon
from ..bindings import BuildEnv
from ..definitions.load import DefinitionsCache
from ..definitions.parse import FileDefinitions, parse_definitions
from ..definitions.yamlbudget import YamlLimits
from ..errors import DefinitionsInvalid, Problem
from ..settings import Settings
from ..sources import load_all
from .build import build_catalog
from .cache import BuildCache

log = logging.getLogger("gateway.drafts")


class _DraftCache(DefinitionsCache):
    """The definitions directory as it is on disk, except one file (named as messages name it) read from memory."""

    def __init__(self) -> None:
        super().__init__()
        self.draft: tuple[str, str] | None = None  # (file, text) for the check running now

    def load(self, path: str, file: str, limits: YamlLimits) -> FileDefinitions:
        if self.draft is not None and file == self.draft[0]:
            return parse_definitions(file, self.draft[1], limits)
        return super().load(path, file, limits)


class DraftChecker:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._caches = (_DraftCache(), BuildCache())
        self._lock = asyncio.Lock()

    async def check(self, file: str, text: str) -> tuple[Problem, ...]:
        """Every problem (errors first by place, then warnings) of the catalog with ``file`` — its path below the
        definitions directory, with '/' — holding ``text``. Empty: it would build without a word."""
        async with self._lock:
            build = self._start(file, text)
            try:
                async with asyncio.timeout(self.settings.reload_timeout_s):
                    return await asyncio.wrap_future(build)
            except TimeoutError:
                return (Problem(file, 1, 1, f"check timed out: building the catalog with this draft ran longer "
                                            f"than reload_timeout_s ({self.settings.reload_timeout_s:g} s)"),)
            except daemon.Interrupted as exc:  # admin code raised SystemExit or KeyboardInterrupt while importing
                return (Problem(file, 1, 1, f"check failed: {exc}"),)
            finally:
                if not build.done():  # abandoned (timed out, or the caller went away): it keeps the old caches
                    self._caches = (_DraftCache(), BuildCache())

    def _start(self, file: str, text: str) -> Future[tuple[Problem, ...]]:
        loaded, built = self._caches

        def run() -> tuple[Problem, ...]:
            loaded.draft = (file, text)
            env = BuildEnv(settings=self.settings, root=self.settings.definitions, connect_sources=False)
            try:
                definitions, plugins = load_all(self.settings, loaded)
                catalog = build_catalog(definitions, self.settings, env, built, plugins)
            except DefinitionsInvalid as exc:
                return (*exc.problems, *env.warnings)
            except Exception as exc:  # a bug or an OS error mid-build: the draft is not known to be good
                log.debug("draft check crashed", exc_info=True)
                return (Problem(file, 1, 1, f"check failed: {type(exc).__name__}: {exc}"),)
            return catalog.warnings

        return daemon.start(run, "gateway-draft-check")
