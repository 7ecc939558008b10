"""Tool search: the few tools of a catalog that fit a request (``index``: BM25 over ``text``'s weighted terms).

The ranking (``ToolIndex.search``) is the one every surface takes — REST ``GET /tools/search``, the CLI's
``search``, the MCP ``search_tools`` meta-tool, the chat loop's ``tool_selection`` — so what the bench measures
(``bench/bench_tool_search.py``) is what each of them finds. The ranking (numpy under it: 0.16 s to import) is
imported on the first search, not when the gateway starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

import anyio

from .bounds import DEFAULT_K, MAX_K, inline

if TYPE_CHECKING:
    from ..catalog.snapshot import Catalog, Tool
    from .index import Found, ToolIndex

__all__ = ["DEFAULT_K", "MAX_K", "Searches"]


class Searches:
    """A gateway's searches (REST's, MCP's and, through ``index``, its chat loop's): ``search`` on its catalogs,
    and the next catalog's index made as soon as a reload swaps it in (``swapped``, a catalog listener) once anyone
    searched — in a worker thread, so the reload is not slowed and the first search after it rarely waits for the
    index. Each index is made from the last one made (``_last``): a reload's index reads and sorts only the tools
    that changed."""

    def __init__(self, dense: bool = False) -> None:
        self.dense = dense  # BM25 fused with the dense model (the tool_search.dense setting)
        self.used = False
        self._making: dict[int, asyncio.Task[ToolIndex]] = {}  # by id(catalog): the task alive holds the catalog
        self._last: ToolIndex | None = None  # the newest index made or searched

    async def search(self, catalog: Catalog, query: str, k: int, *, reach: Hashable,
                     allowed: Callable[[Tool], bool]) -> list[Found]:
        """The ``k`` tools of ``catalog`` best matching ``query`` among those ``allowed`` (one caller's reach and
        filter, named by ``reach``), best first. The index is made off the event loop the first time."""
        index = await self.index(catalog)
        if inline(len(index.tools), query):
            return index.search(query, k, reach, allowed)
        return await anyio.to_thread.run_sync(index.search, query, k, reach, allowed)

    async def index(self, catalog: Catalog) -> ToolIndex:
        """The catalog's index: made in a worker thread from the last one the first time it is asked for, and
        from then on made for each catalog a reload swaps in (``swapped``). However many ask for it at once, one
        worker thread makes it and the others wait on the event loop, not in threads of their own (100 first
        searches at once held the worker threads every request shares)."""
        from .index import made

        self.used = True
        index = made(catalog, self.dense) or await asyncio.shield(self._made(catalog))
        self._last = index
        return index

    async def swapped(self, catalog: Catalog) -> None:
        if self.used:
            self._made(catalog)

    def _made(self, catalog: Catalog) -> asyncio.Task[ToolIndex]:
        """The task making ``catalog``'s index, started if none is (on this event loop: a reload run on another
        loop, as a test's ``asyncio.run`` does, shares its task with no one)."""
        loop, key = asyncio.get_running_loop(), id(catalog)
        task = self._making.get(key)
        if task is None or task.get_loop() is not loop:
            task = loop.create_task(self._make(catalog))
            self._making[key] = task
            task.add_done_callback(lambda done: self._making.pop(key) if self._making.get(key) is done else None)
        return task

    async def _make(self, catalog: Catalog) -> ToolIndex:
        from .index import index_of

        index = await anyio.to_thread.run_sync(index_of, catalog, self.dense, self._last)
        self._last = index
        return index
