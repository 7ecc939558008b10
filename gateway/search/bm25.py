"""BM25 over a catalog's tools, made from each tool's postings so that the next catalog's index costs little more
than the tools that changed.

The scores are Lucene's BM25, as ``bm25s`` computes them (``tests/search/test_bm25.py`` holds the two to the same
scores): a term's weight is ``idf · tf / (tf + k1 · (1 − b + b · length / mean length))``, with ``idf = ln(1 + (N −
df + 0.5) / (df + 0.5))``. ``bm25s`` makes its matrix by reading every term of every document again in Python, a
tenth of a second for 10,000 tools, which a reload of one file would pay in full. Here a tool's postings — its
distinct terms, as keys, and how often each occurs — are made once, kept on the tool (a reload reuses the Tool of
an unchanged definition), and an index is their concatenation, one sort and a few array operations.

A term's key is Python's own hash of it: 64 bits, keyed per process by a random secret (SipHash, unless
``PYTHONHASHSEED`` fixes it), so nothing here keeps a vocabulary that a catalog's churn could grow, and two terms
that share a key — about one chance in 40 million for a million distinct terms — cannot be made to by someone writing
tools, who does not know the secret.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

import numpy as np

# Saturation and length normalisation, tuned on the tune split (bench/bench_tool_search.py).
K1, B = 1.2, 0.75


def postings(terms: Sequence[str], marked: Collection[str] = ()) -> np.ndarray:
    """A document's postings: row 0 its distinct terms' keys, row 1 how often each occurs, doubled, plus 1 for a
    term among the ``marked`` (one array of two rows: a tool keeps one small object)."""
    counts, marked = Counter(terms), frozenset(marked)
    return np.array([[hash(term) for term in counts], [2 * n + (term in marked) for term, n in counts.items()]],
                    dtype=np.int64).reshape(2, len(counts))


def marked(postings: np.ndarray) -> frozenset[int]:
    """The keys of a document's marked terms."""
    return frozenset(postings[0][postings[1] & 1 == 1].tolist())


class BM25:
    """The documents' term weights, column by column: for each distinct key (``keys``, sorted), the documents it
    occurs in and its weight in each, from ``starts[c]`` to ``starts[c + 1]``."""

    def __init__(self, documents: Sequence[np.ndarray]):
        self.size = len(documents)
        counts = np.fromiter((len(document[0]) for document in documents), dtype=np.int64, count=self.size)
        if not counts.sum():
            self.keys, self.starts = np.zeros(0, np.int64), np.zeros(1, np.int64)
            self.documents, self.weights = np.zeros(0, np.int32), np.zeros(0, np.float32)
            return
        joined = np.concatenate(documents, axis=1)
        keys, tf = joined[0], (joined[1] >> 1).astype(np.float32)
        owner = np.repeat(np.arange(self.size, dtype=np.int32), counts)
        lengths = np.bincount(owner, weights=tf, minlength=self.size).astype(np.float32)
        order = np.argsort(keys)
        keys, tf, owner = keys[order], tf[order], owner[order]
        starts = np.flatnonzero(np.diff(keys)) + 1
        self.keys = keys[np.concatenate(([0], starts))]
        self.starts = np.concatenate(([0], starts, [len(keys)])).astype(np.int64)
        df = np.diff(self.starts).astype(np.float32)
        idf = np.log1p((self.size - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = K1 * ((1 - B) + B * lengths[owner] / np.float32(lengths.mean()))
        self.weights = (np.repeat(idf, df.astype(np.int64)) * (tf / (norm + tf))).astype(np.float32)
        self.documents = owner

    def scores(self, terms: Sequence[str], mask: np.ndarray) -> np.ndarray:
        """Each document's score for ``terms`` (a term asked twice counts twice), times ``mask``. Each term's
        column is read once however often it is asked: a request of one common word a thousand times costs what
        the word once does."""
        if not len(self.keys):
            return np.zeros(self.size, dtype=np.float32)
        asked = np.array([hash(term) for term in terms], dtype=np.int64)
        at = np.searchsorted(self.keys, asked)
        at = at[(at < len(self.keys)) & (self.keys[np.minimum(at, len(self.keys) - 1)] == asked)]
        if not len(at):
            return np.zeros(self.size, dtype=np.float32)
        columns, times = np.unique(at, return_counts=True)
        starts, stops = self.starts[columns].tolist(), self.starts[columns + 1].tolist()
        documents = np.concatenate([self.documents[start:stop] for start, stop in zip(starts, stops)])
        weights = np.concatenate([self.weights[start:stop] for start, stop in zip(starts, stops)])
        weights *= np.repeat(times.astype(np.float32), np.subtract(stops, starts))
        return np.bincount(documents, weights=weights, minlength=self.size).astype(np.float32) * mask
