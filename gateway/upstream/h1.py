"""HTTP/1.1 to plain-``http://`` upstreams on kept-alive connections of our own (``h1wire``: one connection, its
request written and its answer parsed by llhttp), pooled here.

httpx's own pool (httpcore) costs more than the request: before each one it asks every pooled connection whether
it has expired (a ``getpeername`` and a ``poll`` system call per connection, so 16 calls in flight cost 16 of
each), and each request takes and gives back three anyio locks. Profiled under wrk (16 connections), that was
half the CPU of a call of an HTTP-bound tool. Here taking a connection checks only the one taken, the head and
a small body go out in one write, and the answer is parsed in C as it arrives.

The pool is generic over the httpx module it answers for (``httpx``, or ``httpx2`` that the MCP SDK uses): the
exceptions it raises are that module's, so whoever reads them (``upstream.http.describe``, retries) sees what
httpx itself would raise — with the OS error as the cause, which names a refused connection or a failed lookup.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import h1wire
from .h1wire import Connection, Head


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds, None for no limit: as httpx's ``Timeout`` gives them (``pool``: waiting for a free connection)."""

    connect: float | None = None
    read: float | None = None
    write: float | None = None
    pool: float | None = None


class Pool:
    """What the origins of one client share: a slot for each connection *in use* (``max_active``), and the idle
    connections, at most ``max_idle`` over all origins, the oldest closed first. An idle connection holds no slot,
    so a request to one host never waits on connections kept for another, and a connection given back wakes a
    request waiting for a slot at once; what is open stays within ``max_active + max_idle``."""

    def __init__(self, max_active: int, max_idle: int):
        self.slots = asyncio.Semaphore(max_active)
        self.max_idle = max_idle
        self.idle: dict[Connection, Origin] = {}  # oldest first

    def keep(self, origin: Origin, connection: Connection) -> None:
        origin.idle.append(connection)
        self.idle[connection] = origin
        while len(self.idle) > self.max_idle:
            oldest, held_by = next(iter(self.idle.items()))
            self.forget(held_by, oldest)
            oldest.close()

    def forget(self, origin: Origin, connection: Connection) -> None:
        self.idle.pop(connection, None)
        if connection in origin.idle:
            origin.idle.remove(connection)


class Origin:
    """Kept-alive connections to one ``host:port`` (an ASCII host: IDNA-encoded by the caller, as httpx resolves it),
    within the limits of ``pool``."""

    def __init__(self, http: ModuleType, host: str, port: int, pool: Pool):
        self.http, self.host, self.port, self.pool = http, host, port, pool
        self.idle: list[Connection] = []
        self.closed = False  # a request still in flight closes its connection when done

    async def send(self, method: bytes, target: bytes, headers: Sequence[tuple[str | bytes, str | bytes]], body: bytes,
                   timeouts: Timeouts) -> tuple[Head, Connection]:
        """Send one request (``headers`` with its Host and framing); its answer's head, and the connection its
        body is read from (``body``), which holds a slot of the pool until the body is closed."""
        request = h1wire.request(self.http, method, target, headers, body)
        connection = await self._connection(timeouts)
        try:
            connection.start(request, no_body=method == b"HEAD")
            await connection.drained(timeouts.write)
            head = await connection.answer_head(timeouts.read)
        except BaseException:
            self._drop(connection)
            raise
        return head, connection

    def body(self, connection: Connection, read_timeout: float | None) -> Any:
        """The answer's body on ``connection``, a stream of the httpx module's (its responses take no other)."""
        return _stream_class(self.http)(self, connection, read_timeout)

    async def _connection(self, timeouts: Timeouts) -> Connection:
        """A connection for one exchange, holding a slot of the pool: an idle one that is still sound, else a new
        one."""
        if self.pool.slots.locked():
            try:
                async with asyncio.timeout(timeouts.pool):
                    await self.pool.slots.acquire()
            except TimeoutError:
                raise self.http.PoolTimeout(f"no connection became free within {timeouts.pool} s") from None
        else:
            await self.pool.slots.acquire()  # free: taken without waiting
        try:
            while self.idle:
                connection = self.idle.pop()
                self.pool.forget(self, connection)
                if connection.alive():
                    return connection
                connection.close()
            return await self._connect(timeouts.connect)
        except BaseException:
            self.pool.slots.release()
            raise

    async def _connect(self, timeout: float | None) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(functools.partial(h1wire.Connection, self.http), self.host,
                                                             self.port)
        except TimeoutError:
            raise self.http.ConnectTimeout(f"could not connect within {timeout} s") from None
        except OSError as exc:
            raise self.http.ConnectError(str(exc) or type(exc).__name__) from exc
        return connection

    def release(self, connection: Connection, whole: bool) -> None:
        """Give back the slot ``connection`` held, keeping it for the next request only when its exchange ended
        cleanly and the upstream sent nothing past its answer (pipelined bytes would be the next request's answer:
        response smuggling)."""
        self.pool.slots.release()
        if connection.finish() and whole and not self.closed:
            self.pool.keep(self, connection)
        else:
            connection.close()

    def _drop(self, connection: Connection) -> None:
        connection.finish()
        self.pool.slots.release()
        connection.close()

    def close(self) -> None:
        self.closed = True
        for connection in list(self.idle):
            self.pool.forget(self, connection)
            connection.close()


@functools.cache
def _stream_class(http: ModuleType) -> type[Body]:
    return type("Body", (Body, http.AsyncByteStream), {})


class Body:
    """An answer's body, read as the httpx module's ``AsyncByteStream``: ``aclose`` gives the connection back,
    or drops it when the body was not read whole."""

    def __init__(self, origin: Origin, connection: Connection, read_timeout: float | None):
        self.origin, self.connection, self.read_timeout, self.whole = origin, connection, read_timeout, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while data := await self.connection.chunk(self.read_timeout):
            yield data
        self.whole = True

    async def aclose(self) -> None:
        connection, self.connection = self.connection, None  # type: ignore[assignment]
        if connection is not None:
            self.origin.release(connection, self.whole)

    def __del__(self) -> None:
        # A response dropped without being closed: its slot comes back, its connection (state unknown) is closed.
        if self.connection is not None:
            self.origin.release(self.connection, whole=False)
