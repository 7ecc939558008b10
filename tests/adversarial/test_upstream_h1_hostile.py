"""The gateway's own HTTP/1.1 client for plain-http upstreams (``gateway.upstream.h1`` pooling ``h1wire``
connections, under ``new_client``) against an upstream that writes hostile bytes (raw asyncio servers on
127.0.0.1), and a caller that puts hostile values in a request: every call ends with its own answer or an httpx
exception (nothing else may escape: it would be an "internal error"), a wait ends with the read timeout, what is
buffered stays bounded, and no connection is reused once what it carries is not the next request's answer."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from gateway.upstream import h1wire
from gateway.upstream.http import new_client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
HANG = 20.0  # seconds: only to turn a hang into a failure, never a timing assertion
TIMEOUT = httpx.Timeout(5, read=2)  # a connection wrongly reused waits for an answer that never comes: ReadTimeout
SHORT_READ = httpx.Timeout(5, read=0.5)
GOOD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
CLOSE, RESET = "close", "reset"  # in a script: close the connection, or reset it (RST, not FIN)
Part = bytes | float | str  # bytes are written, a float is a pause, CLOSE / RESET end the connection


async def _serve(handler: Handler) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _play(writer: asyncio.StreamWriter, script: list[Part] | bytes) -> bool:
    """Plays ``script`` on ``writer``; whether the connection is still open."""
    for part in [script] if isinstance(script, bytes) else script:
        if isinstance(part, float):
            await asyncio.sleep(part)
        elif part == CLOSE:
            writer.close()
            return False
        elif part == RESET:
            _reset(writer)
            return False
        else:
            writer.write(part)  # type: ignore[arg-type]
            await writer.drain()
    return True


def _scripted(*scripts: list[Part] | bytes, connections: list[int] | None = None) -> Handler:
    """Answers the n-th request it reads (over all connections) with ``scripts[n]`` (the last one for every later
    request), reading requests on each connection until the client leaves; counts connections in ``connections``."""
    requests = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connections is not None:
            connections.append(1)
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                script = scripts[min(requests[0], len(scripts) - 1)]
                requests[0] += 1
                if not await _play(writer, script):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the test ended with the connection open
        finally:
            writer.close()
    return handle


async def _get(client: httpx.AsyncClient, port: int, timeout: httpx.Timeout = TIMEOUT, **options: object
               ) -> httpx.Response:
    return await asyncio.wait_for(client.request(options.pop("method", "GET"), f"http://127.0.0.1:{port}/",  # type: ignore[arg-type]
                                                 timeout=timeout, **options), HANG)  # type: ignore[arg-type]


async def _refused_then_served(script: list[Part] | bytes, error: type[Exception]) -> None:
    """The first request meets ``script`` and fails with ``error``; the next gets its own answer, on a new
    connection (the first one carried bytes that are not the next answer)."""
    connections: list[int] = []
    server, port = await _serve(_scripted(script, GOOD, connections=connections))
    async with server, new_client() as client:
        with pytest.raises(error):
            await _get(client, port)
        assert (await _get(client, port)).content == b"ok"
    assert len(connections) == 2


def _head(*fields: bytes, status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 " + status + b"\r\n" + b"".join(field + b"\r\n" for field in fields) + b"\r\n"


CHUNKED = _head(b"transfer-encoding: chunked")

MALFORMED = {
    "content-length-and-chunked": _head(b"content-length: 2", b"transfer-encoding: chunked") + b"2\r\nok\r\n0\r\n\r\n",
    "two-content-lengths": _head(b"content-length: 2", b"content-length: 3") + b"ok!",
    "repeated-content-length": _head(b"content-length: 2", b"content-length: 2") + b"ok",
    "content-length-list": _head(b"content-length: 2, 2") + b"ok",
    "negative-content-length": _head(b"content-length: -1") + b"ok",
    "signed-content-length": _head(b"content-length: +2") + b"ok",
    "overflowing-content-length": _head(b"content-length: 99999999999999999999999") + b"ok",
    "chunk-size-not-hex": CHUNKED + b"zz\r\nok\r\n0\r\n\r\n",
    "chunk-size-negative": CHUNKED + b"-2\r\nok\r\n0\r\n\r\n",
    "chunk-size-overflowing": CHUNKED + b"fffffffffffffffffffff\r\nok\r\n0\r\n\r\n",
    "chunk-size-bare-lf": CHUNKED + b"2\nok\n0\n\n",
    "chunk-data-longer-than-size": CHUNKED + b"2\r\nokay\r\n0\r\n\r\n",
    "obs-fold": _head(b"x-folded: a", b" b", b"content-length: 2") + b"ok",
    "nul-in-header-value": _head(b"x-nul: a\x00b", b"content-length: 2") + b"ok",
    "control-in-header-name": _head(b"\x01x: y", b"content-length: 2") + b"ok",
    "space-before-colon": _head(b"x : y", b"content-length: 2") + b"ok",
    "status-not-a-number": _head(b"content-length: 2", status=b"abc OK") + b"ok",
    "status-two-digits": _head(b"content-length: 2", status=b"20 OK") + b"ok",
    "status-four-digits": _head(b"content-length: 2", status=b"2000 OK") + b"ok",
    "bare-lf-lines": b"HTTP/1.1 200 OK\ncontent-length: 2\n\nok",
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "switching-protocols": _head(b"upgrade: websocket", b"connection: upgrade", status=b"101 Switching Protocols")
    + b"\x81\x02hi",
    "switching-protocols-bare": _head(status=b"101 Switching Protocols") + b"whatever follows",
}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_answer_is_a_protocol_error_and_its_connection_is_not_reused(answer: bytes) -> None:
    """Framing an attacker could use to desync the connection (both lengths, two lengths, bad chunk sizes), or a
    head that is not HTTP: a RemoteProtocolError, and the next request gets its own answer on a new connection."""
    await _refused_then_served(answer, httpx.RemoteProtocolError)


CUT = {
    "nothing": [CLOSE],
    "mid-status-line": [b"HTTP/1.1 20", CLOSE],
    "mid-head": [b"HTTP/1.1 200 OK\r\ncontent-le", CLOSE],
    "mid-body": [_head(b"content-length: 10") + b"abc", CLOSE],
    "mid-chunk": [CHUNKED + b"5\r\nab", CLOSE],
    "before-last-chunk": [CHUNKED + b"2\r\nok\r\n", CLOSE],
    "mid-trailers": [CHUNKED + b"2\r\nok\r\n0\r\nx-trailer: a", CLOSE],
    "non-chunked-transfer-coding": [_head(b"transfer-encoding: chunked, gzip") + b"abc", CLOSE],
    "status-zero": [_head(status=b"000 Zero") + b"abc", CLOSE],
}


@pytest.mark.parametrize("script", CUT.values(), ids=CUT.keys())
async def test_an_answer_cut_short_by_a_close_is_a_protocol_error(script: list[Part]) -> None:
    """The upstream closes (FIN) before its answer's end: an error, never a short body passed off as whole."""
    await _refused_then_served(script, httpx.RemoteProtocolError)


@pytest.mark.parametrize("script", [[RESET], [b"HTTP/1.1 200 OK\r\n", 0.05, RESET],
                                    [_head(b"content-length: 100000") + b"a" * 5000, 0.05, RESET],
                                    [CHUNKED + b"10\r\nabc", 0.05, RESET]], ids=["before", "mid-head", "mid-body",
                                                                                  "mid-chunk"])
async def test_a_reset_is_a_transport_error(script: list[Part]) -> None:
    """The upstream resets the connection (RST): an httpx transport error, however far the answer got."""
    connections: list[int] = []
    server, port = await _serve(_scripted(script, GOOD, connections=connections))
    async with server, new_client() as client:
        with pytest.raises(httpx.TransportError):
            response = await _get(client, port)
            await response.aread()  # a body cut by the reset fails here, if not already in the head
        assert (await _get(client, port)).content == b"ok"


async def test_a_stalled_answer_ends_with_the_read_timeout() -> None:
    """A slow loris: part of a head, then silence; part of a body, then silence; a chunk line never ended."""
    for script in ([b"HTTP/1.1 2", 60.0], [_head(b"content-length: 10") + b"abc", 60.0],
                   [CHUNKED + b"2;ext=", 60.0], [b"HTTP/1.1 100 Continue\r\n\r\n", 60.0]):
        server, port = await _serve(_scripted(script))
        async with server, new_client() as client:
            with pytest.raises(httpx.ReadTimeout):
                await (await _get(client, port, SHORT_READ)).aread()


async def test_a_head_trickled_one_byte_at_a_time_is_read_whole() -> None:
    """llhttp is fed one byte per read: the answer is the same as sent in one piece."""
    answer = _head(b"content-length: 5", b"x-one: 1", b"x-two: 2") + b"hello"
    script: list[Part] = []
    for byte in answer:
        script += [bytes([byte]), 0.001]
    server, port = await _serve(_scripted(script))
    async with server, new_client() as client:
        response = await _get(client, port, SHORT_READ)
    assert (response.content, response.headers["x-one"], response.headers["x-two"]) == (b"hello", "1", "2")


async def _endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes, each: bytes) -> None:
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(first)
        for _ in range(20_000):  # far past any bound; the client must stop reading long before
            writer.write(each)
            await writer.drain()
            await asyncio.sleep(0)
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.mark.parametrize("first, each", [
    (b"", b"HTTP/1.1 100 Continue\r\n\r\n"),
    (b"", b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"),
    (b"HTTP/1.1 200 OK\r\nx-endless: ", b"a" * 100),
    (b"HTTP/1.1 200 OK\r\n", b"x-many: a\r\n"),
    (CHUNKED + b"2;name=", b"v" * 100),
    (CHUNKED + b"2;", b";a=b"),
    (CHUNKED + b"2\r\nok\r\n0\r\n", b"x-trailer: t\r\n"),
    (CHUNKED + b"0\r\nx-trailer: ", b"t" * 100),
], ids=["100-flood", "103-flood", "header-value", "header-fields", "chunk-extension", "chunk-extensions",
        "trailer-fields", "trailer-value"])
async def test_an_endless_head_or_framing_is_an_error_not_a_growing_buffer(first: bytes, each: bytes) -> None:
    """What the upstream sends that is neither a complete head nor body (informational heads, a header, a chunk
    extension, trailers), without end: an error once past the head's bound, not a wait (each piece arrives well
    within the read timeout) or a buffer growing with what is sent."""
    server, port = await _serve(lambda reader, writer: _endless(reader, writer, first, each))
    async with server, new_client() as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await (await _get(client, port, SHORT_READ)).aread()


async def test_a_few_thousand_informational_heads_within_the_bound_are_skipped() -> None:
    server, port = await _serve(_scripted([b"HTTP/1.1 100 Continue\r\n\r\n" * 2000 + GOOD]))
    async with server, new_client() as client:
        assert (await _get(client, port)).content == b"ok"


async def test_a_head_larger_than_the_bound_is_refused_however_it_arrives() -> None:
    """``MAX_HEAD_BYTES`` bounds an answer's head: a larger one is refused whether it arrives in many reads or in
    one (h1wire's own docstring faults h11 for the difference)."""
    huge = _head(b"x-large: " + b"a" * (h1wire.MAX_HEAD_BYTES + 10_000), b"content-length: 2") + b"ok"
    for script in ([huge], [huge[:1000], 0.05, huge[1000:]]):
        server, port = await _serve(_scripted(script))
        async with server, new_client() as client:
            with pytest.raises(httpx.RemoteProtocolError):
                await _get(client, port)


async def test_a_status_below_100_does_not_smuggle_a_body_into_the_answer() -> None:
    """A status of 0xx is neither informational nor final (h11 refused it): llhttp reads a body after it, which
    must not be taken as the start of the real answer's body."""
    server, port = await _serve(_scripted(_head(b"content-length: 4", status=b"099 Odd") + b"EVIL" + GOOD))
    async with server, new_client() as client:
        try:
            response = await _get(client, port)
        except httpx.RemoteProtocolError:
            return
    assert response.content == b"ok"


NO_BODY = {
    "204-with-content-length": _head(b"content-length: 5", status=b"204 No Content"),
    "304-with-content-length": _head(b"content-length: 5", status=b"304 Not Modified"),
    "204-with-chunked": _head(b"transfer-encoding: chunked", status=b"204 No Content"),
}


@pytest.mark.parametrize("answer", NO_BODY.values(), ids=NO_BODY.keys())
async def test_an_answer_that_has_no_body_ends_with_its_head(answer: bytes) -> None:
    """204 and 304 have no body whatever their headers announce: no wait for it, and the connection carries the
    next exchange."""
    server, port = await _serve(_scripted(answer, GOOD))
    async with server, new_client() as client:
        first = await _get(client, port)
        assert first.content == b"" and first.status_code in (204, 304)
        assert (await _get(client, port)).content == b"ok"


TRAILING = {
    "204-then-an-answer": _head(status=b"204 No Content") + GOOD.replace(b"ok", b"no"),
    "304-then-a-body": _head(b"content-length: 2", status=b"304 Not Modified") + b"no",
    "a-second-answer": GOOD + GOOD.replace(b"ok", b"no"),
    "garbage": GOOD + b"garbage",
    "close-then-more": _head(b"content-length: 2", b"connection: close") + b"ok" + GOOD.replace(b"ok", b"no"),
    "http-1.0-then-more": b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok" + GOOD.replace(b"ok", b"no"),
}


@pytest.mark.parametrize("later", [False, True], ids=["same-segment", "later-segment"])
@pytest.mark.parametrize("answer", TRAILING.values(), ids=TRAILING.keys())
async def test_bytes_past_an_answer_are_never_the_next_answer(answer: bytes, later: bool) -> None:
    """Bytes after a complete answer (in its read, or in a later TCP segment) are not the next request's
    answer: the first answer is read, and the next request gets its own on a new connection."""
    head, _, rest = answer.partition(b"\r\n\r\n")
    end = len(head) + 4 + (2 if rest.startswith(b"ok") else 0)
    script: list[Part] | bytes = [answer[:end], 0.1, answer[end:]] if later else answer
    connections: list[int] = []
    server, port = await _serve(_scripted(script, GOOD, connections=connections))
    async with server, new_client() as client:
        first = await _get(client, port)
        assert first.content in (b"ok", b"")
        await asyncio.sleep(0.3)  # the later segment has arrived
        assert (await _get(client, port)).content == b"ok"
    assert len(connections) == 2


async def test_an_idle_connection_the_upstream_closed_is_not_reused() -> None:
    connections: list[int] = []
    server, port = await _serve(_scripted([GOOD, 0.05, CLOSE], GOOD, connections=connections))
    async with server, new_client() as client:
        assert (await _get(client, port)).content == b"ok"
        await asyncio.sleep(0.3)
        assert (await _get(client, port)).content == b"ok"
    assert len(connections) == 2


@pytest.mark.parametrize("answer, reused", [
    (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok", True),
    (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok", False),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok", False),
], ids=["1.0-keep-alive", "1.0", "1.1-close"])
async def test_keep_alive_is_as_the_answer_says(answer: bytes, reused: bool) -> None:
    connections: list[int] = []
    server, port = await _serve(_scripted(answer, connections=connections))
    async with server, new_client() as client:
        assert [(await _get(client, port)).content for _ in range(3)] == [b"ok"] * 3
    assert len(connections) == (1 if reused else 3)


async def test_a_body_without_a_length_ends_with_the_connection() -> None:
    server, port = await _serve(_scripted([_head(), b"all ", 0.05, b"of it", CLOSE], GOOD))
    async with server, new_client() as client:
        assert (await _get(client, port)).content == b"all of it"
        assert (await _get(client, port)).content == b"ok"


@pytest.mark.parametrize("status, reason", [(b"999", b"Custom"), (b"200", b"\xc3\xa9t\xe9 \xff"), (b"200", b""),
                                            (b"599", b"x" * 5000)])
async def test_an_unusual_status_line_is_read(status: bytes, reason: bytes) -> None:
    server, port = await _serve(_scripted(_head(b"content-length: 2", status=status + b" " + reason) + b"ok"))
    async with server, new_client() as client:
        response = await _get(client, port)
    assert response.status_code == int(status) and response.content == b"ok"
    assert isinstance(response.reason_phrase, str)


async def test_odd_but_valid_header_bytes_are_read_not_raised() -> None:
    """obs-text (bytes 0x80-0xff) in a header value, an empty value, many fields: the answer, not an error."""
    fields = [b"x-latin: caf\xe9", b"x-empty:", b"x-utf8: \xe2\x82\xac"] + [b"x-many: %d" % n for n in range(2000)]
    server, port = await _serve(_scripted(_head(*fields, b"content-length: 2") + b"ok"))
    async with server, new_client() as client:
        response = await _get(client, port)
    assert response.content == b"ok" and len(response.headers.get_list("x-many")) == 2000
    assert response.headers["x-empty"] == ""


async def test_a_body_of_tiny_chunks_read_slowly_stays_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-byte chunks: what is held for a slow reader is counted in body bytes, but each piece is a bytes object
    of its own (some 40 bytes each): what waits in memory must still stay near ``MAX_BUFFERED``, not 40 times it."""
    most = [0]
    on_body = h1wire.Connection.on_body
    def measured(connection: h1wire.Connection, data: bytes) -> None:
        on_body(connection, data)
        most[0] = max(most[0], sys.getsizeof(connection.pending))  # what the body waiting to be read holds

    monkeypatch.setattr(h1wire.Connection, "on_body", measured)
    size = 600_000
    server, port = await _serve(_scripted([CHUNKED + b"1\r\nx\r\n" * size + b"0\r\n\r\n"]))
    async with server, new_client() as client, client.stream("GET", f"http://127.0.0.1:{port}/",
                                                             timeout=TIMEOUT) as answer:
        received = 0
        async for chunk in answer.aiter_raw():
            received += len(chunk)
            await asyncio.sleep(0.05)  # a slow reader
    assert received == size
    assert most[0] <= 4 * h1wire.MAX_BUFFERED


async def test_an_answer_before_the_request_is_sent_whole_ends_the_call() -> None:
    """The upstream answers (and closes) before reading a large request body: the answer, or an httpx transport
    error — never a hang or another exception."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(_head(b"content-length: 8", b"connection: close", status=b"413 Too Large") + b"too big!")
        await writer.drain()
        writer.close()

    server, port = await _serve(handle)
    async with server, new_client() as client:
        try:
            response = await _get(client, port, method="POST", content=b"a" * 16_000_000)
        except httpx.TransportError:
            return
    assert response.status_code == 413 and response.content == b"too big!"


async def test_a_connection_given_up_on_is_closed_even_with_a_request_unsent() -> None:
    """The upstream reads the head of a large request, never the body, and never closes: after the write
    timeout the call fails, and its connection (with megabytes still queued to send) is closed — not kept open
    until the upstream reads, which it never will (a socket and the request's bytes held per call)."""
    done = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(_head(b"content-length: 2") + b"no")
        await done.wait()  # neither reading nor closing
        writer.close()

    server, port = await _serve(handle)
    try:
        async with server, new_client() as client:
            with pytest.raises(httpx.TransportError):
                await _get(client, port, httpx.Timeout(5, write=0.5), method="POST", content=b"a" * 64_000_000)
            await asyncio.sleep(0.5)
            still_open = _client_sockets(port)
    finally:
        done.set()
    assert still_open == []


def _client_sockets(port: int) -> list[str]:
    """This process's TCP connections to ``port`` still established (from /proc/net/tcp)."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        if int(remote.split(":")[1], 16) == port and state == "01":
            found.append(line)
    return found


BAD_REQUEST_HEADERS = [
    ("x-evil", "a\r\nx-smuggled: 1"), ("x-evil", "a\rb"), ("x-evil", "a\nb"), ("x-nul", "a\x00b"),
    ("x-del", "a\x7fb"), ("x-ctl", "a\x1bb"), ("x-lead", " a"), ("x-trail", "a "), ("x-tab", "\ta"),
    ("x-trail-tab", "a\t"), ("bad name", "v"), ("bad:name", "v"), ("", "v"), ("x\r\ny", "v"), ("x(y)", "v"),
    ("host", "a\r\nx: y"),
]


@pytest.mark.parametrize("name, value", BAD_REQUEST_HEADERS)
async def test_a_request_header_that_would_break_the_request_is_refused_before_sending(name: str, value: str) -> None:
    """httpx itself passes these to the transport (h11 refused them): h1wire must, before connecting."""
    connections: list[int] = []
    server, port = await _serve(_scripted(GOOD, connections=connections))
    async with server, new_client() as client:
        with pytest.raises(httpx.LocalProtocolError):
            await _get(client, port, headers={name: value})
    assert connections == []


@pytest.mark.parametrize("method", ["GET / HTTP/1.1\r\nx-smuggled: 1\r\nx:", "GE T", "GET\x00", "GÉT", "G/T"])
async def test_a_method_that_would_break_the_request_line_is_refused(method: str) -> None:
    connections: list[int] = []
    server, port = await _serve(_scripted(GOOD, connections=connections))
    async with server, new_client() as client:
        with pytest.raises(httpx.LocalProtocolError):
            await _get(client, port, method=method)
    assert connections == []


SMUGGLED = b"GET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n"


@pytest.mark.parametrize("framing, body", [
    pytest.param({"content-length": "0"}, SMUGGLED, id="cl-0"),
    pytest.param({"content-length": "2"}, b"ok" + SMUGGLED, id="cl-short"),
    pytest.param({"content-length": "100"}, b"ok", id="cl-long"),
    pytest.param({"content-length": "abc"}, b"ok", id="cl-not-a-number"),
    pytest.param({"content-length": "-1"}, b"ok", id="cl-negative"),
    pytest.param({"transfer-encoding": "gzip"}, b"ok", id="te-gzip"),
    pytest.param({"transfer-encoding": "identity"}, SMUGGLED, id="te-identity"),
])
async def test_a_caller_framing_that_disagrees_with_the_body_is_refused(framing: dict[str, str], body: bytes) -> None:
    """A caller's Content-Length (or Transfer-Encoding) that does not frame the body actually sent would let the
    body's tail be read by the upstream as a request of its own (request smuggling), or hang it waiting for bytes
    never sent; h11 refused each (``Too much data for declared Content-Length``, ``Only Transfer-Encoding: chunked
    is supported``)."""
    targets: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 1)
                targets.append(head.split(b" ")[1])
                length = [int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                          if line.startswith(b"content-length:") and line.split(b":")[1].strip().isdigit()]
                if length:
                    await reader.readexactly(length[0])
                writer.write(GOOD)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ValueError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server, port = await _serve(handle)
    async with server, new_client() as client:
        with pytest.raises(httpx.LocalProtocolError):
            try:
                await _get(client, port, method="POST", headers=framing, content=body)
            finally:
                await asyncio.sleep(0.2)
                assert b"/smuggled" not in targets
