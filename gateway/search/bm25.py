"""BM25 over a catalog's tools, made from each tool's postings so that the next catalog's index costs little more
than the tools that changed.

The scores are Lucene's BM25: a term's weight is ``idf · tf / (tf + k1 · (1 − b + b · length / mean length))``, with
``idf = ln(1 + (N − df + 0.5) / (df + 0.5))``, where N, df and the mean length count only the tools the caller may
use — a caller's scores are those ``bm25s`` gives a catalog of only its tools (``tests/search/test_bm25.py`` holds
the two to the same scores), so they say nothing of the others, not even how common a word is among them.
``bm25s`` makes its matrix by reading every term of every document again in Python, a tenth of a second for
10,000 tools, which a reload of one file would pay in full. Here a tool's postings — its distinct terms, as keys,
and how often each occurs — are made once, kept on the tool (a reload reuses the Tool of an unchanged definition),
and an index is their concatenation and one sort — or, for a reload, the last index's columns without the tools
that went, merged with the new tools' postings (``BM25.merged``); the weights are computed per search, for the
postings it reads.

A term's key is Python's own hash of it: 64 bits, keyed per process by a random secret (SipHash, unless
``PYTHONHASHSEED`` fixes it), so nothing here keeps a vocabulary that a catalog's churn could grow, and two terms
that share a key — about one chance in 40 million for a million distinct terms — cannot be made to by someone writing
tools, who does not know the secret.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import NamedTuple

import numpy as np

# Saturation and length normalisation, tuned on the tune split (bench/bench_tool_search.py).
K1, B = 1.2, 0.75
CHUNK = 1 << 18  # postings weighed at once: a request that names most of a catalog's words is read in parts


def postings(terms: Sequence[str], marked: Collection[str] = ()) -> np.ndarray:
    """A document's postings: row 0 its distinct terms' keys, row 1 how often each occurs, doubled, plus 1 for a
    term among the ``marked`` (one array of two rows: a tool keeps one small object)."""
    counts, marked = Counter(terms), frozenset(marked)
    return np.array([[hash(term) for term in counts], [2 * n + (term in marked) for term, n in counts.items()]],
                    dtype=np.int64).reshape(2, len(counts))


def marked(postings: np.ndarray) -> frozenset[int]:
    """The keys of a document's marked terms."""
    return frozenset(postings[0][postings[1] & 1 == 1].tolist())


def _joined(documents: Sequence[np.ndarray], places: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The documents' postings in one run: each posting's key, its count, and its document's place."""
    counts = np.fromiter((len(document[0]) for document in documents), dtype=np.int64, count=len(documents))
    joined = np.concatenate([np.zeros((2, 0), np.int64), *documents], axis=1)
    return joined[0], (joined[1] >> 1).astype(np.float32), np.repeat(places, counts)


class Reach(NamedTuple):
    """The documents a caller may use (``mask``: 1 or 0 each), how many, and their mean length."""

    mask: np.ndarray
    used: float
    mean: float


class BM25:
    """The documents' terms, column by column: for each distinct key (``keys``, sorted), the documents it occurs in
    and how often, from ``starts[c]`` to ``starts[c + 1]``; and each document's length.

    The weights are computed per search from the documents the caller may use (``mask``): their number, each
    term's document frequency among them, their mean length."""

    def __init__(self, documents: Sequence[np.ndarray]):
        keys, tf, owner = _joined(documents, np.arange(len(documents), dtype=np.int32))
        self._columns(keys, tf, owner, len(documents), np.argsort(keys))

    @classmethod
    def merged(cls, previous: BM25, moved: np.ndarray, added: Sequence[tuple[int, np.ndarray]], size: int) -> BM25:
        """The index of ``size`` documents: ``previous``'s, each at its new place (``moved[old]``, or -1 for one that
        is gone), and the ``added`` ones ((place, postings)). The previous postings are already in their keys' order,
        so the two sorted runs are merged (a stable sort finds and merges runs: linear in the postings), not sorted
        again — a reload of one file among 100,000 tools skips the one sort of every posting."""
        places = moved[previous.documents]
        kept = places >= 0
        new_keys, new_tf, new_owner = _joined([postings for _, postings in added],
                                              np.array([place for place, _ in added], dtype=np.int32))
        order = np.argsort(new_keys)
        keys = np.concatenate([np.repeat(previous.keys, np.diff(previous.starts))[kept], new_keys[order]])
        tf = np.concatenate([previous.tf[kept], new_tf[order]])
        owner = np.concatenate([places[kept], new_owner[order]]).astype(np.int32)
        index = cls.__new__(cls)
        index._columns(keys, tf, owner, size, np.argsort(keys, kind="stable"))
        return index

    def _columns(self, keys: np.ndarray, tf: np.ndarray, owner: np.ndarray, size: int, order: np.ndarray) -> None:
        """The columns of the postings (``keys``, ``tf``, ``owner``) in ``order``, their keys'."""
        self.size = size
        self.lengths = np.bincount(owner, weights=tf, minlength=size).astype(np.float32)
        keys, self.tf, self.documents = keys[order], tf[order], owner[order]
        first = np.flatnonzero(np.diff(keys)) + 1  # where each key's column begins, but the first
        first = np.concatenate(([0], first)) if len(keys) else first
        self.keys, self.starts = keys[first], np.append(first, len(keys)).astype(np.int64)

    def reach(self, mask: np.ndarray) -> Reach:
        """A caller's reach: the documents ``mask`` keeps (1; 0 scores nothing), made once per caller."""
        used = float(mask.sum())
        return Reach(mask, used, float(self.lengths @ mask) / used if used else 0.0)

    def scores(self, terms: Sequence[str], reach: Reach) -> np.ndarray:
        """Each document's score for ``terms`` (a term asked twice counts twice) within ``reach``. Each term's
        column is read once however often it is asked, ``CHUNK`` postings at a time: what a request costs is
        bounded by the index, whatever it repeats or names."""
        scores = np.zeros(self.size, dtype=np.float32)
        mask, used, mean = reach
        asked = np.array([hash(term) for term in terms], dtype=np.int64)
        at = np.searchsorted(self.keys, asked)
        found = at < len(self.keys)
        found[found] = self.keys[at[found]] == asked[found]
        if mean <= 0 or not found.any():
            return scores
        columns, times = np.unique(at[found], return_counts=True)
        sizes = self.starts[columns + 1] - self.starts[columns]
        chunks = (np.cumsum(sizes) - sizes) // CHUNK  # a chunk: the columns that begin within CHUNK postings
        for chunk in np.unique(chunks).tolist():
            chosen = chunks == chunk
            starts, stops = self.starts[columns[chosen]].tolist(), self.starts[columns[chosen] + 1].tolist()
            documents = np.concatenate([self.documents[start:stop] for start, stop in zip(starts, stops)])
            tf = np.concatenate([self.tf[start:stop] for start, stop in zip(starts, stops)])
            kept = mask[documents]
            df = np.add.reduceat(kept, np.cumsum(sizes[chosen]) - sizes[chosen])
            idf = np.log1p((used - df + 0.5) / (df + 0.5)) * times[chosen]
            norm = K1 * ((1 - B) + B * self.lengths[documents] / mean)
            weights = np.repeat(idf, sizes[chosen]) * (tf / (norm + tf)) * kept
            scores += np.bincount(documents, weights=weights, minlength=self.size).astype(np.float32)
        return scores
