"""``Catalog.memo``: a value is computed once per catalog, and computing one never holds up another."""

from __future__ import annotations

import threading

from support import EXAMPLES, catalog_for


def test_a_value_being_computed_does_not_hold_up_another_key():
    """While one value is computed in a worker thread (a listing of 10,000 tools: tens of ms), the event loop
    asking the same catalog for another value gets it at once (the lock is the key's, not the catalog's)."""
    catalog = catalog_for(EXAMPLES)
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(30)
        return "slow"

    worker = threading.Thread(target=catalog.memo, args=("slow", slow))
    worker.start()
    assert started.wait(30)
    other: list[str] = []
    asking = threading.Thread(target=lambda: other.append(catalog.memo("other", lambda: "other")))
    asking.start()
    asking.join(10)  # a bound on a deadlock, not a timing: before, it waited for `slow` to be released
    released_first = not other
    release.set()
    worker.join(30)
    asking.join(30)
    assert not released_first and other == ["other"]
    assert catalog.memo("slow", lambda: "again") == "slow" and catalog.memoised("slow") == "slow"
    assert catalog.memoised("never") is None


def test_a_value_is_computed_once_by_concurrent_askers():
    """Threads asking for the same missing value at once: it is computed once, and every one gets it."""
    catalog = catalog_for(EXAMPLES)
    computed: list[int] = []
    gate = threading.Barrier(8)

    def compute() -> int:
        computed.append(1)
        return len(computed)

    results: list[int] = []

    def ask() -> None:
        gate.wait(30)
        results.append(catalog.memo("once", compute))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert computed == [1] and results == [1] * 8
