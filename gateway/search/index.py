"""A catalog's search index: BM25 (``bm25s``) over each tool's weighted terms (``gateway.search.text``).

One index per catalog version, made on first use in a worker thread (``Catalog.memo``: one build however many
searches wait for it) — never on the event loop. A tool's terms are memoised on the tool, which a reload reuses
when its definition did not change, so the index of the next catalog re-reads only the tools that did: a reload of
one file costs its tools' terms and one BM25 pass over the term lists (milliseconds for thousands of tools).

A search scores every tool the caller may see (a mask per caller's reach and filter, kept per catalog, bounded)
and returns the best ``k`` with a score above zero, best first: a tool a caller may not list is never found,
exactly as listings leave it out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import bm25s
import numpy as np

from .bounds import MAX_K
from .text import query_terms, tool_terms

if TYPE_CHECKING:
    from ..catalog.snapshot import Catalog, Tool

MASKS_KEPT = 64  # caller reaches and filters whose masks a catalog keeps, most recently used first
# BM25's saturation and length normalisation, tuned on the tune split (bench/bench_tool_search.py).
K1, B = 1.2, 0.75


@dataclass(frozen=True)
class Found:
    tool: Tool
    score: float


class ToolIndex:
    def __init__(self, tools: list[Tool]):
        self.tools = tools
        self._bm25 = bm25s.BM25(k1=K1, b=B)
        documents = [tool.memo("search:terms", lambda tool=tool: tool_terms(tool.describe())) for tool in tools]
        if tools:
            self._bm25.index(documents, show_progress=False)
        self._masks: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def search(self, query: str, k: int, mask_key: Hashable, allowed: Callable[[Tool], bool]) -> list[Found]:
        """The ``k`` tools best matching ``query`` among those ``allowed`` (whose mask is kept under
        ``mask_key``), best first; none for a query of no known term."""
        terms = query_terms(query)
        if not terms or not self.tools:
            return []
        mask = self._mask(mask_key, allowed)
        scores = self._bm25.get_scores(terms, weight_mask=mask)
        k = max(1, min(k, MAX_K, len(scores)))
        best = np.argpartition(-scores, k - 1)[:k]
        ranked = sorted(best.tolist(), key=lambda i: (-scores[i], i))
        return [Found(self.tools[i], float(scores[i])) for i in ranked if scores[i] > 0]

    def _mask(self, key: Hashable, allowed: Callable[[Tool], bool]) -> np.ndarray:
        with self._lock:
            mask = self._masks.get(key)
            if mask is not None:
                self._masks.move_to_end(key)
                return mask
        mask = np.fromiter((1.0 if allowed(tool) else 0.0 for tool in self.tools), dtype=np.float32,
                           count=len(self.tools))
        with self._lock:
            self._masks[key] = mask
            if len(self._masks) > MASKS_KEPT:
                self._masks.popitem(last=False)
        return mask


def index_of(catalog: Catalog) -> ToolIndex:
    """The catalog's index, made once (in the calling thread: call it off the event loop)."""
    return catalog.memo("search:index", lambda: ToolIndex(list(catalog.tools.values())))


def made(catalog: Catalog) -> ToolIndex | None:
    """The catalog's index if it was made already (never makes it)."""
    found: Any = catalog.memoised("search:index")
    return found
