"""The HTTP server: uvicorn with a request-head deadline, on httptools (a C parser) or h11, on uvloop or asyncio.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``), but it puts no time limit on *receiving* a
head: a client that connects and sends nothing, or sends a header line now and then (slowloris), holds its
connection for as long as it likes; and its httptools protocol puts no limit on a head's size. ``HeadLimits``
closes a connection whose request head is not complete ``header_timeout_s`` after it began — after the
connection opened, or after the first byte of a further request on a keep-alive connection — answering 408 when
part of a head had arrived. Trickling bytes does not move the deadline. A head over ``max_header_bytes`` is
answered 431, however it arrives (h11's own limit applies only to a head still incomplete after a read).

The parser and the loop are settings (``http_parser``, ``event_loop``): ``auto`` takes httptools and uvloop,
which are installed with the gateway, and falls back to h11 and asyncio where they are not (uvloop does not run
on Windows). The C parser and loop more than double what one core serves (docs/benchmarks.md); h11 stays for
a parser bug's day. The limits: ``header_timeout_s``, ``keepalive_timeout_s``, ``max_header_bytes``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ...settings import Settings, SettingsInvalid

log = logging.getLogger("gateway.server")
REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
HEAD_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class HeadLimits(asyncio.Protocol):
    """The head deadline and size limit, over either parser's protocol (the subclasses say where a head is)."""

    header_timeout_s: float = 10.0
    max_header_bytes: int = 65_536
    _head_deadline: asyncio.TimerHandle | None = None
    _head_bytes = 0  # bytes of the head being received, before this chunk
    _head_tail = b""  # the last bytes received of it, where a terminator split across chunks begins
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    client: tuple[str, int] | None

    def _head_may_begin(self) -> bool:
        """Whether bytes arriving now are (part of) a request head, not a body."""
        raise NotImplementedError

    def _head_in_progress(self) -> bool:
        """Whether part of a head has arrived and not yet the rest of it."""
        raise NotImplementedError

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self._head_may_begin() and self._head_too_large(data):
            self._head_arrived()
            self.transport.write(HEAD_TOO_LARGE)
            self.transport.close()
            return
        super().data_received(data)  # type: ignore[safe-super]
        if self._head_in_progress():
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
        if not self._head_may_begin() or self.transport.is_closing():
            return
        partial = self._head_in_progress()
        log.debug("closing a connection from %s: no complete request head within %g s (%s)",
                  "{}:{}".format(*self.client) if self.client else "?", self.header_timeout_s,
                  "part of one came" if partial else "no byte came")
        if partial:  # a client that began a request hears why it ends; one that sent nothing is just closed
            self.transport.write(REQUEST_TIMEOUT)
        self.transport.close()


class H11HeadLimits(HeadLimits, H11Protocol):
    """uvicorn's h11 protocol with the head limits: h11 is IDLE until a whole head has been parsed."""

    def _head_may_begin(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _head_in_progress(self) -> bool:
        return self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])


def _httptools_protocol() -> type[HeadLimits]:
    """uvicorn's httptools protocol with the head limits (defined on first use: httptools may not be installed).
    llhttp says where a head begins (``on_message_begin``, at its first byte) and ends (``on_headers_complete``);
    between a message's end and the next one's first byte the connection is idle, under the keep-alive timeout,
    and a request still being served is never cut by the head deadline."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsHeadLimits(HeadLimits, HttpToolsProtocol):
        _phase = "idle"  # idle (no byte of the next request yet), head, or body

        def _head_may_begin(self) -> bool:
            return self._phase != "body"

        def _head_in_progress(self) -> bool:
            return self._phase == "head"

        def on_message_begin(self) -> None:
            self._phase = "head"
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._phase = "body"
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._phase = "idle"
            super().on_message_complete()

    return HttpToolsHeadLimits


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def parser_and_loop(settings: Settings) -> tuple[str, str]:
    """The HTTP parser and event loop ``settings`` ask for, ``auto`` resolved; ``SettingsInvalid`` when one
    asked for by name is not installed."""
    chosen = []
    for setting, value, fast, fallback in (("http_parser", settings.http_parser, "httptools", "h11"),
                                           ("event_loop", settings.event_loop, "uvloop", "asyncio")):
        if value == "auto":
            value = fast if _installed(fast) else fallback
        elif value == fast and not _installed(fast):
            raise SettingsInvalid(f"setting '{setting}': {fast} is not installed here (pip install {fast}), "
                                  f"or use {fallback}")
        chosen.append(value)
    return chosen[0], chosen[1]


def server_config(app: Any, settings: Settings, host: str, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration ``serve`` runs ``app`` with: the parser, loop and connection limits from
    ``settings``."""
    parser, loop = parser_and_loop(settings)
    base = _httptools_protocol() if parser == "httptools" else H11HeadLimits
    protocol = type(base.__name__, (base,), {
        "header_timeout_s": settings.header_timeout_s, "max_header_bytes": settings.max_header_bytes})
    return uvicorn.Config(app, host=host, port=settings.port, http=protocol, loop=loop,
                          timeout_keep_alive=settings.keepalive_timeout_s,  # type: ignore[arg-type]  # a float works
                          h11_max_incomplete_event_size=settings.max_header_bytes, **options)
