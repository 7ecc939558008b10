"""HTTP/1.1 POSTs to a plain-``http://`` upstream on kept-alive connections of our own (h11 over asyncio streams),
for ``gateway.upstream.mcp.fastcall``: an ``httpx2`` request costs about a millisecond of CPU on a small machine (its models,
the connection pool's locks, the headers and the body written in two system calls); this is one write per
request and a parser, and answers as an ``httpx2.Response`` so the caller reads it as any other.

Only where httpx2 would do the same thing: plain http (TLS stays with httpx2), no proxy in the environment for the
host, no credentials in the URL; a call while the session's client holds cookies the upstream set (a load
balancer's affinity) goes through httpx2 too. The upstream's configured headers come from the session's
``httpx2.AsyncClient``, and so do its timeouts.
"""

from __future__ import annotations

import asyncio
import select
import urllib.request
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import h11
import httpx2

READ_SIZE = 65536
MAX_IDLE = 32  # connections kept open for the next calls; a burst's extra ones are closed when done
# Connections open at once to one upstream, as httpx2's pool allows the SDK's path (its default max_connections):
# a burst of calls to an upstream that answers slowly waits for one (bounded by each tool's deadline) instead of
# spending a file descriptor per call.
MAX_OPEN = 100
SKIPPED = frozenset({"accept-encoding", "host", "content-length", "transfer-encoding", "connection"})


def usable(url: str) -> bool:
    """Whether a POST to ``url`` is one httpx2 would make directly (plain http, no credentials in the URL, no proxy
    for its host)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.username is not None:  # httpx2 sends userinfo as Basic
        return False
    proxies = urllib.request.getproxies()
    return not (proxies.get("http") or proxies.get("all")) or bool(urllib.request.proxy_bypass(parts.hostname))


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slots: asyncio.Semaphore):
        self.reader, self.writer, self.slots = reader, writer, slots
        self.h11 = h11.Connection(h11.CLIENT)
        self.closed = False  # its slot given back (the transport may have closed itself on a reset)
        self.idle_check = select.poll()
        self.idle_check.register(writer.get_extra_info("socket").fileno(), select.POLLIN)

    def alive(self) -> bool:
        """Whether the next request may go on it: open, idle, and nothing received since its last answer ended —
        bytes an upstream wrote on an idle connection would be read as the next call's answer (a desync).
        StreamReader has no public way to ask whether it holds bytes; its buffer is where they are. Nor anything
        waiting in the kernel (httpx2's pool asks the same before reusing one): the loop reads the end of a
        connection the upstream closed (killed, restarted) only when it next gets to it, on a loaded machine after
        the next call came; written there, that call met a reset and failed as one the upstream may have run (never
        sent twice) though the connection was dead before it was written. On a new connection it is sent, or found
        unknown to a restarted upstream and sent again on a new session."""
        return not self.reader.at_eof() and not self.writer.is_closing() and self.h11.our_state is h11.IDLE \
            and not self.reader._buffer and not self.idle_check.poll(0)  # type: ignore[attr-defined]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.slots.release()
        self.writer.close()


class Wire:
    """Kept-alive connections to one upstream (``usable(url)`` must hold)."""

    def __init__(self, http: httpx2.AsyncClient, url: str):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "", parts.port or 80
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.authority = parts.netloc.rpartition("@")[2]
        self.http = http
        self.idle: list[_Connection] = []
        self.slots = asyncio.Semaphore(MAX_OPEN)
        self.closed = False  # its session ended: a call still in flight closes its connection when done
        self.request = httpx2.Request("POST", url)  # what the answers say they answer (httpx2 reads it)
        # The session's client headers (the upstream's configured ones): fixed for the client's life.
        self.headers = {k.lower(): v for k, v in http.headers.items() if k.lower() not in SKIPPED}

    async def post(self, body: bytes, headers: dict[str, str]) -> httpx2.Response:
        """The answer's status and headers; its body is read from the returned response (stream it, or
        ``aread``), and ``aclose`` gives the connection back (or drops it when the body was not read whole)."""
        merged = {**self.headers, **headers}
        connection = await self._connection()
        try:
            out = connection.h11.send(h11.Request(method="POST", target=self.target, headers=[
                ("host", self.authority), *merged.items(), ("content-length", str(len(body)))]))
            connection.writer.write(out + connection.h11.send(h11.Data(data=body)) +  # type: ignore[operator]
                                    connection.h11.send(h11.EndOfMessage()))  # type: ignore[operator]
            event = await self._next(connection)
            while isinstance(event, h11.InformationalResponse):
                event = await self._next(connection)
            if not isinstance(event, h11.Response):  # closed before answering (a kept-alive connection it dropped)
                raise httpx2.RemoteProtocolError("the upstream closed the connection without answering")
        except BaseException:
            connection.close()
            raise
        # Bytes as received: httpx2 reads them as Latin-1 (a value may hold any byte HTTP allows), as for its own.
        return httpx2.Response(event.status_code, headers=list(event.headers),
                               stream=_Body(self, connection), request=self.request)

    async def _connection(self) -> _Connection:
        while self.idle:
            connection = self.idle.pop()
            if connection.alive():
                return connection
            connection.close()
        await self.slots.acquire()
        timeout = self.http.timeout.connect
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see _next
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except BaseException as exc:
            self.slots.release()
            if isinstance(exc, TimeoutError):
                raise httpx2.ConnectTimeout(f"could not connect within {timeout} s") from None
            if isinstance(exc, OSError):
                raise httpx2.ConnectError(str(exc)) from None
            raise
        return _Connection(reader, writer, self.slots)

    async def _next(self, connection: _Connection) -> object:
        while True:
            try:
                event = connection.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx2.RemoteProtocolError(str(exc)) from None
            if event is not h11.NEED_DATA:
                return event
            try:
                # Not asyncio.wait_for: on 3.11, a cancellation (the tool's deadline) that arrives as the read
                # completes is swallowed by it, and an upstream that never stops writing holds the call forever.
                async with asyncio.timeout(self.http.timeout.read):
                    data = await connection.reader.read(READ_SIZE)
            except TimeoutError:
                raise httpx2.ReadTimeout("the upstream sent nothing in time") from None
            except OSError as exc:
                raise httpx2.ReadError(str(exc)) from None
            connection.h11.receive_data(data)

    def release(self, connection: _Connection, whole: bool) -> None:
        """Keep ``connection`` for the next call only when its exchange ended cleanly and the upstream sent
        nothing past its answer (pipelined bytes would be the next call's answer: response smuggling)."""
        if whole and not self.closed and len(self.idle) < MAX_IDLE and connection.h11.our_state is h11.DONE \
                and connection.h11.their_state is h11.DONE and not connection.h11.trailing_data[0]:
            connection.h11.start_next_cycle()
            self.idle.append(connection)
        else:
            connection.close()

    def aclose(self) -> None:
        self.closed = True
        for connection in self.idle:
            connection.close()
        self.idle.clear()


class _Body(httpx2.AsyncByteStream):
    def __init__(self, wire: Wire, connection: _Connection):
        self.wire, self.connection, self.whole = wire, connection, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            event = await self.wire._next(self.connection)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.whole = True
                return
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx2.RemoteProtocolError("the upstream closed the connection before its answer ended")

    async def aclose(self) -> None:
        connection, self.connection = self.connection, None  # type: ignore[assignment]
        if connection is not None:
            self.wire.release(connection, self.whole)
