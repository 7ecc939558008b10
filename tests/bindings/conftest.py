"""Real upstreams for the HTTP binding: a Starlette app under uvicorn on 127.0.0.1, a TCP server that speaks
garbage, a closed port; and building a catalog of HTTP-bound tools from their ``binding.http`` mappings."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from support import ServerThread, free_socket, start_server

from gateway.bindings import BuildEnv
from gateway.catalog.build import build_catalog
from gateway.catalog.snapshot import Catalog
from gateway.definitions.load import load_definitions
from gateway.server import demo_api
from gateway.settings import Settings


async def echo(request: Request) -> JSONResponse:
    """Everything the request carried, as the upstream saw it."""
    body = await request.body()
    try:
        parsed = (await request.json()) if body and "json" in request.headers.get("content-type", "") else None
    except ValueError:
        parsed = None
    return JSONResponse({
        "method": request.method,
        "raw_path": request.scope["raw_path"].decode("latin-1"),
        "path": request.url.path,
        "host": request.headers.get("host"),
        "query": [list(item) for item in request.query_params.multi_items()],
        "headers": {k: v for k, v in request.headers.items()},
        "body": body.decode("utf-8", "replace"),
        "json": parsed,
    })


async def status(request: Request) -> Response:
    code = int(request.path_params["code"])
    return JSONResponse({"error": f"status {code} as asked", "detail": "x" * 600}, status_code=code)


async def slow(request: Request) -> JSONResponse:
    await asyncio.sleep(float(request.query_params.get("s", "2")))
    return JSONResponse({"slow": True})


async def html(request: Request) -> Response:
    return Response("<html><body>Maintenance</body></html>", media_type="text/html")


async def broken_json(request: Request) -> Response:
    return Response('{"unterminated": ', media_type="application/json")


async def big(request: Request) -> Response:
    size = int(request.query_params["n"])

    async def chunks() -> Any:
        sent = 0
        while sent < size:
            piece = min(65536, size - sent)
            sent += piece
            yield b"a" * piece

    headers = {} if request.query_params.get("chunked") else {"content-length": str(size)}
    return StreamingResponse(chunks(), media_type="text/plain", headers=headers)


async def gzip_ok(request: Request) -> Response:
    return Response(gzip.compress(b'{"zipped": true}'), media_type="application/json",
                    headers={"content-encoding": "gzip"})


async def gzip_broken(request: Request) -> Response:
    return Response(b"this is not gzip at all", media_type="application/json", headers={"content-encoding": "gzip"})


async def redirect(request: Request) -> Response:
    return RedirectResponse(request.query_params["to"], status_code=int(request.query_params.get("code", "302")))


async def loop(request: Request) -> Response:
    return RedirectResponse("/loop", status_code=302)


async def binary(request: Request) -> Response:
    return Response(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", media_type="image/png")


async def empty(request: Request) -> Response:
    return Response(status_code=204)


async def cookie(request: Request) -> JSONResponse:
    response = JSONResponse({"received": request.headers.get("cookie")})
    response.set_cookie("session", "user-a-session")
    return response


def flaky_route(counter: Counter) -> Callable:
    async def flaky(request: Request) -> JSONResponse:
        key = request.path_params["key"]
        counter[key] += 1
        if counter[key] <= int(request.query_params.get("fail", "1")):
            return JSONResponse({"error": "try again"}, status_code=503, headers={"retry-after": "0"})
        return JSONResponse({"attempts": counter[key], "method": request.method})
    return flaky


def slow_once_route(counter: Counter) -> Callable:
    async def slow_once(request: Request) -> JSONResponse:
        key = request.path_params["key"]
        counter[key] += 1
        if counter[key] == 1:  # only the first request of each key is slow
            await asyncio.sleep(float(request.query_params.get("s", "3")))
        return JSONResponse({"attempts": counter[key]})
    return slow_once


@dataclass
class Upstream:
    """A running upstream: its base url (http://127.0.0.1:PORT) and what it counted."""

    url: str
    port: int
    attempts: Counter

    def at(self, path: str) -> str:
        return self.url + path


@pytest.fixture(scope="session")
def serve_app() -> Iterator[Callable[[Starlette], int]]:
    """Serve ASGI apps under uvicorn, each in a thread on a free port of 127.0.0.1; all stopped at the end."""
    running: list[ServerThread] = []

    def start(app: Starlette) -> int:
        running.append(start_server(app))
        return running[-1].port

    yield start
    for server in running:
        server.stop(force=True)  # in-flight slow answers are not waited for


@pytest.fixture(scope="session")
def upstream(serve_app) -> Upstream:
    """The test upstream: echo, statuses, slow, broken and redirecting endpoints, and the demo API under /demo."""
    attempts: Counter = Counter()
    app = Starlette(routes=[
        Route("/echo/{rest:path}", echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
        Route("/status/{code:int}", status),
        Route("/slow", slow),
        Route("/html", html),
        Route("/broken-json", broken_json),
        Route("/big", big),
        Route("/gzip", gzip_ok),
        Route("/gzip-broken", gzip_broken),
        Route("/redirect", redirect, methods=["GET", "POST"]),
        Route("/loop", loop),
        Route("/binary", binary),
        Route("/empty", empty, methods=["GET", "POST", "HEAD"]),
        Route("/cookie", cookie),
        Route("/flaky/{key}", flaky_route(attempts), methods=["GET", "POST"]),
        Route("/slow-once/{key}", slow_once_route(attempts)),
        Mount("/demo", routes=demo_api.routes()),
    ])
    port = serve_app(app)
    return Upstream(f"http://127.0.0.1:{port}", port, attempts)


@pytest.fixture(scope="session")
def garbage_port() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers every connection with bytes that are not HTTP."""
    sock = free_socket()
    sock.listen(16)
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    conn.recv(65536)
                    conn.sendall(b"SMTP ready, definitely not HTTP\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(5)
    sock.close()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def build_tools(tmp_path: Path) -> Callable[..., Catalog]:
    """Write tools to tools.yaml in a fresh directory and build the catalog (``client``: a shared client)."""

    def build(*tools: dict[str, Any], client: httpx.AsyncClient | None = None, **settings: Any) -> Catalog:
        root = tmp_path / "defs"
        root.mkdir(exist_ok=True)
        (root / "tools.yaml").write_text(yaml.safe_dump({"tools": list(tools)}, sort_keys=False), encoding="utf-8")
        effective = Settings(definitions=root, **settings)
        env = BuildEnv(settings=effective, root=root, http_client=(lambda: client) if client else None)
        return build_catalog(load_definitions(root), effective, env)

    return build


@pytest.fixture
async def shared_client() -> Any:
    """A client standing in for the running gateway's pooled one, counting the requests it sends."""
    from gateway.upstream.http import new_client

    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with new_client(event_hooks={"request": [record]}) as client:
        client.sent = sent  # type: ignore[attr-defined]
        yield client
