"""Shared state in Redis (``cluster: {redis_url: ...}``), through the ``redis`` package's asyncio client.

Every key is under one prefix (``tool-gateway:`` unless told otherwise), so one Redis can serve several
gateways. Records are plain keys with a ``PX`` expiry; a rate limit is one key updated by one Lua script
(``gcra.LUA``: atomic, and timed by Redis' clock, so replicas need not agree on theirs); messages go over Redis
pub/sub.

Failing fast: connecting waits ``connect_timeout_s`` at most and a command ``command_timeout_s``. A command that
meets a broken connection is tried once more, at once, on a fresh one: after Redis restarts, the pool's
connections are all dead, and without that retry the first command on each would fail although Redis answers.
A timeout is not retried (Redis is there but slow: waiting twice helps nobody). Any connection error left is
``StateUnavailable``; the next operation simply tries again, which is how the gateway reconnects by itself once
Redis is back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .base import StateUnavailable
from .gcra import LUA

T = TypeVar("T")
SCAN_BATCH = 500


class RedisState:
    kind = "redis"

    def __init__(self, url: str, *, prefix: str = "tool-gateway:", connect_timeout_s: float = 0.5,
                 command_timeout_s: float = 2.0):
        self.prefix = prefix
        self.where = _without_password(url)
        self.client = aioredis.Redis.from_url(url, socket_connect_timeout=connect_timeout_s,
                                              socket_timeout=command_timeout_s, retry_on_timeout=False,
                                              retry=Retry(NoBackoff(), 1), retry_on_error=[RedisConnectionError],
                                              health_check_interval=30)
        self._gcra = self.client.register_script(LUA)

    async def _do(self, step: Awaitable[T]) -> T:
        try:
            return await step
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            failure = StateUnavailable(f"shared state (Redis at {self.where}) is unreachable: {exc}")
        except RedisError as exc:  # an answer we did not expect (a read-only replica, OOM): as unavailable
            failure = StateUnavailable(f"shared state (Redis at {self.where}) failed: {exc}")
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # redis-py turns a cancellation that lands while it connects or reads into a connection error: told as
            # StateUnavailable, a loop that retries on it (a subscription's) would swallow its task's cancellation
            # and outlive the shutdown waiting for it.
            raise asyncio.CancelledError
        raise failure

    async def get(self, key: str) -> bytes | None:
        return await self._do(self.client.get(self.prefix + key))

    async def put(self, key: str, value: bytes, ttl_s: float) -> None:
        await self._do(self.client.set(self.prefix + key, value, px=max(1, int(ttl_s * 1000))))

    async def touch(self, key: str, ttl_s: float) -> bool:
        return bool(await self._do(self.client.pexpire(self.prefix + key, max(1, int(ttl_s * 1000)))))

    async def delete(self, key: str) -> None:
        await self._do(self.client.delete(self.prefix + key))

    async def take(self, key: str) -> bytes | None:
        return await self._do(self.client.getdel(self.prefix + key))  # Redis 6.2+

    async def scan(self, prefix: str) -> Mapping[str, bytes]:
        async def collect() -> dict[str, bytes]:
            keys = [k async for k in self.client.scan_iter(match=_glob_escape(self.prefix + prefix) + "*",
                                                            count=SCAN_BATCH)]
            if not keys:
                return {}
            values = await self.client.mget(keys)
            start = len(self.prefix)
            return {k.decode()[start:]: v for k, v in zip(keys, values, strict=True) if v is not None}

        return await self._do(collect())

    async def acquire(self, key: str, calls: int, per_s: float) -> float:
        taken, retry_ms = await self._do(self._gcra(keys=[self.prefix + "rate:" + key], args=[calls, per_s]))
        return 0.0 if int(taken) else float(retry_ms) / 1000.0

    async def publish(self, channel: str, message: bytes) -> int:
        return int(await self._do(self.client.publish(self.prefix + channel, message)))

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        await self._do(pubsub.subscribe(self.prefix + channel))

        async def messages() -> AsyncIterator[bytes]:
            while True:
                message: Any = await self._do(pubsub.get_message(timeout=None))
                if message is not None and message.get("type") == "message":
                    yield message["data"]

        try:
            yield messages()
        finally:
            try:
                await pubsub.aclose()
            except (RedisError, OSError):  # the connection is gone already: nothing to unsubscribe from
                pass

    async def ping(self) -> bool:
        try:
            return bool(await self._do(self.client.ping()))
        except StateUnavailable:
            return False

    async def aclose(self) -> None:
        await self.client.aclose()


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _without_password(url: str) -> str:
    """The URL as it may be printed: a password in it never reaches a message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return parts._replace(netloc=f"{user}{host}{port}").geturl()
