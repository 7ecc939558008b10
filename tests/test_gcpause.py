"""``gateway.runtime.gcpause``: the collector paused during a first build, what the pause allocated handed to the oldest
generation when it ends, and nothing left out of the collector's reach."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gateway.runtime.gcpause import paused_gc


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if enabled else gc.disable)()


def test_what_a_pause_allocated_is_in_the_oldest_generation_when_it_ends(collector):
    """The objects a build allocated are not walked once per younger generation as they age (at 10,000 tools
    two walks of ~65 and ~90 ms before the first request): they reach the oldest generation when the pause ends."""
    gc.collect()  # no collection comes due in the pause's last steps and ages them by chance
    with paused_gc():
        assert not gc.isenabled()
        kept = [[index] for index in range(1000)]
    assert gc.isenabled()
    oldest = {id(item) for item in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for item in kept)


def test_a_cycle_made_during_a_pause_is_still_collected(collector):
    """Nothing stays frozen: a cycle the pause allocated and later dropped is found by a full collection."""
    with paused_gc():
        first, second = Node(), Node()
        first.other, second.other = second, first
        gone = weakref.ref(first)
    del first, second
    gc.collect()
    assert gone() is None
    assert gc.get_freeze_count() == 0


def test_nested_pauses_end_with_the_last_and_a_collector_turned_off_stays_off(collector):
    with paused_gc():
        with paused_gc():
            pass
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_objects_the_host_froze_stay_frozen(collector):
    """A host that froze its objects (before forking workers, to share their pages) finds them frozen after a
    gateway's first build."""
    marker = [[]]
    gc.freeze()
    try:
        with paused_gc():
            pass
        # Frozen objects are in no generation (the count alone moves as other threads free frozen objects).
        assert not any(item is marker for item in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(item is marker for item in gc.get_objects())
