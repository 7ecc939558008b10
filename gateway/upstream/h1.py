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


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slots: asyncio.Semaphore):
        self.reader, self.writer, self.slots = reader, writer, slots
        self.h11 = h11.Connection(h11.CLIENT)
        self.closed = False  # its slot given back (the transport may have closed itself on a reset)
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
        if not self.closed:
            self.closed = True
            self.slots.release()
        self.writer.close()


class Origin:
    """Kept-alive connections to one ``host:port``; at most ``slots`` open at once (shared with other origins when
    the semaphore is) and ``max_idle`` kept for the next requests."""

    def __init__(self, http: ModuleType, host: str, port: int, slots: asyncio.Semaphore, max_idle: int):
        self.http, self.host, self.port, self.slots, self.max_idle = http, host, port, slots, max_idle
        self.idle: list[Connection] = []
        self.closed = False  # a request still in flight closes its connection when done

    async def send(self, method: bytes, target: bytes, headers: Sequence[tuple[str | bytes, str | bytes]], body: bytes,
                   timeouts: Timeouts) -> tuple[h11.Response, Connection]:
        """Send one request (``headers`` with its Host and framing); its answer's head, and the connection its
        body is read from (``body``)."""
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
            if not isinstance(event, h11.Response):  # closed before answering (a kept-alive connection it dropped)
                raise self.http.RemoteProtocolError("the server closed the connection without answering")
        except h11.LocalProtocolError as exc:
            connection.close()
            raise self.http.LocalProtocolError(str(exc)) from exc
        except BaseException:
            connection.close()
            raise
        return event, connection

    def body(self, connection: Connection, read_timeout: float | None) -> Any:
        """The answer's body on ``connection``, a stream of the httpx module's (its responses take no other)."""
        return _stream_class(self.http)(self, connection, read_timeout)

    async def _connection(self, timeouts: Timeouts) -> Connection:
        while self.idle:
            connection = self.idle.pop()
            if connection.alive():
                return connection
            connection.close()
        try:
            async with asyncio.timeout(timeouts.pool):
                await self.slots.acquire()
        except TimeoutError:
            raise self.http.PoolTimeout(f"no connection became free within {timeouts.pool} s") from None
        try:
            async with asyncio.timeout(timeouts.connect):  # not wait_for: see next_event
                reader, writer = await asyncio.open_connection(self.host, self.port, limit=READ_SIZE)
        except BaseException as exc:
            self.slots.release()
            if isinstance(exc, TimeoutError):
                raise self.http.ConnectTimeout(f"could not connect within {timeouts.connect} s") from None
            if isinstance(exc, OSError):
                raise self.http.ConnectError(str(exc) or type(exc).__name__) from exc
            raise
        return Connection(reader, writer, self.slots)

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
            connection.h11.receive_data(data)

    def release(self, connection: Connection, whole: bool) -> None:
        """Keep ``connection`` for the next request only when its exchange ended cleanly and the upstream sent
        nothing past its answer (pipelined bytes would be the next request's answer: response smuggling)."""
        if whole and not self.closed and len(self.idle) < self.max_idle and connection.h11.our_state is h11.DONE \
                and connection.h11.their_state is h11.DONE and not connection.h11.trailing_data[0]:
            connection.h11.start_next_cycle()
            self.idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        self.closed = True
        for connection in self.idle:
            connection.close()
        self.idle.clear()


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
