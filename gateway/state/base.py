"""What every shared-state implementation offers (``SharedState``) and how it fails (``StateUnavailable``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ..errors import GatewayError


class StateUnavailable(GatewayError):
    """The shared store (Redis) cannot be reached: the request that needed it fails, nothing else does."""

    status = 503
    code = "shared_state_unavailable"  # as chat errors carry a code (OpenAI's shape)


class SharedState(Protocol):
    """Records with a time to live, atomic rate limits, and messages between replicas."""

    kind: str  # "memory" or "redis"

    async def get(self, key: str) -> bytes | None:
        """The record stored under ``key``, or None (never stored, deleted or expired)."""

    async def put(self, key: str, value: bytes, ttl_s: float) -> None:
        """Store ``value`` under ``key`` for ``ttl_s`` seconds (a put again renews it)."""

    async def touch(self, key: str, ttl_s: float) -> bool:
        """Give the record under ``key`` ``ttl_s`` more seconds to live, unchanged; False when there is none (a
        touch never brings back a deleted record)."""

    async def delete(self, key: str) -> None: ...

    async def take(self, key: str) -> bytes | None:
        """The record under ``key``, deleted in the same step (of two replicas taking it at once, one gets it)."""

    async def scan(self, prefix: str) -> Mapping[str, bytes]:
        """Every live record whose key starts with ``prefix`` (for small sets: the replica registry)."""

    async def acquire(self, key: str, calls: int, per_s: float) -> float:
        """Take one call from the limit ``calls`` per ``per_s`` seconds named ``key`` (GCRA: a burst of ``calls``,
        then one every ``per_s / calls`` s). 0.0 when taken; else the seconds until one would be, and nothing is
        taken."""

    async def publish(self, channel: str, message: bytes) -> int:
        """Send ``message`` to the subscribers of ``channel``; how many received it."""

    def subscribe(self, channel: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """The messages published to ``channel`` from now on, while the context is open."""

    async def ping(self) -> bool:
        """Whether the store answers now (``/status`` reports degraded when it does not)."""

    async def aclose(self) -> None: ...
