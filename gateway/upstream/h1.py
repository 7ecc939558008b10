"""HTTP/1.1 to plain-``http://`` upstreams on kept-alive connections of our own: h11 over asyncio streams.

httpx's own pool (httpcore) costs more than the request: before each one it asks every pooled connection whether
it has expired (a ``getpeername`` and a ``poll`` system call per connection, so 16 calls in flight cost 16 of
each), and each request takes and gives back three anyio locks. Profiled under wrk (16 connections), that was
half the CPU of a call of an HTTP-bound tool. Here taking a connection checks only the one taken, the head and
a small body go out in one write, and the answer is parsed by h11 (the parser httpcore uses).

The pool is generic over the httpx module it answers for (``httpx``, or ``httpx2`` that the MCP SDK uses): the
exceptions it raises are that module's, so whoever reads them (``upstream.http.describe``, retries) sees what
httpx itself would raise — with the OS error as the cause, which names a refused connection or a failed lookup.
"""

from __future__ import annotations

import asyncio
import functools
import select
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import h11

READ_SIZE = 65536


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds, None for no limit: as httpx's ``Timeout`` gives them (``pool``: waiting for a free connection)."""

    connect: float | None = None
    read: float | None = None
    write: float | None = None
    pool: float | None = None


# An answer's head may be this large (httpcore's limit; h11's default, 16 KiB, refused a large head that arrived in
# several reads and passed one that arrived in one).
MAX_HEAD_BYTES = 100 * 1024
NO_ANSWER = "Server disconnected without sending a response."  # httpcore's words, which callers may know


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


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_check = select.poll()
        self.idle_check.register(writer.get_extra_info("socket").fileno(), select.POLLIN)

    def alive(self) -> bool:
        """Whether the next request may go on it: open, idle, and nothing received since its last answer ended —
        bytes an upstream wrote on an idle connection would be read as the next request's answer (a desync).
        StreamReader has no public way to ask whether it holds bytes; its buffer is where they are. Nor anything
        waiting in the kernel (httpcore asks the same before reusing one): the loop reads the end of a connection
        the upstream closed (killed, restarted) only when it next gets to it, on a loaded machine after the next
        request came; written there, that request met a reset and failed as one the upstream may have run."""
        return not self.reader.at_eof() and not self.writer.is_closing() and self.h11.our_state is h11.IDLE \
            and not self.reader._buffer and not self.idle_check.poll(0)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.writer.close()


class Origin:
    """Kept-alive connections to one ``host:port`` (an ASCII host: IDNA-encoded by the caller, as httpx resolves it),
    within the limits of ``pool``."""

    def __init__(self, http: ModuleType, host: str, port: int, pool: Pool):
        self.http, self.host, self.port, self.pool = http, host, port, pool
        self.idle: list[Connection] = []
        self.closed = False  # a request still in flight closes its connection when done

    async def send(self, method: bytes, target: bytes, headers: Sequence[tuple[str | bytes, str | bytes]], body: bytes,
                   timeouts: Timeouts) -> tuple[h11.Response, Connection]:
        """Send one request (``headers`` with its Host and framing); its answer's head, and the connection its
        body is read from (``body``), which holds a slot of the pool until the body is closed."""
        connection = await self._connection(timeouts)
        try:
            data = connection.h11.send(h11.Request(method=method, target=target, headers=headers))
            if body:
                data += connection.h11.send(h11.Data(data=body))  # type: ignore[operator]
            connection.writer.write(data + connection.h11.send(h11.EndOfMessage()))  # type: ignore[operator]
            await self._drained(connection, timeouts.write)
            event = await self.next_event(connection, timeouts.read)
            while isinstance(event, h11.InformationalResponse):
                event = await self.next_event(connection, timeouts.read)
            if not isinstance(event, h11.Response):
                raise self.http.RemoteProtocolError(NO_ANSWER)
        except h11.LocalProtocolError as exc:
            self._drop(connection)
            raise self.http.LocalProtocolError(str(exc)) from exc
        except BaseException:
            self._drop(connection)
            raise
        return event, connection

    def body(self, connection: Connection, read_timeout: float | None) -> Any:
        """The answer's body on ``connection``, a stream of the httpx module's (its responses take no other)."""
        return _stream_class(self.http)(self, connection, read_timeout)

    async def _connection(self, timeouts: Timeouts) -> Connection:
        """A connection for one exchange, holding a slot of the pool: an idle one that is still sound, else a new
        one."""
        try:
            async with asyncio.timeout(timeouts.pool):
                await self.pool.slots.acquire()
        except TimeoutError:
            raise self.http.PoolTimeout(f"no connection became free within {timeouts.pool} s") from None
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
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see next_event
                reader, writer = await asyncio.open_connection(self.host, self.port, limit=READ_SIZE)
        except TimeoutError:
            raise self.http.ConnectTimeout(f"could not connect within {timeout} s") from None
        except OSError as exc:
            raise self.http.ConnectError(str(exc) or type(exc).__name__) from exc
        return Connection(reader, writer)

    async def _drained(self, connection: Connection, timeout: float | None) -> None:
        try:
            async with asyncio.timeout(timeout):
                await connection.writer.drain()
        except TimeoutError:
            raise self.http.WriteTimeout("the request could not be sent in time") from None
        except OSError as exc:
            raise self.http.WriteError(str(exc) or type(exc).__name__) from exc

    async def next_event(self, connection: Connection, timeout: float | None) -> Any:
        while True:
            try:
                event = connection.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise self.http.RemoteProtocolError(str(exc)) from None
            if event is not h11.NEED_DATA:
                return event
            try:
                # Not asyncio.wait_for: on 3.11, a cancellation (the tool's deadline) that arrives as the read
                # completes is swallowed by it, and an upstream that never stops writing holds the call forever.
                async with asyncio.timeout(timeout):
                    data = await connection.reader.read(READ_SIZE)
            except TimeoutError:
                raise self.http.ReadTimeout("the server sent nothing in time") from None
            except OSError as exc:
                raise self.http.ReadError(str(exc) or type(exc).__name__) from exc
            if not data and connection.h11.their_state is h11.SEND_RESPONSE:
                # A kept-alive connection the server closed as the request went out, say.
                raise self.http.RemoteProtocolError(NO_ANSWER)
            connection.h11.receive_data(data)

    def release(self, connection: Connection, whole: bool) -> None:
        """Give back the slot ``connection`` held, keeping it for the next request only when its exchange ended
        cleanly and the upstream sent nothing past its answer (pipelined bytes would be the next request's answer:
        response smuggling)."""
        self.pool.slots.release()
        if whole and not self.closed and connection.h11.our_state is h11.DONE \
                and connection.h11.their_state is h11.DONE and not connection.h11.trailing_data[0]:
            connection.h11.start_next_cycle()
            self.pool.keep(self, connection)
        else:
            connection.close()

    def _drop(self, connection: Connection) -> None:
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
        while True:
            event = await self.origin.next_event(self.connection, self.read_timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.whole = True
                return
            elif isinstance(event, h11.ConnectionClosed):
                raise self.origin.http.RemoteProtocolError("the server closed the connection before its answer ended")

    async def aclose(self) -> None:
        connection, self.connection = self.connection, None  # type: ignore[assignment]
        if connection is not None:
            self.origin.release(connection, self.whole)

    def __del__(self) -> None:
        # A response dropped without being closed: its slot comes back, its connection (state unknown) is closed.
        if self.connection is not None:
            self.origin.release(self.connection, whole=False)
