"""The HTTP server's connection limits: uvicorn's h11 protocol with a deadline on the request head.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) and refuses a head larger than h11's
buffer (``h11_max_incomplete_event_size``), but it puts no time limit on *receiving* a head: a client that
connects and sends nothing, or sends a header line now and then (slowloris), holds its connection for as long
as it likes. ``HeadDeadlineProtocol`` closes a connection whose request head is not complete
``header_timeout_s`` after it began — after the connection opened, or after the first byte of a further
request on a keep-alive connection — answering 408 when part of a head had arrived. Trickling bytes does not
move the deadline. A head over ``max_header_bytes`` is answered 431, however it arrives (h11's own limit
applies only to a head still incomplete after a read).

The three settings: ``header_timeout_s``, ``keepalive_timeout_s``, ``max_header_bytes``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ...settings import Settings

log = logging.getLogger("gateway.server")
REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
HEAD_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class HeadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections that do not complete a request head in time or whose head
    is larger than ``max_header_bytes``."""

    header_timeout_s: float = 10.0
    max_header_bytes: int = 65_536
    _head_deadline: asyncio.TimerHandle | None = None
    _head_bytes = 0  # bytes of the head being received, before this chunk
    _head_tail = b""  # the last bytes received of it, where a terminator split across chunks begins

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._head_too_large(data):
            self._head_arrived()
            self.transport.write(HEAD_TOO_LARGE)
            self.transport.close()
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # the bytes so far are part of a head, not yet all of it
            self._await_head()
        else:
            self._head_arrived()

    def _head_too_large(self, data: bytes) -> bool:
        """Whether the head this chunk continues is over the limit. h11's own limit applies only to a head
        still incomplete after a read, so a large head arriving in one read would pass it."""
        joined = self._head_tail + data  # the tail: a terminator may be split across two reads
        found = joined.find(b"\r\n\r\n")
        if found >= 0:  # the head ends in this read; the next head starts afresh
            size = self._head_bytes - len(self._head_tail) + found + 4
            self._head_bytes, self._head_tail = 0, b""
        else:
            size = self._head_bytes + len(data)
            self._head_bytes, self._head_tail = size, joined[-3:]
        return size > self.max_header_bytes

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        if self._head_deadline is None and not self.transport.is_closing():
            self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_overdue)

    def _head_arrived(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_overdue(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return
        partial, _ = self.conn.trailing_data
        log.debug("closing a connection from %s: no complete request head within %g s (%d bytes of one)",
                  "{}:{}".format(*self.client) if self.client else "?", self.header_timeout_s, len(partial))
        if partial:  # a client that began a request hears why it ends; one that sent nothing is just closed
            self.transport.write(REQUEST_TIMEOUT)
        self.transport.close()


def server_config(app: Any, settings: Settings, host: str, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration ``serve`` runs ``app`` with: the connection limits from ``settings``."""
    protocol = type("HeadDeadlineProtocol", (HeadDeadlineProtocol,), {
        "header_timeout_s": settings.header_timeout_s, "max_header_bytes": settings.max_header_bytes})
    return uvicorn.Config(app, host=host, port=settings.port, http=protocol,
                          timeout_keep_alive=settings.keepalive_timeout_s,  # type: ignore[arg-type]  # a float works
                          h11_max_incomplete_event_size=settings.max_header_bytes, **options)
