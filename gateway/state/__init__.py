"""Shared state: what replicas must agree on, behind one small interface with two implementations.

- ``memory.MemoryState`` (the default): one process, nothing to run, nothing shared.
- ``redis.RedisState`` (``cluster: {redis_url: ...}``): the same operations on Redis, so any replica can serve
  any request.

What lives here (and nothing else): records with a time to live (chat hand-back history, MCP session records,
the replica registry), rate-limit counters (GCRA, atomic), and messages between replicas (publish / subscribe:
a browser-bridge call forwarded to the replica that holds the page's WebSocket). Surfaces hold a ``SharedState``
and never know which one runs.

Failure rule: an operation that cannot reach the store raises ``StateUnavailable`` at once (no retry loop on the
caller's time); the caller turns it into a clear error for the one request that needed shared state. Calls that
need none never touch the store.
"""

from __future__ import annotations

from typing import Any

from .base import SharedState, StateUnavailable

__all__ = ["SharedState", "StateUnavailable", "open_state"]


def open_state(redis_url: str | None, **options: Any) -> SharedState:
    """Redis when a URL is given (the ``redis`` package is then required), else memory."""
    if redis_url:
        from .redis import RedisState

        return RedisState(redis_url, **options)
    from .memory import MemoryState

    return MemoryState()
