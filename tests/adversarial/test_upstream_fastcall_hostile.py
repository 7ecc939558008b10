"""The fast path's own HTTP/1.1 client (``gateway.upstream.mcp.wire``, under ``gateway.upstream.mcp.fastcall``) against an upstream
that writes hostile bytes (raw asyncio servers on 127.0.0.1): every call ends with its own answer or an error, no
answer is read from bytes meant for another call, and the gateway's resources stay bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from gateway.upstream.mcp import wire as mcp_wire
from gateway.upstream.mcp.fastcall import FastCall, Handover

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Session:
    """The SDK session a fast call stands beside, reduced to what it asks (a 2026-07-28 one: no courtesy posts)."""

    session_id = None
    protocol_version = "2026-07-28"
    modern = True

    def stamp(self, message: dict[str, Any]) -> dict[str, str]:
        return {}

    async def answer(self, request_id: Any, method: str, params: Any) -> dict[str, Any]:
        return {}

    async def notified(self, method: str, params: Any) -> None:
        return None


async def read_request(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """One POST's JSON body, or None when the client closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return json.loads(await reader.readexactly(length))


def json_answer(request_id: Any, result: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


def sse_answer(request_id: Any, result: dict[str, Any]) -> bytes:
    event = b"event: message\ndata: " + json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
    body = event + b"\n\n"
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.close()


@asynccontextmanager
async def fast_call(url: str) -> AsyncIterator[FastCall]:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(10, read=300)) as http:
        fast = FastCall(http, url, Session())
        assert fast.wire is not None
        try:
            yield fast
        finally:
            fast.close()


def run(coroutine: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coroutine, 60))  # type: ignore[arg-type]


def test_bytes_pipelined_after_an_answer_are_not_the_next_calls_answer():
    """An upstream that writes a second, forged response right after its answer (response smuggling): the next
    call on that upstream gets the answer to its own request, never the forged one."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_request(reader)) is not None:
            writer.write(json_answer(request["id"], {"answer": "real"}) + sse_answer(0, {"answer": "forged"}))
            await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            assert (await fast.call("t", {}))["answer"] == "real"
            assert (await fast.call("t", {}))["answer"] == "real"

    run(scenario())


def test_bytes_an_upstream_writes_on_an_idle_connection_are_not_the_next_calls_answer():
    """An upstream that writes a forged response on a kept-alive connection between two calls: the next call
    does not read it as its answer (the connection is not reused)."""

    async def scenario() -> None:
        forged = asyncio.Event()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while (request := await read_request(reader)) is not None:
                writer.write(json_answer(request["id"], {"answer": "real"}))
                await writer.drain()
                await asyncio.sleep(0.05)
                writer.write(sse_answer(0, {"answer": "forged"}))
                await writer.drain()
                forged.set()
            writer.close()

        async with serving(handler) as url, fast_call(url) as fast:
            assert (await fast.call("t", {}))["answer"] == "real"
            await forged.wait()
            await asyncio.sleep(0.2)  # the forged bytes reach the gateway's side of the idle connection
            assert (await fast.call("t", {}))["answer"] == "real"

    run(scenario())


def test_a_call_cancelled_while_its_answer_is_half_read_does_not_give_the_connection_back():
    """A call abandoned at its deadline while the upstream is half-way through a body: that connection is
    closed, and the next call gets its own answer on a new one."""

    async def scenario() -> None:
        connections = []

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(writer)
            while (request := await read_request(reader)) is not None:
                if len(connections) == 1:
                    body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"answer": "late"}})
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                                 % len(body) + body[:10].encode())
                    await writer.drain()
                    await asyncio.sleep(0.5)
                    writer.write(body[10:].encode())
                else:
                    writer.write(json_answer(request["id"], {"answer": "real"}))
                await writer.drain()
            writer.close()

        async with serving(handler) as url, fast_call(url) as fast:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(fast.call("t", {}), 0.2)
            assert not fast.wire.origin.idle
            assert (await fast.call("t", {}))["answer"] == "real"
            assert len(connections) == 2

    run(scenario())


def test_many_concurrent_calls_open_no_more_connections_than_the_sdk_path_would():
    """150 concurrent calls to an upstream that answers slowly all get their answers over at most as many
    connections at once as the SDK's HTTP client allows (100): a burst cannot spend the gateway's file
    descriptors."""

    async def scenario() -> None:
        open_now = [0, 0]  # current, highest

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            open_now[0] += 1
            open_now[1] = max(open_now[1], open_now[0])
            try:
                while (request := await read_request(reader)) is not None:
                    await asyncio.sleep(0.3)
                    writer.write(json_answer(request["id"], {"answer": request["id"]}))
                    await writer.drain()
            finally:
                open_now[0] -= 1
                writer.close()

        async with serving(handler) as url, fast_call(url) as fast:
            answers = await asyncio.gather(*(fast.call("t", {}) for _ in range(150)))
            assert len({a["answer"] for a in answers}) == 150
            assert open_now[1] <= mcp_wire.MAX_OPEN, open_now

    run(scenario())


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nx-filler: " + b"a" * 10_000_000 + b"\r\n\r\n",  # one endless header line
    b"HTTP/1.1 200 OK\r\n" + b"x-h: v\r\n" * 2_000_000 + b"\r\n",  # a 16 MB header section
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n" + b"f" * 10_000_000,
    b"HTTP/1.1 101 Switching Protocols\r\nupgrade: evil\r\nconnection: upgrade\r\n\r\nwhatever",
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000000000\r\n\r\n{",
])
def test_malformed_or_endless_http_is_an_error_not_a_hang_or_unbounded_buffer(answer):
    """An endless header line, a huge header section, a huge chunk-size line, an unasked-for 101 upgrade, or a
    body that ends long before its Content-Length: an MCPError for the call (the connection dropped), never a
    hang or a buffer growing with what the upstream sends."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await read_request(reader) is not None:
            writer.write(answer)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            with pytest.raises(MCPError):
                await fast.call("t", {})
            assert not fast.wire.origin.idle

    run(scenario())


def test_connections_the_upstream_resets_give_their_slot_back(monkeypatch):
    """Calls whose connection the upstream resets mid-answer are errors, and each gives its connection's slot
    back: more of them than the open-connection cap are followed by a call that gets its answer."""
    monkeypatch.setattr(mcp_wire, "MAX_OPEN", 3)

    async def scenario() -> None:
        calls = [0]

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while (request := await read_request(reader)) is not None:
                calls[0] += 1
                if calls[0] <= 10:
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 99\r\n\r\n{")
                    await writer.drain()
                    writer.transport.abort()  # a reset, mid-body
                    return
                writer.write(json_answer(request["id"], {"answer": "real"}))
                await writer.drain()
            writer.close()

        async with serving(handler) as url, fast_call(url) as fast:
            for _ in range(10):
                with pytest.raises(MCPError):
                    await fast.call("t", {})
            assert (await asyncio.wait_for(fast.call("t", {}), 20))["answer"] == "real"

    run(scenario())


class LegacySession(Session):
    """A 2025-11-25 session: an abandoned call is told to the upstream (``notifications/cancelled``)."""

    session_id = "s1"
    protocol_version = "2025-11-25"
    modern = False


def test_an_endless_answer_to_a_courtesy_post_is_not_read():
    """An upstream answering the gateway's notifications/cancelled with an endless body: the gateway does not
    read it (the SDK never reads the body of a notification's POST), so the post ends instead of buffering
    what the upstream sends for as long as it sends it."""

    async def scenario() -> None:
        abandoned = asyncio.Event()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            request = await read_request(reader)
            if request is None:
                return
            if "id" in request:  # the call: never answered
                await asyncio.sleep(60)
                return
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
            try:
                for _ in range(3200):  # 200 MB, then silence: an endless answer as far as the test can tell
                    writer.write(b"10000\r\n" + b" " * 65536 + b"\r\n")
                    await writer.drain()
            except ConnectionError:
                abandoned.set()
                return
            await asyncio.sleep(60)

        async with serving(handler) as url, httpx2.AsyncClient(timeout=httpx2.Timeout(10, read=300)) as http:
            fast = FastCall(http, url, LegacySession())
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(fast.call("t", {}), 0.5)
            await asyncio.wait_for(abandoned.wait(), 20)
            await asyncio.wait_for(asyncio.gather(*fast._background), 20)
            fast.close()

    run(scenario())


@pytest.mark.parametrize("content_type", [b"application/json", b"text/event-stream"])
def test_an_answer_whose_content_encoding_lies_is_an_mcp_error(content_type):
    """An answer labelled gzip whose body is not gzip (JSON or an event stream): an MCPError for the call, which
    the gateway reports naming the upstream, not an unexpected exception logged as the tool's own bug."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await read_request(reader) is not None:
            body = b"this is not gzip at all"
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-encoding: gzip\r\n"
                         b"content-length: %d\r\n\r\n%s" % (content_type, len(body), body))
            await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            with pytest.raises(MCPError):
                await fast.call("t", {})

    run(scenario())


def test_an_event_stream_of_notifications_that_never_answers_ends_at_the_deadline():
    """An upstream that keeps its answer's event stream busy with notifications and comments and never sends
    the response: the call ends at its deadline, and that connection is not kept."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await read_request(reader) is None:
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        note = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\n: hi\n\n'
        try:
            while True:
                writer.write(b"%x\r\n%s\r\n" % (len(note), note))
                await writer.drain()
                await asyncio.sleep(0.001)
        except ConnectionError:
            return

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(fast.call("t", {}), 1)
            assert not fast.wire.origin.idle

    run(scenario())


def test_a_deadline_that_lands_as_a_read_completes_still_ends_the_call():
    """An upstream that floods its answer's event stream without pause, under many short deadlines: a deadline
    often fires in the loop step where a read completes, and every call still ends with it (on 3.11,
    ``asyncio.wait_for`` around the read swallowed that cancellation and the call read on forever)."""
    flooding = True

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await read_request(reader) is None:
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        note = b": hi\n\n"
        with contextlib.suppress(ConnectionError):
            while flooding:
                writer.write(b"%x\r\n%s\r\n" % (len(note), note))
                await writer.drain()
                await asyncio.sleep(0)
        writer.close()

    async def scenario() -> None:
        nonlocal flooding
        async with serving(handler) as url, fast_call(url) as fast:
            for attempt in range(60):
                async def bounded(deadline: float = 0.005 + attempt * 0.001) -> None:
                    async with asyncio.timeout(deadline):  # as invoke bounds a call
                        await fast.call("t", {})

                call = asyncio.create_task(bounded())
                await asyncio.wait({call}, timeout=20)  # ends it long before; this only tells a hang from a pass
                if not call.done():
                    flooding = False  # the upstream stops: the call ends, with the error of a cut stream
                    await asyncio.wait({call})
                    pytest.fail(f"call {attempt} read on past its deadline")
                with pytest.raises(TimeoutError):
                    call.result()

    run(scenario())


def test_an_http_1_0_answer_ended_by_closing_is_read_and_its_connection_not_kept():
    """An HTTP/1.0 answer without a length, ended by closing the connection: read whole, and the next call gets
    its own answer on a new connection."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        if request is not None:
            body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"answer": "old"}}).encode()
            writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n" + body)
            await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            assert (await fast.call("t", {}))["answer"] == "old"
            assert (await fast.call("t", {}))["answer"] == "old"

    run(scenario())


def test_a_redirect_to_another_host_is_not_followed_and_its_secret_header_not_sent_there():
    """An upstream answering a call with a redirect to another server: the fast path sends nothing there (the
    call is handed to the SDK, whose origin rules apply), so the configured secret header never leaves."""

    async def scenario() -> None:
        elsewhere: list[bytes] = []

        async def other(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            elsewhere.append(await reader.read(65536))
            writer.close()

        async with serving(other) as other_url:

            async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                while await read_request(reader) is not None:
                    writer.write(b"HTTP/1.1 307 Temporary Redirect\r\nlocation: %s\r\ncontent-length: 0\r\n\r\n"
                                 % other_url.encode())
                    await writer.drain()
                writer.close()

            async with serving(handler) as url, \
                    httpx2.AsyncClient(headers={"authorization": "Bearer s3cret"}, timeout=10) as http:
                fast = FastCall(http, url, Session())
                with pytest.raises(Handover):
                    await fast.call("t", {})
                fast.close()
                await asyncio.sleep(0.2)  # anything sent elsewhere has arrived
        assert elsewhere == []

    run(scenario())


def test_a_call_that_ends_after_its_session_closed_does_not_keep_its_connection():
    """A call still in flight when its session is closed (the upstream dropped it, a reconnect): when its answer
    arrives the connection is closed, not kept in a pool nobody will use or close again (an open socket)."""

    async def scenario() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while (request := await read_request(reader)) is not None:
                await asyncio.sleep(0.3)
                writer.write(json_answer(request["id"], {"answer": "real"}))
                await writer.drain()
            writer.close()

        async with serving(handler) as url, fast_call(url) as fast:
            call = asyncio.ensure_future(fast.call("t", {}))
            await asyncio.sleep(0.1)  # the request is on its way
            fast.close()
            assert (await call)["answer"] == "real"
            assert not fast.wire.origin.idle

    run(scenario())


def test_a_header_value_that_is_not_utf_8_does_not_spoil_the_answer():
    """An answer with a header byte outside UTF-8 (obs-text, allowed by HTTP and read as Latin-1 by httpx on the
    SDK's path) is read as the answer it is, not an unexpected exception."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_request(reader)) is not None:
            answer = json_answer(request["id"], {"answer": "real"})
            writer.write(answer.replace(b"\r\n\r\n", b"\r\nx-odd: \xff\xfe\r\n\r\n", 1))
            await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            assert (await fast.call("t", {}))["answer"] == "real"

    run(scenario())


@pytest.mark.parametrize("answer_id", [None, "other", 1])
def test_a_json_answer_to_another_request_is_an_mcp_error(answer_id):
    """A JSON answer whose id is missing or is not the request's: an MCPError, never taken as the result."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await read_request(reader) is not None:
            writer.write(json_answer(answer_id, {"answer": "forged"}))
            await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            with pytest.raises(MCPError):
                await fast.call("t", {})

    run(scenario())


@pytest.mark.parametrize("status", [200, 500])
def test_a_json_answer_past_the_bound_is_an_mcp_error_read_no_further(status):
    """A JSON answer (or an error answer) that goes on past what a tool's result could use: an MCPError once the
    bound is passed, and the gateway stops reading there (it buffered all of it, as long as the upstream sent)."""
    from gateway.upstream.mcp.fastcall import MAX_ERROR_BYTES, MAX_JSON_BYTES

    bound = MAX_JSON_BYTES if status == 200 else MAX_ERROR_BYTES

    async def scenario() -> None:
        sent = 0
        stopped = asyncio.Event()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal sent
            if await read_request(reader) is None:
                return
            writer.write(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                         % status + b"1\r\n[\r\n")
            try:
                while sent < 4 * MAX_JSON_BYTES:
                    writer.write(b"10000\r\n" + b" " * 65536 + b"\r\n")
                    sent += 65536
                    await writer.drain()
            except ConnectionError:
                pass
            stopped.set()

        async with serving(handler) as url, fast_call(url) as fast:
            with pytest.raises(MCPError) as raised:
                await fast.call("t", {})
            if status == 200:
                assert f"larger than {bound} bytes" in raised.value.error.message
            await asyncio.wait_for(stopped.wait(), 20)
        assert sent < 4 * MAX_JSON_BYTES

    run(scenario())


@pytest.mark.parametrize("content_type", [b"application/json", b"text/event-stream"])
def test_a_compressed_answer_is_refused_unread_not_inflated_on_the_event_loop(content_type):
    """An answer compressed although the call asked for none (gzip on gzip: a few KB inflating to a GiB of event
    stream comments, inflated piece by piece without giving the loop a turn): an MCPError before any of it is
    inflated, and the call asked for no content-coding."""
    import gzip

    comments = b": x\n" * (1 << 20)  # 4 MiB of comments; gzip twice
    bomb = gzip.compress(gzip.compress(comments))
    asked: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        asked.extend(line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                     if line.lower().startswith(b"accept-encoding:"))
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-encoding: gzip, gzip\r\n"
                     b"content-length: %d\r\n\r\n%s" % (content_type, len(bomb), bomb))
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with serving(handler) as url, fast_call(url) as fast:
            with pytest.raises(MCPError) as raised:
                await fast.call("t", {})
            assert "compressed" in raised.value.error.message

    run(scenario())
    assert asked == ["identity"]
