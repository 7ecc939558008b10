"""The search's own BM25 (``gateway.search.bm25``): the scores ``bm25s`` gives the same documents, whatever the
documents, the request and the caller's mask; and the index of a reloaded catalog reads only the tools that
changed, yet scores exactly as one made from nothing."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.build import build_catalog
from gateway.catalog.cache import BuildCache
from gateway.definitions.load import DefinitionsCache, load_definitions
from gateway.search import index as search_index
from gateway.search.bm25 import BM25, K1, B, postings
from gateway.search.index import ToolIndex
from gateway.settings import Settings

# Few distinct terms, so that documents share them and document frequencies, lengths and repeats all vary.
TERMS = st.sampled_from(["weather", "forecast", "rain", "time", "zone", "salary", "tax", "city", "a1", "Ünï"])
DOCUMENTS = st.lists(st.lists(TERMS, max_size=30), min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
@given(documents=DOCUMENTS, asked=st.lists(TERMS | st.just("unknown"), min_size=1, max_size=8),
       seed=st.integers(0, 2**32 - 1))
def test_the_scores_are_those_bm25s_gives(documents, asked, seed):
    mask = np.random.default_rng(seed).integers(0, 2, len(documents)).astype(np.float32)
    ours = BM25([postings(document) for document in documents]).scores(asked, mask)
    theirs = bm25s.BM25(k1=K1, b=B)
    if any(documents):
        theirs.index(documents, show_progress=False)
        known = [term for term in asked if term in theirs.vocab_dict]
        expected = theirs.get_scores(known, weight_mask=mask) if known else np.zeros(len(documents))
    else:  # bm25s indexes no corpus without a term; every score is 0
        expected = np.zeros(len(documents))
    assert ours.dtype == np.float32 and ours.shape == (len(documents),)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_no_document_and_no_term_score_nothing():
    assert BM25([]).scores(["weather"], np.zeros(0, np.float32)).shape == (0,)
    assert not BM25([postings([]), postings([])]).scores(["weather"], np.ones(2, np.float32)).any()


def _file(name: str, words: str) -> str:
    return "tools:\n" + "".join(f"""\
  - id: {name}_{n}
    name: {name.title()} {n}
    user_description: A tool.
    ai_description: {words} {n} {"extra " * n}
    binding: {{http: {{url: "https://tools.invalid/{name}"}}}}
    input_schema: {{type: object, properties: {{city: {{type: string, description: the city}}}}}}
""" for n in range(10))


@pytest.mark.parametrize("edit", ["changed", "added", "removed"])
def test_a_reload_reads_only_the_tools_that_changed_and_scores_as_a_fresh_index(write_definitions, monkeypatch,
                                                                                 edit):
    files = {f"{name}.yaml": _file(name, f"Tells the {name} of a city") for name in ("weather", "time", "tax")}
    root = write_definitions(files)
    settings_ = Settings(definitions=root, reload=False)
    caches = (DefinitionsCache(), BuildCache())
    first = build_catalog(load_definitions(root, caches[0]), settings_, cache=caches[1])
    ToolIndex(list(first.tools.values()))
    if edit == "changed":
        (root / "tax.yaml").write_text(_file("tax", "Tells the weather tax owed in a city"), encoding="utf-8")
    elif edit == "added":
        (root / "rain.yaml").write_text(_file("rain", "Tells the rain of a city"), encoding="utf-8")
    else:
        (root / "tax.yaml").unlink()
    read: list[str] = []
    tool_terms = search_index.tool_terms
    monkeypatch.setattr(search_index, "tool_terms", lambda described: read.append(described["id"])
                        or tool_terms(described))
    second = build_catalog(load_definitions(root, caches[0]), settings_, cache=caches[1])
    reloaded = ToolIndex(list(second.tools.values()))
    changed = {"changed": {f"tax_{n}" for n in range(10)}, "added": {f"rain_{n}" for n in range(10)},
               "removed": set()}[edit]
    assert set(read) == changed and len(read) == len(changed)

    fresh_catalog = build_catalog(load_definitions(root), settings_)
    fresh = ToolIndex(list(fresh_catalog.tools.values()))
    assert [tool.id for tool in fresh.tools] == [tool.id for tool in reloaded.tools]
    for query in ("weather of a city", "the tax owed", "rain", "extra extra city", "nothing known"):
        mask = np.ones(len(fresh.tools), np.float32)
        np.testing.assert_array_equal(reloaded._bm25.scores(search_index.query_terms(query), mask),
                                      fresh._bm25.scores(search_index.query_terms(query), mask))
        assert ([(hit.tool.id, hit.score) for hit in reloaded.search(query, 10, "all", lambda tool: True)]
                == [(hit.tool.id, hit.score) for hit in fresh.search(query, 10, "all", lambda tool: True)])


def test_a_word_asked_a_thousand_times_is_read_once():
    """Its column is read once and weighed a thousand times: the same scores, without a thousand copies of it."""
    import tracemalloc

    index = BM25([postings(["get", "weather"] if n % 2 else ["get", "time"]) for n in range(20_000)])
    mask = np.ones(20_000, np.float32)
    once = index.scores(["get"], mask)
    tracemalloc.start()
    often = index.scores(["get"] * 1_000, mask)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_allclose(often, once * 1_000, rtol=1e-5)
    assert peak < 2_000_000  # a copy of the column per asking: 20,000 × 1,000 × 8 bytes
