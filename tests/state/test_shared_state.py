"""Both shared-state implementations keep the same promises; Redis ones against a real ``redis-server``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.state import SharedState, StateUnavailable
from gateway.state.memory import MemoryState
from gateway.state.redis import RedisState


@pytest.fixture(params=["memory", "redis"])
async def state(request: pytest.FixtureRequest) -> AsyncIterator[SharedState]:
    if request.param == "memory":
        store: SharedState = MemoryState()
    else:
        store = RedisState(request.getfixturevalue("redis_server").url, prefix="t:")
    yield store
    await store.aclose()


async def test_records_live_until_their_ttl(state: SharedState) -> None:
    """A record reads back until it expires, and is gone after a delete."""
    await state.put("a", b"1", 0.2)
    await state.put("b", b"2", 30)
    assert await state.get("a") == b"1"
    assert await state.scan("") == {"a": b"1", "b": b"2"}
    await asyncio.sleep(0.3)
    assert await state.get("a") is None
    assert await state.scan("") == {"b": b"2"}
    await state.delete("b")
    assert await state.get("b") is None


async def test_touch_renews_a_record_and_never_revives_one(state: SharedState) -> None:
    """A touched record outlives its first TTL unchanged; touching a deleted or unknown record is False and
    stores nothing."""
    await state.put("s", b"record", 0.2)
    assert await state.touch("s", 30) is True
    await asyncio.sleep(0.3)
    assert await state.get("s") == b"record"
    await state.delete("s")
    assert await state.touch("s", 30) is False
    assert await state.touch("never", 30) is False
    assert await state.get("s") is None and await state.get("never") is None


async def test_take_gives_a_record_once(state: SharedState) -> None:
    """Of many takers at once, exactly one gets the record (an OAuth flow's state is used once); an expired
    record is taken by none."""
    await state.put("flow", b"sealed", 30)
    taken = await asyncio.gather(*(state.take("flow") for _ in range(20)))
    assert taken.count(b"sealed") == 1 and taken.count(None) == 19
    await state.put("old", b"x", 0.1)
    await asyncio.sleep(0.2)
    assert await state.take("old") is None


async def test_scan_takes_the_prefix_literally(state: SharedState) -> None:
    """A prefix holding glob characters matches only itself."""
    await state.put("rep*:1", b"x", 30)
    await state.put("repl:1", b"y", 30)
    assert await state.scan("rep*:") == {"rep*:1": b"x"}


async def test_rate_limit_takes_exactly_the_burst(state: SharedState) -> None:
    """Of 25 concurrent takes on a limit of 10 per minute exactly 10 succeed; the rest learn when to retry."""
    waits = await asyncio.gather(*(state.acquire("tool:x", 10, 60) for _ in range(25)))
    assert sum(1 for w in waits if w == 0) == 10
    refused = [w for w in waits if w]
    assert len(refused) == 15 and all(0 < w <= 6.0 for w in refused)


async def test_rate_limit_refills_at_its_rate(state: SharedState) -> None:
    """After a burst, one more call is allowed once one interval has passed."""
    assert [await state.acquire("k", 2, 0.2) for _ in range(3)][:2] == [0.0, 0.0]
    await asyncio.sleep(0.12)
    assert await state.acquire("k", 2, 0.2) == 0.0


async def test_messages_reach_subscribers(state: SharedState) -> None:
    """A message published on a channel reaches each subscriber open at the time, and no other channel's."""
    async with state.subscribe("ch") as one, state.subscribe("ch") as two, state.subscribe("other") as other:
        await asyncio.sleep(0.05)  # Redis subscriptions take effect asynchronously
        assert await state.publish("ch", b"hello") == 2
        assert await asyncio.wait_for(one.__anext__(), 5) == b"hello"
        assert await asyncio.wait_for(two.__anext__(), 5) == b"hello"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(other.__anext__(), 0.2)


async def test_redis_down_fails_fast_and_recovers(redis_server) -> None:
    """With Redis stopped every operation is StateUnavailable (its message without the password); once Redis is
    back the same client works again without being rebuilt."""
    url = redis_server.url.replace("redis://", "redis://:s3cret-pass@")
    redis_server.stop()
    store = RedisState(url)
    try:
        with pytest.raises(StateUnavailable) as caught:
            await store.get("x")
        assert "s3cret-pass" not in str(caught.value) and str(redis_server.port) in str(caught.value)
        assert await store.ping() is False
        redis_server.start()
        store_plain = RedisState(redis_server.url)
        await store_plain.put("x", b"1", 30)
        await store_plain.aclose()
    finally:
        await store.aclose()


async def test_redis_client_reconnects_after_a_restart(redis_server) -> None:
    """A client that worked, then saw Redis go away, works again after Redis restarts on the same port."""
    store = RedisState(redis_server.url)
    try:
        await store.put("x", b"1", 30)
        redis_server.stop()
        with pytest.raises(StateUnavailable):
            await store.get("x")
        redis_server.start()
        await store.put("y", b"2", 30)
        assert await store.get("y") == b"2"
    finally:
        await store.aclose()


async def test_memory_records_are_bounded_oldest_first() -> None:
    """Past max_records live records, a new one pushes out the oldest; renewing an existing one pushes none."""
    store = MemoryState(max_records=3)
    for key in "abcd":
        await store.put(key, key.encode(), 30)
    await store.put("d", b"again", 30)
    assert await store.scan("") == {"b": b"b", "c": b"c", "d": b"again"}


async def test_the_first_command_after_a_redis_restart_succeeds(redis_server) -> None:
    """A pooled connection left stale by a Redis restart the client did not see is replaced at once: the first
    command after the restart succeeds instead of failing on the dead connection."""
    store = RedisState(redis_server.url)
    try:
        await store.put("x", b"1", 30)
        redis_server.stop()
        redis_server.start()
        await store.put("y", b"2", 30)
        assert await store.get("y") == b"2"
    finally:
        await store.aclose()


@pytest.mark.parametrize("stored", [b"99999999999999999", b"not a number"], ids=["far future", "not a number"])
async def test_a_corrupt_rate_limit_key_without_ttl_neither_refuses_forever_nor_fails(redis_server, stored) -> None:
    """A rate-limit key left without a TTL holding a value no limit could have stored (a TAT past now + period, or
    not a number) counts as missing: the call is taken, and the key gets a TTL again."""
    state = RedisState(redis_server.url, prefix="t:")
    try:
        await state.client.set("t:rate:tool:x", stored)  # written without PX, as after corruption
        assert await state.acquire("tool:x", 10, 60) == 0.0
        assert 0 < await state.client.pttl("t:rate:tool:x") <= 60_000 + 1
    finally:
        await state.aclose()


async def test_a_refused_rate_limit_re_asserts_its_ttl(redis_server) -> None:
    """Every take, refused or not, re-asserts the rate-limit key's TTL: a key whose TTL was lost gets one back."""
    state = RedisState(redis_server.url, prefix="t:")
    try:
        assert await state.acquire("tool:y", 1, 60) == 0.0
        await state.client.persist("t:rate:tool:y")
        assert await state.acquire("tool:y", 1, 60) > 0
        assert 0 < await state.client.pttl("t:rate:tool:y") <= 60_000 + 1
    finally:
        await state.aclose()


async def test_a_cancellation_redis_reports_as_a_connection_error_still_cancels() -> None:
    """redis-py turns a cancellation that lands while it connects or reads into a connection error. Told as
    ``StateUnavailable``, a loop retrying on it (the MCP sessions' subscription) swallowed its task's cancellation
    and held a worker's shutdown for ever: the task's cancellation goes on instead. A failure of a task nobody
    cancelled is still ``StateUnavailable``."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    store = RedisState("redis://127.0.0.1:1/0")

    async def connecting() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise RedisConnectionError("Connection closed by server.") from None

    task = asyncio.create_task(store._do(connecting()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def refused() -> None:
        raise RedisConnectionError("refused")

    with pytest.raises(StateUnavailable):
        await store._do(refused())
    await store.aclose()
