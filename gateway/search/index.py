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
from .text import query_terms, tool_terms, tool_text

if TYPE_CHECKING:
    from ..catalog.snapshot import Catalog, Tool

MASKS_KEPT = 64  # caller reaches and filters whose masks a catalog keeps, most recently used first
# BM25's saturation and length normalisation, tuned on the tune split (bench/bench_tool_search.py).
K1, B = 1.2, 0.75
# Dense fusion, tuned on the tune split: each ranking's best FUSED enter, rank r of BM25 counts 1/(RRF_K + r), of
# the dense model DENSE_WEIGHT/(RRF_K + r); a tool nearer than MIN_SIMILARITY to nothing in the query is no fit.
FUSED, RRF_K, DENSE_WEIGHT, MIN_SIMILARITY = 50, 20, 0.5, 0.2


@dataclass(frozen=True)
class Found:
    tool: Tool
    score: float


class ToolIndex:
    """``dense``: beside BM25, each tool's vector (``gateway.search.dense``), the two rankings fused by reciprocal
    rank; the score is then the fused one."""

    def __init__(self, tools: list[Tool], dense: bool = False):
        self.tools = tools
        self._bm25 = bm25s.BM25(k1=K1, b=B)
        documents = [tool.memo("search:terms", lambda tool=tool: tool_terms(tool.describe())) for tool in tools]
        if tools:
            self._bm25.index(documents, show_progress=False)
        self._vectors = _vectors(tools) if dense and tools else None
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
        if self._vectors is not None:
            return self._fused(query, scores, mask, k)
        return [Found(self.tools[i], float(scores[i])) for i in _best(scores, k) if scores[i] > 0]

    def _fused(self, query: str, lexical: np.ndarray, mask: np.ndarray, k: int) -> list[Found]:
        """Reciprocal-rank fusion of BM25's best and the dense model's nearest (those the caller may use)."""
        from .dense import embed

        assert self._vectors is not None
        similarity = self._vectors @ embed([query])[0]
        similarity[mask == 0] = -np.inf
        fused: dict[int, float] = {}
        for rank, i in enumerate(i for i in _best(lexical, FUSED) if lexical[i] > 0):
            fused[i] = fused.get(i, 0.0) + 1 / (RRF_K + rank)
        for rank, i in enumerate(i for i in _best(similarity, FUSED) if similarity[i] >= MIN_SIMILARITY):
            fused[i] = fused.get(i, 0.0) + DENSE_WEIGHT / (RRF_K + rank)
        ranked = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        return [Found(self.tools[i], round(fused[i] * RRF_K, 6)) for i in ranked]

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


def _best(scores: np.ndarray, k: int) -> list[int]:
    """The indices of the ``k`` highest scores, highest first (ties: lower index first)."""
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    return sorted(best.tolist(), key=lambda i: (-scores[i], i))


def _vectors(tools: list[Tool]) -> np.ndarray:
    """Each tool's vector, kept on the tool (a reload embeds only the tools that changed)."""
    from .dense import embed

    return np.vstack([tool.memo("search:vector", lambda tool=tool: embed([tool_text(tool.describe())])[0])
                      for tool in tools])


def index_of(catalog: Catalog, dense: bool = False) -> ToolIndex:
    """The catalog's index, made once (in the calling thread: call it off the event loop)."""
    return catalog.memo(("search:index", dense), lambda: ToolIndex(list(catalog.tools.values()), dense))


def made(catalog: Catalog, dense: bool = False) -> ToolIndex | None:
    """The catalog's index if it was made already (never makes it)."""
    found: Any = catalog.memoised(("search:index", dense))
    return found
