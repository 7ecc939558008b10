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
def test_a_callers_scores_are_those_bm25s_gives_a_catalog_of_its_tools_only(documents, asked, seed):
    """Whatever the documents, the request and the caller's reach: the tools outside it score nothing, and those
    inside score exactly as if the catalog held them alone — so no score tells how common a word is elsewhere."""
    rng = np.random.default_rng(seed)
    mask = (rng.integers(0, 2, len(documents)) if rng.random() < 0.7 else np.ones(len(documents))).astype(np.float32)
    index = BM25([postings(document) for document in documents])
    ours = index.scores(asked, index.reach(mask))
    assert ours.dtype == np.float32 and ours.shape == (len(documents),)
    assert not ours[mask == 0].any()
    kept = [document for document, keep in zip(documents, mask, strict=True) if keep]
    expected = np.zeros(len(kept))
    if any(kept):  # bm25s indexes no corpus without a term; every score is 0 then
        theirs = bm25s.BM25(k1=K1, b=B)
        theirs.index(kept, show_progress=False)
        known = [term for term in asked if term in theirs.vocab_dict]
        if known:
            expected = theirs.get_scores(known)
    np.testing.assert_allclose(ours[mask == 1], expected, rtol=1e-5, atol=1e-6)


def test_a_hidden_tools_words_change_no_visible_score():
    """The reviewer's case: one visible tool says "payroll" and "weather"; hidden tools saying "payroll" again do
    not move the visible tool's scores for either word."""
    visible = postings(["payroll", "weather"])
    alone = BM25([visible])
    crowded = BM25([visible, *(postings(["payroll", "tax"]) for _ in range(3))])
    reach = np.array([1, 0, 0, 0], np.float32)
    for word in ("payroll", "weather"):
        assert (crowded.scores([word], crowded.reach(reach))[0]
                == pytest.approx(alone.scores([word], alone.reach(np.ones(1, np.float32)))[0]))


def test_no_document_no_term_and_no_reach_score_nothing():
    for documents, mask in (([], []), ([postings([]), postings([])], [1, 1]), ([postings(["weather"])], [0])):
        index = BM25(documents)
        scores = index.scores(["weather"], index.reach(np.array(mask, np.float32)))
        assert scores.shape == (len(documents),) and not scores.any()


def test_a_request_naming_a_large_part_of_the_catalog_is_read_in_bounded_chunks(monkeypatch):
    """More columns than one chunk holds: the same scores as read at once, and no more postings held at a time
    than a chunk and its last column."""
    from gateway.search import bm25

    documents = [postings([f"w{(n * 7 + j) % 300}" for j in range(20)]) for n in range(2_000)]
    words = [f"w{n}" for n in range(300)]
    index = BM25(documents)
    everyone = index.reach(np.ones(2_000, np.float32))
    whole = index.scores(words, everyone)
    monkeypatch.setattr(bm25, "CHUNK", 500)
    held: list[int] = []
    concatenate = np.concatenate
    monkeypatch.setattr(bm25.np, "concatenate", lambda parts, *a, **k: held.append(sum(map(len, parts)))
                        or concatenate(parts, *a, **k))
    np.testing.assert_allclose(index.scores(words, everyone), whole, rtol=1e-5)
    assert len(held) > 2 and max(held) <= 500 + max(np.diff(index.starts))


def _file(name: str, words: str) -> str:
    return "tools:\n" + "".join(f"""\
  - id: {name}_{n}
    name: {name.title()} {n}
    user_description: A tool.
    ai_description: {words} {n} {"extra " * n}
    binding: {{http: {{url: "https://tools.invalid/{name}"}}}}
    input_schema: {{type: object, properties: {{city: {{type: string, description: the city}}}}}}
""" for n in range(10))


@pytest.mark.parametrize("merged", [False, True], ids=["joined", "merged"])
@pytest.mark.parametrize("edit", ["changed", "added", "removed"])
def test_a_reload_reads_only_the_tools_that_changed_and_scores_as_a_fresh_index(write_definitions, monkeypatch,
                                                                                 edit, merged):
    """Joined (every tool's kept postings, sorted again) or merged into the last index (only the changed tools'
    postings sorted, then merged with the last index's columns): the same index as one made from nothing."""
    files = {f"{name}.yaml": _file(name, f"Tells the {name} of a city") for name in ("weather", "time", "tax")}
    root = write_definitions(files)
    settings_ = Settings(definitions=root, reload=False)
    caches = (DefinitionsCache(), BuildCache())
    first = build_catalog(load_definitions(root, caches[0]), settings_, cache=caches[1])
    last = ToolIndex(list(first.tools.values()))
    if edit == "changed":
        (root / "tax.yaml").write_text(_file("tax", "Tells the weather tax owed in a city"), encoding="utf-8")
    elif edit == "added":
        (root / "rain.yaml").write_text(_file("rain", "Tells the rain of a city"), encoding="utf-8")
    else:
        (root / "tax.yaml").unlink()
    read: list[str] = []
    tool_terms, postings_of = search_index.tool_terms, search_index._postings
    monkeypatch.setattr(search_index, "tool_terms", lambda described: read.append(described["id"])
                        or tool_terms(described))
    second = build_catalog(load_definitions(root, caches[0]), settings_, cache=caches[1])
    if merged:  # the reused tools' postings are not even asked for: they are the last index's columns
        asked: list[str] = []
        monkeypatch.setattr(search_index, "_postings", lambda tool: asked.append(tool.id) or postings_of(tool))
    reloaded = ToolIndex(list(second.tools.values()), previous=last if merged else None)
    changed = {"changed": {f"tax_{n}" for n in range(10)}, "added": {f"rain_{n}" for n in range(10)},
               "removed": set()}[edit]
    assert set(read) == changed and len(read) == len(changed)
    assert not merged or sorted(asked) == sorted(changed)

    fresh_catalog = build_catalog(load_definitions(root), settings_)
    fresh = ToolIndex(list(fresh_catalog.tools.values()))
    assert [tool.id for tool in fresh.tools] == [tool.id for tool in reloaded.tools]
    for query in ("weather of a city", "the tax owed", "rain", "extra extra city", "nothing known"):
        everyone = np.ones(len(fresh.tools), np.float32)
        np.testing.assert_array_equal(
            reloaded._bm25.scores(search_index.query_terms(query), reloaded._bm25.reach(everyone)),
            fresh._bm25.scores(search_index.query_terms(query), fresh._bm25.reach(everyone)))
        assert ([(hit.tool.id, hit.score) for hit in reloaded.search(query, 10, "all", lambda tool: True)]
                == [(hit.tool.id, hit.score) for hit in fresh.search(query, 10, "all", lambda tool: True)])


def test_a_word_asked_a_thousand_times_is_read_once():
    """Its column is read once and weighed a thousand times: the same scores, without a thousand copies of it."""
    import tracemalloc

    index = BM25([postings(["get", "weather"] if n % 2 else ["get", "time"]) for n in range(20_000)])
    everyone = index.reach(np.ones(20_000, np.float32))
    once = index.scores(["get"], everyone)
    tracemalloc.start()
    often = index.scores(["get"] * 1_000, everyone)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_allclose(often, once * 1_000, rtol=1e-5)
    assert peak < 2_000_000  # a copy of the column per asking: 20,000 × 1,000 × 8 bytes


@settings(max_examples=200, deadline=None)
@given(before=DOCUMENTS, after=st.lists(st.integers(-1, 40) | st.lists(TERMS, max_size=30), min_size=1, max_size=25),
       asked=st.lists(TERMS, min_size=1, max_size=6), seed=st.integers(0, 2**32 - 1))
def test_an_index_merged_from_the_last_one_scores_as_one_made_from_nothing(before, after, asked, seed):
    """Any edit of a catalog — documents kept (an integer: the one of the last index at that place, in any new
    order), dropped, added, or a kept one listed twice — merged into the last index gives the same columns and
    lengths, and the same scores for any reach, as the new documents indexed from nothing."""
    last_documents = [postings(document) for document in before]
    last = BM25(last_documents)
    documents, moved, added = [], np.full(len(before), -1, np.int32), []
    for item in after:
        if isinstance(item, int) and 0 <= item < len(before) and moved[item] < 0:
            moved[item] = len(documents)
            documents.append(last_documents[item])
        else:
            words = item if isinstance(item, list) else before[item % len(before)]  # a kept one again: read anew
            added.append((len(documents), postings(words)))
            documents.append(added[-1][1])
    merged, fresh = BM25.merged(last, moved, added, len(documents)), BM25(documents)
    np.testing.assert_array_equal(merged.keys, fresh.keys)
    np.testing.assert_array_equal(merged.starts, fresh.starts)
    np.testing.assert_array_equal(merged.lengths, fresh.lengths)
    mask = np.random.default_rng(seed).integers(0, 2, len(documents)).astype(np.float32)
    for reach in (np.ones(len(documents), np.float32), mask):
        np.testing.assert_array_equal(merged.scores(asked, merged.reach(reach)), fresh.scores(asked, fresh.reach(reach)))


async def test_a_gateways_next_index_is_merged_from_the_last_one(write_definitions, monkeypatch):
    """A reload once anyone has searched: the next catalog's index is made at once, in a worker thread, from the last
    index made — and finds what changed."""
    from gateway.search import Searches, bm25
    from gateway.search.index import made

    root = write_definitions({f"{name}.yaml": _file(name, f"Tells the {name} of a city") for name in ("weather", "tax")})
    settings_ = Settings(definitions=root, reload=False)
    caches = (DefinitionsCache(), BuildCache())
    first = build_catalog(load_definitions(root, caches[0]), settings_, cache=caches[1])
    searches = Searches()
    assert [hit.tool.id for hit in await searches.search(first, "rain", 3, reach="all", allowed=lambda tool: True)] == []
    (root / "rain.yaml").write_text(_file("rain", "Tells the rain of a city"), encoding="utf-8")
    second = build_catalog(load_definitions(root, caches[0]), settings_, cache=caches[1])
    merges: list[int] = []
    merged = bm25.BM25.merged.__func__
    monkeypatch.setattr(bm25.BM25, "merged", classmethod(lambda cls, previous, moved, added, size:
                                                         merges.append(len(added)) or merged(cls, previous, moved,
                                                                                             added, size)))
    await searches.swapped(second)
    for task in list(searches._making.values()):
        await task
    assert merges == [10] and made(second) is not None  # the rain file's 10 tools read, the others merged
    found = await searches.search(second, "rain", 3, reach="all", allowed=lambda tool: True)
    assert len(found) == 3 and all(hit.tool.id.startswith("rain_") for hit in found)
