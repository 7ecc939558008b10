"""One kept-alive HTTP/1.1 connection to a plain-``http://`` upstream (``h1`` pools them): a request's bytes, every
part checked as h11 checked it, and the answer parsed by llhttp (``httptools``, the parser uvicorn serves with) as it
arrives, in the protocol's callbacks — no stream reader between the socket and the parser — with its head, the body
not yet read, chunk extensions and trailer fields each bounded; a wait for the answer is one future and one timer.

The exceptions are those of the httpx module the connection answers for (``httpx``, or ``httpx2`` that the MCP SDK
uses), as httpx itself would raise them.
"""

from __future__ import annotations

import asyncio
import re
import select
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import httptools

# An answer's head may be this large (httpcore's limit; h11's default, 16 KiB, refused a large head that arrived in
# several reads and passed one that arrived in one).
MAX_HEAD_BYTES = 100 * 1024
# Body bytes received and not yet read by the caller: past this, reading from the socket pauses until it reads.
MAX_BUFFERED = 256 * 1024
NO_ANSWER = "Server disconnected without sending a response."  # httpcore's words, which callers may know
CUT_SHORT = "the server closed the connection before its answer ended"
# What a request's parts may hold (RFC 9110's token for a field name; no control character but HTAB in a value, no
# space or control character in the target): what h11 checked before it sent a request.
_FIELD_NAME = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]|^[ \t]|[ \t]$")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_NO_BODY_STATUSES = frozenset({204, 304})


@dataclass(slots=True)
class Head:
    """An answer's status line and header fields, as received."""

    status_code: int
    headers: list[tuple[bytes, bytes]]
    http_version: bytes
    reason: bytes


class _Stop(Exception):
    """Raised in a parser callback to stop parsing: what follows is not this exchange's."""


class Connection(asyncio.Protocol):
    """One connection, one exchange at a time: ``start`` it, write the request, then read the answer's ``head``
    and its body in ``chunk``s. The parser's callbacks fill what the reader takes; a wait for them is bounded by
    the read timeout. What the upstream sends outside an exchange (on an idle connection, past an answer's end)
    makes the connection unfit for another."""

    def __init__(self, http: ModuleType):
        self.http = http
        self.transport: asyncio.Transport | None = None
        self.idle_check = select.poll()
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.reusable = True  # false once anything forbids another exchange on it
        self.waiter: asyncio.Future[bool] | None = None
        self.writable: asyncio.Future[None] | None = None  # set while the transport asks us to stop writing
        self.failure: BaseException | None = None
        self.expecting = False  # an exchange is under way (its answer not yet read whole)
        self._reset(no_body=False)

    def _reset(self, no_body: bool) -> None:
        self.no_body = no_body  # a HEAD request: the answer ends with its head, whatever its headers say
        self.head: Head | None = None
        self.reason = b""
        self.fields: list[tuple[bytes, bytes]] = []
        self.framed = False  # the answer says its length (Content-Length, or chunked)
        self.head_bytes = 0  # received while no head was whole (a bound on what the parser holds)
        self.head_size = 0  # of the heads parsed (1xx ones too): a bound however the bytes arrived
        self.pending = bytearray()  # body received, not yet read: memory as counted (not a list of small pieces)
        self.body_bytes = 0  # of the answer, so far
        self.chunk_lines = 0  # chunk-size lines parsed, so far
        self.framing_bytes = 0  # received since the head, past the body and ordinary chunk lines (see data_received)
        self.complete = False

    # The transport's side.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.idle_check.register(transport.get_extra_info("socket").fileno(), select.POLLIN)

    def data_received(self, data: bytes) -> None:
        if not self.expecting or self.complete or self.failure is not None:
            # Bytes no request asked for would be read as the next request's answer (a desync, or smuggling).
            self.reusable = False
            return
        after_head, body_bytes, chunk_lines = self.head is not None, self.body_bytes, self.chunk_lines
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            if isinstance(cause, _Stop) or self.complete:
                self.reusable = False  # the answer ended; what followed it is not read
            elif isinstance(cause, self.http.RemoteProtocolError):
                self._fail(cause)
            else:
                self._fail(self.http.RemoteProtocolError(f"invalid HTTP from the server ({exc})"))
        if self.head is None and self.failure is None:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                self._fail(self.http.RemoteProtocolError(f"the answer's head is larger than {MAX_HEAD_BYTES} bytes"))
        elif after_head and self.failure is None:
            # What llhttp reads past the head that is neither body nor a short chunk-size line: a chunk extension,
            # trailer fields (httptools holds a field's value whole until it ends). Trickled without any body
            # between, it would grow without bound: past MAX_HEAD_BYTES (h11's bound on such a line), an error.
            if self.body_bytes != body_bytes:
                self.framing_bytes = 0
            self.framing_bytes += max(len(data) - (self.body_bytes - body_bytes)
                                      - 8 * (self.chunk_lines - chunk_lines), 0)
            if self.framing_bytes > MAX_HEAD_BYTES:
                self._fail(self.http.RemoteProtocolError(
                    f"more than {MAX_HEAD_BYTES} bytes of chunk extensions or trailer fields"))
        self._wake()

    def eof_received(self) -> bool:
        return False  # close: an upstream that stops writing will not read the next request either

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self.expecting and not self.complete and self.failure is None:
            if exc is not None:
                failure = self.http.ReadError(str(exc) or type(exc).__name__)
                failure.__cause__ = exc
                self._fail(failure)
            elif self.head is None:
                self._fail(self.http.RemoteProtocolError(NO_ANSWER))
            elif not self.framed and self.head.status_code not in _NO_BODY_STATUSES:
                self.complete = True  # a body without a length ends where the connection does
            else:
                self._fail(self.http.RemoteProtocolError(CUT_SHORT))
        self._wake()
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    # The parser's side (httptools calls these from ``feed_data``).

    def on_message_begin(self) -> None:
        if self.complete:
            raise _Stop  # a second answer to one request

    def on_status(self, reason: bytes) -> None:
        self.reason += reason
        self.head_size += len(reason)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head is not None:
            return  # a trailer field (after a chunked body): httpx shows none either
        self.head_size += len(name) + len(value) + 4
        self.fields.append((name, value))
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self.head_size += 16  # the status line's other parts
        if self.head_size > MAX_HEAD_BYTES:
            raise self.http.RemoteProtocolError(f"the answer's head is larger than {MAX_HEAD_BYTES} bytes")
        if status == 101:
            raise self.http.RemoteProtocolError("the server switched protocols, which no request asked for")
        if status < 100:  # no such status: llhttp would read a body after it, into the answer that follows
            raise self.http.RemoteProtocolError(f"invalid status code {status}")
        if status < 200:  # informational (100 Continue, 103 Early Hints): the answer follows
            self.reason, self.fields, self.framed = b"", [], False
            return
        self.head = Head(status, self.fields, self.parser.get_http_version().encode(), self.reason)
        if self.no_body:
            self.complete = True
            raise _Stop  # llhttp would read a body its headers announce; whatever follows is not this answer's

    def on_chunk_header(self) -> None:
        self.chunk_lines += 1

    def on_body(self, body: bytes) -> None:
        if self.head is None:  # llhttp reads none after a 1xx head; this is a guard for what it may allow
            raise self.http.RemoteProtocolError("a body before the answer's head")
        self.pending += body
        self.body_bytes += len(body)
        if len(self.pending) > MAX_BUFFERED and self.transport is not None:
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self.head is None:
            return  # the end of an informational answer
        self.complete = True
        if not self.parser.should_keep_alive():
            self.reusable = False

    # The caller's side.

    def alive(self) -> bool:
        """Whether the next request may go on it: open, idle, and nothing received since its last answer ended —
        bytes an upstream wrote on an idle connection would be read as the next request's answer (a desync). Nor
        anything waiting in the kernel (httpcore asks the same before reusing one): the loop reads the end of a
        connection the upstream closed (killed, restarted) only when it next gets to it, on a loaded machine after
        the next request came; written there, that request met a reset and failed as one the upstream may have
        run."""
        return self.reusable and not self.closed and not self.expecting and self.transport is not None \
            and not self.transport.is_closing() and not self.idle_check.poll(0)

    def start(self, request: bytes, no_body: bool) -> None:
        """Send ``request`` (head and body), and expect its answer."""
        self._reset(no_body)
        self.expecting = True
        self.transport.write(request)  # type: ignore[union-attr]

    async def drained(self, timeout: float | None) -> None:
        """Wait until the transport takes more (only while it asked us to stop writing)."""
        writable = self.writable
        if writable is None or writable.done():
            return
        try:
            async with asyncio.timeout(timeout):
                await writable
        except TimeoutError:
            raise self.http.WriteTimeout("the request could not be sent in time") from None

    async def answer_head(self, timeout: float | None) -> Head:
        while self.head is None:
            self._raise_failure()
            await self._wait(timeout)
        return self.head

    async def chunk(self, timeout: float | None) -> bytes:
        """The body received since the last call; ``b""`` once the answer has ended."""
        while True:
            if self.pending:
                data, paused = bytes(self.pending), len(self.pending) > MAX_BUFFERED
                self.pending.clear()
                if paused and not self.closed:
                    self.transport.resume_reading()  # type: ignore[union-attr]
                return data
            if self.complete:
                return b""
            self._raise_failure()
            await self._wait(timeout)

    def finish(self) -> bool:
        """End the exchange; whether the connection may carry another."""
        self.expecting = False
        return self.complete and self.reusable and self.failure is None and not self.closed

    def close(self) -> None:
        """Close it; at once (a reset) when part of a request is still unsent: a graceful close would wait to send
        it to an upstream that may never read it, and keep the socket and the bytes until then."""
        if self.transport is not None:
            if self.transport.get_write_buffer_size():
                self.transport.abort()
            else:
                self.transport.close()

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def _wait(self, timeout: float | None) -> None:
        # One future and one timer: asyncio.timeout (a context, its own timer and cancellation bookkeeping) around
        # every read was a tenth of an HTTP-bound call's CPU. The timer resolves the future rather than cancel the
        # task, so a deadline of the caller's that lands in the same step is never swallowed (asyncio.wait_for on
        # 3.11 did: an upstream that never stops writing held the call forever).
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            if not await waiter:
                raise self.http.ReadTimeout("the server sent nothing in time")
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(True)

    def _fail(self, failure: BaseException) -> None:
        self.failure = failure
        self.reusable = False
        self.close()


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


def request(http: ModuleType, method: bytes, target: bytes, headers: Sequence[tuple[str | bytes, str | bytes]],
            body: bytes) -> bytes:
    """The request's bytes, every part checked: a line break in a header value would start a header (or a
    request) of its own."""
    if not _FIELD_NAME.fullmatch(method) or not target or _BAD_TARGET.search(target):
        raise http.LocalProtocolError(f"illegal request line: {method!r} {target!r}")
    lines = [method, b" ", target, b" HTTP/1.1\r\n"]
    framing = None
    for name, value in headers:
        name = name.encode("latin-1") if isinstance(name, str) else name
        value = value.encode("latin-1") if isinstance(value, str) else value
        if not _FIELD_NAME.fullmatch(name):
            raise http.LocalProtocolError(f"illegal header name {name!r}")
        if _BAD_VALUE.search(value):
            raise http.LocalProtocolError(f"illegal header value for {name.decode('latin-1')!r}")
        lowered = name.lower()
        if lowered in (b"content-length", b"transfer-encoding"):
            # The framing the request says must be the one it has: a Content-Length shorter than the body sends the
            # rest as a request of its own (smuggling), a longer one leaves the upstream waiting.
            if lowered == b"content-length" and value != b"%d" % len(body):
                raise http.LocalProtocolError(f"Content-Length {value!r} is not the body's length ({len(body)})")
            if lowered == b"transfer-encoding" and value.lower() != b"chunked":
                raise http.LocalProtocolError(f"unsupported Transfer-Encoding {value!r} (only chunked is sent)")
            framing = lowered if framing is None else b"both"
        lines += (name, b": ", value, b"\r\n")
    if framing == b"transfer-encoding":
        body = (b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)) if body else b"0\r\n\r\n"
    elif framing is None and body:
        lines += (b"content-length: ", str(len(body)).encode(), b"\r\n")
    elif framing == b"both":
        raise http.LocalProtocolError("a request may not carry both Content-Length and Transfer-Encoding")
    lines += (b"\r\n", body)
    return b"".join(lines)
