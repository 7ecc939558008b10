"""The default shared state: this process's memory. Nothing to run, nothing shared with other processes.

Expired records are dropped when read and swept on writes once the table has grown, so memory stays bounded by
what is live; and by ``max_records`` whatever lives (callers who can make records — a chat turn that hands tools
back makes one — cannot grow the process without end): past it the oldest record goes first. All methods run on
the event loop and never await anything slow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from .gcra import decide

SWEEP_EVERY = 1024  # writes between sweeps of expired records
SUBSCRIBER_BACKLOG = 1024  # messages one subscriber may fall behind before it loses the oldest
MAX_RECORDS = 100_000


class MemoryState:
    kind = "memory"

    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self._max_records = max_records
        self._records: dict[str, tuple[bytes, float]] = {}  # key -> (value, expires at, monotonic)
        self._tats: dict[str, float] = {}
        self._channels: dict[str, set[asyncio.Queue[bytes]]] = {}
        self._writes = 0

    async def get(self, key: str) -> bytes | None:
        record = self._records.get(key)
        if record is None:
            return None
        if record[1] <= time.monotonic():
            del self._records[key]
            return None
        return record[0]

    async def put(self, key: str, value: bytes, ttl_s: float) -> None:
        if key not in self._records and len(self._records) >= self._max_records:
            self._sweep()
            if len(self._records) >= self._max_records:
                del self._records[next(iter(self._records))]  # the oldest written
        self._records[key] = (value, time.monotonic() + ttl_s)
        self._writes += 1
        if self._writes % SWEEP_EVERY == 0:
            self._sweep()

    async def touch(self, key: str, ttl_s: float) -> bool:
        value = await self.get(key)
        if value is None:
            return False
        self._records[key] = (value, time.monotonic() + ttl_s)
        return True

    async def delete(self, key: str) -> None:
        self._records.pop(key, None)

    async def take(self, key: str) -> bytes | None:
        value = await self.get(key)
        self._records.pop(key, None)
        return value

    async def scan(self, prefix: str) -> Mapping[str, bytes]:
        now = time.monotonic()
        return {k: v for k, (v, expires) in self._records.items() if k.startswith(prefix) and expires > now}

    async def acquire(self, key: str, calls: int, per_s: float) -> float:
        now_ms = time.monotonic() * 1000.0
        tat, retry_ms = decide(self._tats.get(key), now_ms, calls, per_s)
        if retry_ms:
            return retry_ms / 1000.0
        self._tats[key] = tat
        if len(self._tats) > SWEEP_EVERY and self._writes % SWEEP_EVERY == 0:
            self._tats = {k: t for k, t in self._tats.items() if t > now_ms}  # a past TAT is the same as none
        self._writes += 1
        return 0.0

    async def publish(self, channel: str, message: bytes) -> int:
        queues = self._channels.get(channel, ())
        for queue in queues:
            if queue.full():
                queue.get_nowait()  # a subscriber that stopped reading loses its oldest message, not others'
            queue.put_nowait(message)
        return len(queues)

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        queue: asyncio.Queue[bytes] = asyncio.Queue(SUBSCRIBER_BACKLOG)
        self._channels.setdefault(channel, set()).add(queue)

        async def messages() -> AsyncIterator[bytes]:
            while True:
                yield await queue.get()

        try:
            yield messages()
        finally:
            subscribers = self._channels.get(channel)
            if subscribers is not None:
                subscribers.discard(queue)
                if not subscribers:
                    del self._channels[channel]

    async def ping(self) -> bool:
        return True

    async def aclose(self) -> None:
        self._records.clear()
        self._tats.clear()

    def _sweep(self) -> None:
        now = time.monotonic()
        self._records = {k: r for k, r in self._records.items() if r[1] > now}
