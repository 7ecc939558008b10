"""A catalog's search index: BM25 (``gateway.search.bm25``) over each tool's weighted terms (``gateway.search.text``).

One index per catalog version, made on first use in a worker thread (``Catalog.memo``: one build however many
searches wait for it) — never on the event loop. A tool's postings are memoised on the tool, which a reload reuses
when its definition did not change, so the index of the next catalog reads only the tools that did; made from the
last index (``previous``: a gateway's ``Searches`` keeps it), it sorts only those tools' postings too, and merges
them into the last index's columns (milliseconds for a file of hundreds among 100,000 tools).

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

import numpy as np

from .bm25 import BM25, Reach, marked, postings
from .bounds import MAX_K
from .text import MAX_QUERY_CHARS, query_parts, query_terms, tool_terms, tool_text

if TYPE_CHECKING:
    from ..catalog.snapshot import Catalog, Tool

MASKS_KEPT = 64  # caller reaches and filters whose masks a catalog keeps, most recently used first
# Dense fusion, tuned on the tune split: each ranking's best FUSED enter, rank r of BM25 counts 1/(RRF_K + r), of
# the dense model DENSE_WEIGHT/(RRF_K + r); a tool nearer than MIN_SIMILARITY to nothing in the query is no fit.
FUSED, RRF_K, DENSE_WEIGHT, MIN_SIMILARITY = 50, 10, 0.75, 0.2
# A request of several parts: its best-fitting part counts as much as the whole request.
PART_WEIGHT = 1.0
# Two tools of one name whose descriptions share this share of their terms (of those either has) are one tool
# offered twice. A tool is compared with the first ALIKE_COMPARED kept tools of its name only: a catalog of thousands
# of tools of one name (a hostile source) made each search compare every candidate with every kept one (~100 ms).
ALIKE, ALIKE_COMPARED = 0.5, 4


@dataclass(frozen=True)
class Found:
    tool: Tool
    score: float
    alike: tuple[Tool, ...] = ()  # found too, and folded into this one: the same tool offered again

    def entry(self) -> dict[str, Any]:
        """What REST and the CLI answer for it: the tool's listing entry, its score, and the ids folded into it."""
        alike = {"alike": [tool.id for tool in self.alike]} if self.alike else {}
        return {**self.tool.describe(), "score": round(self.score, 4), **alike}


class ToolIndex:
    """``dense``: beside BM25, each tool's vector (``gateway.search.dense``), the two rankings fused by reciprocal
    rank; the score is then the fused one."""

    def __init__(self, tools: list[Tool], dense: bool = False, previous: ToolIndex | None = None):
        self.tools = tools
        self._bm25 = _merged(previous, tools) if previous else BM25([_postings(tool) for tool in tools])
        self._vectors = _vectors(tools) if dense and tools else None
        self._reaches: OrderedDict[Hashable, Reach] = OrderedDict()
        self._lock = threading.Lock()

    def search(self, query: str, k: int, mask_key: Hashable, allowed: Callable[[Tool], bool]) -> list[Found]:
        """The ``k`` tools best matching ``query`` among those ``allowed`` (whose mask is kept under
        ``mask_key``), best first, tools offered twice folded into one; none for a query of no known term."""
        query = query[-MAX_QUERY_CHARS:]  # what every ranking reads of it, the dense model's too
        terms = query_terms(query)
        if not self.tools or not terms:
            return []
        reach = self._reach(mask_key, allowed)
        lexical = self._lexical(query, terms, reach)
        k = max(1, min(k, MAX_K, len(self.tools)))
        if self._vectors is not None:
            fused = self._fused(query, lexical, reach.mask)
            return self._distinct(sorted(fused, key=lambda i: (-fused[i], i)), lambda i: fused[i] * RRF_K, k)
        # Enough candidates that folding tools offered twice still leaves k: a few times k, most often.
        ranked = [i for i in _best(lexical, min(len(lexical), 5 * k + 50)) if lexical[i] > 0]
        return self._distinct(ranked, lambda i: float(lexical[i]), k)

    def _lexical(self, query: str, terms: list[str], reach: Reach) -> np.ndarray:
        """BM25's scores for the request; for a request of several parts, each relative to its best, the whole
        request's plus its best-fitting part's (``PART_WEIGHT``): a tool that fits one thing asked for outranks
        those that fit words scattered over the request."""
        scores = self._bm25.scores(terms, reach)
        parts, top = query_parts(query), scores.max()
        if not parts or top <= 0:
            return scores
        scores, best = scores / top, np.zeros_like(scores)
        for part in parts:
            fits = self._bm25.scores(part, reach)
            if fits.max() > 0:
                np.maximum(best, fits / fits.max(), out=best)
        return scores + PART_WEIGHT * best

    def _fused(self, query: str, lexical: np.ndarray, mask: np.ndarray) -> dict[int, float]:
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
        return fused

    def _distinct(self, ranked: list[int], score: Callable[[int], float], k: int) -> list[Found]:
        """The first ``k`` of ``ranked`` that are not a better one offered again — the same name, descriptions
        sharing at least ``ALIKE`` of their terms (two sources of one tool, two versions of it): such a tool is
        folded into the better one's ``alike`` rather than taking one of the ``k`` places. Two tools that describe
        themselves in no word are not told alike: nothing says they do the same."""
        kept: list[tuple[int, list[Tool]]] = []
        named: dict[str, list[tuple[int, list[Tool]]]] = {}  # the first ALIKE_COMPARED kept of each name
        for i in ranked:
            tool = self.tools[i]
            name, words = tool.definition.name.casefold(), None
            for j, alike in named.get(name, ()):
                words = _words(tool) if words is None else words
                its = _words(self.tools[j])
                shared = len(words & its)
                if (words or its) and shared >= ALIKE * (len(words) + len(its) - shared):
                    alike.append(tool)
                    break
            else:  # folded into none kept: a place of its own
                if len(kept) == k:
                    break
                kept.append((i, []))
                same = named.setdefault(name, [])
                if len(same) < ALIKE_COMPARED:
                    same.append(kept[-1])
        return [Found(self.tools[i], round(score(i), 6), tuple(alike)) for i, alike in kept]

    def _reach(self, key: Hashable, allowed: Callable[[Tool], bool]) -> Reach:
        with self._lock:
            reach = self._reaches.get(key)
            if reach is not None:
                self._reaches.move_to_end(key)
                return reach
        reach = self._bm25.reach(np.fromiter((1.0 if allowed(tool) else 0.0 for tool in self.tools),
                                             dtype=np.float32, count=len(self.tools)))
        with self._lock:
            self._reaches[key] = reach
            if len(self._reaches) > MASKS_KEPT:
                self._reaches.popitem(last=False)
        return reach


def _best(scores: np.ndarray, k: int) -> list[int]:
    """The indices of the ``k`` highest scores, highest first (ties: lower index first)."""
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    return sorted(best.tolist(), key=lambda i: (-scores[i], i))


def _words(tool: Tool) -> frozenset[int]:
    """What a tool's description is compared by (its first ``ALIKE_TERMS`` distinct terms, marked in its postings):
    made into a set when the tool is first compared, then kept on it — the index's build does not pay for it, nor a
    search for the tools whose names no other candidate shares."""
    return tool.memo("search:alike", lambda: marked(_postings(tool)))


def _postings(tool: Tool) -> np.ndarray:
    """The tool's postings, kept on the tool (a reload reads only the tools that changed)."""
    return tool.memo("search:postings", lambda: postings(*tool_terms(tool.describe())))


def _merged(previous: ToolIndex, tools: list[Tool]) -> BM25:
    """The BM25 of ``tools`` from the ``previous`` catalog's: a Tool a reload reused (the same object: its definition
    did not change) keeps its postings, already in the previous index's order; only the others are read and sorted."""
    places = {id(tool): place for place, tool in enumerate(previous.tools)}  # alive: previous holds them
    moved = np.full(len(previous.tools), -1, dtype=np.int32)
    added = []
    for place, tool in enumerate(tools):
        old = places.pop(id(tool), None)  # popped: a tool listed twice is read twice, as a fresh index would
        if old is None:
            added.append((place, _postings(tool)))
        else:
            moved[old] = place
    return BM25.merged(previous._bm25, moved, added, len(tools))


def _vectors(tools: list[Tool]) -> np.ndarray:
    """Each tool's vector, kept on the tool (a reload embeds only the tools that changed)."""
    from .dense import embed

    return np.vstack([tool.memo("search:vector", lambda tool=tool: embed([tool_text(tool.describe())])[0])
                      for tool in tools])


def index_of(catalog: Catalog, dense: bool = False, previous: ToolIndex | None = None) -> ToolIndex:
    """The catalog's index, made once (in the calling thread: call it off the event loop) — from the ``previous``
    catalog's index when there is one (a reload: only the tools that changed are read and sorted)."""
    return catalog.memo(("search:index", dense), lambda: ToolIndex(list(catalog.tools.values()), dense, previous))


def made(catalog: Catalog, dense: bool = False) -> ToolIndex | None:
    """The catalog's index if it was made already (never makes it)."""
    found: Any = catalog.memoised(("search:index", dense))
    return found
