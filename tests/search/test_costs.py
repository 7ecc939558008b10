"""What a search may cost, whatever a request or a catalog holds: the dense model reads a request as far as BM25
does; folding tools of one name compares each with a bounded few; a long request is searched off the event loop;
many first searches at once make the index in one worker thread; a filter selects its tools when its mask is made,
not on every request. Counted, not timed."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
from support import running

from gateway.catalog.build import build_catalog
from gateway.catalog.snapshot import Catalog
from gateway.definitions.load import load_definitions
from gateway.search import Searches, dense
from gateway.search import index as search_index
from gateway.search.bounds import INLINE_QUERY_CHARS
from gateway.search.index import ALIKE_COMPARED, ToolIndex
from gateway.search.text import MAX_QUERY_CHARS
from gateway.settings import Settings

CODE = "def echo(**arguments) -> dict:\n    return arguments\n"


def _tools(count: int, name: str = "Lookup {n}", words: str = "Looks up record {n} in the ledger") -> str:
    return "tools:\n" + "".join(f"""\
  - id: tool_{n}
    name: {name.format(n=n)}
    user_description: A tool.
    ai_description: {words.format(n=n, own=_own(n))}.
    binding: {{python: "desk:echo"}}
    toolsets: [{"even" if n % 2 == 0 else "odd"}]
""" for n in range(count))


def _own(n: int) -> str:
    """Four words no other tool's description has (letters only: digits are words of their own)."""
    letters = "".join("abcdefghij"[int(digit)] for digit in str(n))
    return " ".join(f"{prefix}{letters}" for prefix in ("kro", "vla", "zin", "plu"))


def _catalog(write_definitions, tools: str) -> Catalog:
    root = write_definitions({"desk.yaml": tools, "python/desk.py": CODE})
    return build_catalog(load_definitions(root), Settings(definitions=root, reload=False))


def test_the_dense_model_reads_a_request_as_far_as_bm25_does(write_definitions, monkeypatch):
    """A 1 MB request: the dense model is given its last MAX_QUERY_CHARS characters, as BM25 is (it embedded the
    whole request, seconds of the event loop, before)."""
    read: list[int] = []

    def embed(texts: list[str]) -> np.ndarray:
        read.extend(len(text) for text in texts)
        return np.ones((len(texts), dense.DIMENSIONS), dtype=np.float32) / np.sqrt(dense.DIMENSIONS)

    monkeypatch.setattr(dense, "embed", embed)
    index = ToolIndex(list(_catalog(write_definitions, _tools(3)).tools.values()), dense=True)
    read.clear()
    found = index.search("😀" * 1_000_000 + " look up a record", 2, "all", lambda tool: True)
    assert found and read == [MAX_QUERY_CHARS]


def test_folding_compares_a_tool_with_a_bounded_few_of_its_name(write_definitions, monkeypatch):
    """300 tools of one name, each saying something else: a tool is compared with at most ALIKE_COMPARED kept tools
    of its name, not with every one kept before it (k × candidates comparisons, ~100 ms a search, before)."""
    catalog = _catalog(write_definitions, _tools(300, name="Lookup", words="Looks up zork {own}"))
    index = ToolIndex(list(catalog.tools.values()))
    compared = []
    words = search_index._words
    monkeypatch.setattr(search_index, "_words", lambda tool: compared.append(tool) or words(tool))
    found = index.search("zork", 50, "all", lambda tool: True)
    assert len(found) == 50 and all(hit.alike == () for hit in found)  # none alike: each its own place
    assert len(compared) <= 2 * ALIKE_COMPARED * 50


async def test_a_long_request_is_searched_in_a_worker_thread(write_definitions, monkeypatch):
    """A small catalog is searched on the event loop for a question, in a worker thread for a long request (many
    terms and parts: 4 KB of common words took 8.5 ms of the loop over 5,000 tools)."""
    catalog = _catalog(write_definitions, _tools(20))
    threads: list[threading.Thread] = []
    search = ToolIndex.search
    monkeypatch.setattr(ToolIndex, "search", lambda self, *args: threads.append(threading.current_thread()) or
                        search(self, *args))
    searches = Searches()
    await searches.search(catalog, "look up a record", 3, reach="all", allowed=lambda tool: True)
    await searches.search(catalog, "Look up a record. " * (INLINE_QUERY_CHARS // 10), 3, reach="all",
                          allowed=lambda tool: True)
    assert threads[0] is threading.main_thread() and threads[1] is not threading.main_thread()


async def test_many_first_searches_at_once_make_the_index_in_one_worker_thread(write_definitions, monkeypatch):
    """20 searches of a catalog no one searched yet: one worker thread makes its index, the others wait on the
    event loop (each waited in a worker thread of its own before, holding the threads every request shares)."""
    catalog = _catalog(write_definitions, _tools(20))
    calls: list[str] = []
    index_of = search_index.index_of

    def slow(*args):
        calls.append(threading.current_thread().name)
        threading.Event().wait(0.2)  # long enough for every search to ask for it meanwhile
        return index_of(*args)

    monkeypatch.setattr(search_index, "index_of", slow)
    searches = Searches()
    found = await asyncio.gather(*(searches.search(catalog, "look up a record", 3, reach="all",
                                                   allowed=lambda tool: True) for _ in range(20)))
    assert len(calls) == 1 and all(len(hits) == 3 for hits in found)


def test_a_filtered_search_selects_its_tools_once_for_its_mask(write_definitions, monkeypatch):
    """?toolset=: the filter's tools are selected when its mask is made, which the index keeps: not on each search
    (10 ms a request at 20,000 tools, on the event loop, before)."""
    definitions = write_definitions({"desk.yaml": _tools(30), "python/desk.py": CODE})
    selected: list[tuple] = []
    select = Catalog.select
    monkeypatch.setattr(Catalog, "select", lambda self, **kw: selected.append(tuple(kw.get("toolsets", ()))) or
                        select(self, **kw))
    import httpx

    with running(definitions) as served:
        for _ in range(5):
            found = httpx.get(f"{served.url}/tools/search", params={"q": "look up a record", "toolset": "even"},
                              timeout=20).json()["tools"]
            assert found and all(int(tool["id"].split("_")[1]) % 2 == 0 for tool in found)
    assert selected.count(("even",)) == 1
