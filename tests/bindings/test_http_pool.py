"""The HTTP client's own pool for plain http (``gateway.upstream.h1`` under ``PlainTransport``), against real
sockets: what httpx's pool guaranteed holds here too — a request waiting for a connection gets the one given back,
connections kept idle for one host never starve another, a large answer head arriving in pieces is read, a
response dropped unread gives its slot back, and a host is resolved by the name httpx would resolve."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable

import httpx
import pytest

from gateway.upstream import h1
from gateway.upstream.http import new_client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _answering(delay_s: float = 0.0, head: bytes = b"") -> Handler:
    """Answers every request on a connection with ``ok`` (after ``delay_s``), ``head`` among its headers."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                await asyncio.sleep(delay_s)
                answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n" + head + b"\r\nok"
                for start in range(0, len(answer), 1000):  # in pieces, as a slow network delivers them
                    writer.write(answer[start:start + 1000])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
    return handle


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

    async def refuse(host: str, port: int, **options: object) -> None:
        asked.append(host)
        raise ConnectionRefusedError(111, "refused")

    monkeypatch.setattr(h1.asyncio, "open_connection", refuse)
    async with new_client() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://straße.example/")
    assert asked == ["xn--strae-oqa.example"]
