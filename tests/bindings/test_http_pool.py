"""The HTTP client's own pool for plain http (``gateway.upstream.h1`` under ``PlainTransport``), against real
sockets: what httpx's pool guaranteed holds here too — a request waiting for a connection gets the one given back,
connections kept idle for one host never starve another, a large answer head arriving in pieces is read, a
response dropped unread gives its slot back, and a host is resolved by the name httpx would resolve. And what its
parser (``h1wire``, llhttp) must get right as h11 did: an answer to HEAD, informational answers, bytes past an
answer, a slow reader of a large body, trailers, and a request header that would break the request."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from gateway.upstream import h1wire
from gateway.upstream.http import new_client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _closing(serve: Handler) -> Handler:
    """``serve`` as a connection's handler: a client that left is no error, and the connection is closed after."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await serve(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
    return handle


def _answering(delay_s: float = 0.0, head: bytes = b"") -> Handler:
    """Answers every request on a connection with ``ok`` (after ``delay_s``), ``head`` among its headers."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.readuntil(b"\r\n\r\n"):
            await asyncio.sleep(delay_s)
            answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n" + head + b"\r\nok"
            for start in range(0, len(answer), 1000):  # in pieces, as a slow network delivers them
                writer.write(answer[start:start + 1000])
                await writer.drain()
    return _closing(serve)


async def test_a_request_waiting_for_a_connection_gets_the_one_given_back() -> None:
    server, port = await _serve(_answering(delay_s=0.2))
    async with server, new_client(httpx.Limits(max_connections=1, max_keepalive_connections=1)) as client:
        timeout = httpx.Timeout(30, pool=10)  # a bound: the waiter is woken when the first answer is read
        answers = await asyncio.gather(*(client.get(f"http://127.0.0.1:{port}/", timeout=timeout) for _ in range(3)))
    assert [answer.status_code for answer in answers] == [200, 200, 200]


async def test_connections_kept_for_one_host_do_not_starve_another() -> None:
    first, first_port = await _serve(_answering())
    second, second_port = await _serve(_answering())
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    async with first, second, new_client(limits) as client:
        await asyncio.gather(*(client.get(f"http://127.0.0.1:{first_port}/") for _ in range(2)))
        pool = client._transport.pool  # type: ignore[attr-defined]
        assert len(pool.idle) == 2  # both kept, and neither holds a slot
        answer = await client.get(f"http://127.0.0.1:{second_port}/", timeout=httpx.Timeout(30, pool=5))
        assert answer.status_code == 200
        await client.get(f"http://127.0.0.1:{second_port}/")
        assert len(pool.idle) == 2 and pool.slots._value == 2  # the oldest idle one closed to keep the newest


async def test_a_large_answer_head_arriving_in_pieces_is_read() -> None:
    server, port = await _serve(_answering(head=b"x-large: " + b"a" * 20_000 + b"\r\n"))
    async with server, new_client() as client:
        answer = await client.get(f"http://127.0.0.1:{port}/")
    assert answer.status_code == 200 and len(answer.headers["x-large"]) == 20_000


async def test_a_response_dropped_unread_gives_its_slot_back() -> None:
    server, port = await _serve(_answering())
    async with server, new_client(httpx.Limits(max_connections=1, max_keepalive_connections=1)) as client:
        response = await client.send(client.build_request("GET", f"http://127.0.0.1:{port}/"), stream=True)
        assert client._transport.pool.slots._value == 0  # type: ignore[attr-defined]
        del response
        gc.collect()
        assert client._transport.pool.slots._value == 1  # type: ignore[attr-defined]
        assert (await client.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(30, pool=5))).status_code == 200


async def test_an_international_host_is_resolved_by_its_idna_2008_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's resolver would encode ``straße.example`` by IDNA 2003 (``strasse.example``): another host than the
    one httpx, and the allowed-hosts check, name."""
    asked: list[str] = []

    async def refuse(factory: object, host: str, port: int, **options: object) -> None:
        asked.append(host)
        raise ConnectionRefusedError(111, "refused")

    monkeypatch.setattr(asyncio.get_running_loop(), "create_connection", refuse)
    async with new_client() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://straße.example/")
    assert asked == ["xn--strae-oqa.example"]


def _once(answer: bytes, seen: list[int] | None = None) -> Handler:
    """Answers each connection's first request with ``answer`` as written, then reads on until the client closes;
    counts the connections in ``seen``."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if seen is not None:
            seen.append(1)
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        while await reader.read(65536):
            pass
    return _closing(serve)


async def test_an_answer_to_head_ends_with_its_head_and_its_connection_is_not_kept() -> None:
    """HEAD's answer announces a body it does not send (RFC 9110 9.3.2): read as ending with its head, not as a
    wait for five bytes; what may follow on that connection is not trusted to start the next answer."""
    seen: list[int] = []
    server, port = await _serve(_once(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", seen))
    async with server, new_client() as client:
        for _ in range(2):
            answer = await client.head(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(10))
            assert answer.status_code == 200 and answer.content == b""
    assert len(seen) == 2


async def test_informational_answers_before_the_answer_are_skipped() -> None:
    server, port = await _serve(_once(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
                                      b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\nx-kind: final\r\n\r\nok"))
    async with server, new_client() as client:
        answer = await client.post(f"http://127.0.0.1:{port}/", content=b"x")
    assert (answer.status_code, answer.content, answer.headers.get("x-kind"), answer.headers.get("link")) == (
        201, b"ok", "final", None)


async def test_bytes_sent_past_an_answer_are_not_the_next_answer() -> None:
    """A second answer (or garbage) in the same read as the first: the first is read, and the connection — whose
    next bytes are not the next request's answer — is closed, so the next request gets its own."""
    seen: list[int] = []
    smuggled = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok" + b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nevil"
    server, port = await _serve(_once(smuggled, seen))
    async with server, new_client() as client:
        assert [(await client.get(f"http://127.0.0.1:{port}/")).content for _ in range(2)] == [b"ok", b"ok"]
    assert len(seen) == 2


async def test_a_large_answer_read_slowly_is_buffered_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading from the socket pauses while what was received and not yet read passes ``MAX_BUFFERED``, and
    resumes as it is read: the whole body arrives, and what waits in memory stays near the bound."""
    monkeypatch.setattr(h1wire, "MAX_BUFFERED", 64 * 1024)
    most = [0]
    on_body = h1wire.Connection.on_body

    def measured(connection: h1wire.Connection, data: bytes) -> None:
        on_body(connection, data)
        most[0] = max(most[0], len(connection.pending))

    monkeypatch.setattr(h1wire.Connection, "on_body", measured)
    body = bytes(range(256)) * 16 * 1024  # 4 MiB
    server, port = await _serve(_once(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body))
    async with server, new_client() as client, client.stream("GET", f"http://127.0.0.1:{port}/") as answer:
        received = []
        async for chunk in answer.aiter_raw():
            received.append(chunk)
            await asyncio.sleep(0.001)  # a slow reader: the socket has time to fill what it may
    assert b"".join(received) == body
    assert most[0] <= 64 * 1024 + 256 * 1024  # the bound plus one read


@pytest.mark.parametrize("name, value", [("x-evil", "a\r\nx-smuggled: 1"), ("x-evil", "a\nb"), ("bad name", "v"),
                                         ("x-nul", "a\x00b")])
async def test_a_header_that_would_break_the_request_is_refused_before_sending(name: str, value: str) -> None:
    seen: list[int] = []
    server, port = await _serve(_once(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", seen))
    async with server, new_client() as client:
        with pytest.raises(httpx.LocalProtocolError):
            await client.get(f"http://127.0.0.1:{port}/", headers={name: value})
    assert seen == []


async def test_trailer_fields_are_not_headers_and_endless_ones_are_an_error() -> None:
    """Trailer fields after a chunked body are not the answer's headers; trailer fields (or a chunk extension) that
    never end are an error once past the head's bound, not a buffer growing with what the upstream sends."""
    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"
    server, port = await _serve(_once(chunked + b"x-trailer: t\r\n\r\n"))
    async with server, new_client() as client:
        answer = await client.get(f"http://127.0.0.1:{port}/")
    assert answer.content == b"ok" and "x-trailer" not in answer.headers

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(chunked + b"x-trailer: ")
        for _ in range(1_000):  # 1 MB of one field's value, trickled
            writer.write(b"a" * 1_000)
            await writer.drain()
            await asyncio.sleep(0)

    server, port = await _serve(_closing(endless))
    async with server, new_client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="trailer"):
            await client.get(f"http://127.0.0.1:{port}/")


async def test_a_streamed_request_body_goes_out_whole_as_one_chunk() -> None:
    """A body httpx has not read (an async iterator: sent chunked) is read and sent as one chunk and the last."""
    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"0\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def parts() -> AsyncIterator[bytes]:
        yield b"hello, "
        yield b"world"

    server, port = await _serve(handle)
    async with server, new_client() as client:
        assert (await client.post(f"http://127.0.0.1:{port}/", content=parts())).status_code == 200
    head, _, body = received[0].partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower() and body == b"c\r\nhello, world\r\n0\r\n\r\n"
