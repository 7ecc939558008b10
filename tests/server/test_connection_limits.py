"""Connection limits of the served gateway, over raw sockets, on both HTTP parsers (httptools, h11): a request
head must arrive within header_timeout_s, idle keep-alive connections close, an oversized head is refused, and a
call that outlasts the head deadline is still answered."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from support import EXAMPLES, free_socket

from gateway.server import create_app
from gateway.server.http.connections import server_config
from gateway.settings import Settings

HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@contextmanager
def limited_server(definitions: Path = EXAMPLES, **limits: object) -> Iterator[tuple[str, int]]:
    """The gateway under uvicorn with serve()'s configuration and the given limits; (host, port)."""
    settings = Settings(definitions=definitions, reload=False, **limits)
    sock = free_socket()
    server = uvicorn.Server(server_config(create_app(settings), settings, "127.0.0.1", log_level="warning",
                                          lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        thread.join(0.01)
    try:
        yield sock.getsockname()
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@pytest.fixture(scope="module", params=["httptools", "h11"])
def address(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    definitions = tmp_path_factory.mktemp("definitions")
    shutil.copytree(EXAMPLES, definitions, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    (definitions / "python" / "slow_tools.py").write_text(
        "import time\n\ndef wait(seconds: float) -> float:\n    time.sleep(seconds)\n    return seconds\n")
    (definitions / "slow.yaml").write_text(
        "tools:\n  - id: wait\n    name: Wait\n    user_description: Waits.\n    ai_description: Waits.\n"
        "    binding: {python: slow_tools:wait}\n")
    with limited_server(definitions, header_timeout_s=0.5, keepalive_timeout_s=0.5, max_header_bytes=4096,
                        http_parser=request.param) as served:
        yield served


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (the socket's timeout bounds the wait)."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


def test_a_connection_that_sends_nothing_is_closed(address):
    """A client that connects and sends no byte is disconnected, without an answer."""
    with socket.create_connection(address, timeout=10) as sock:
        assert _read_until_closed(sock) == b""


def test_the_chosen_parser_serves(address):
    """Both parsers answer a whole request (the fixture runs every test on each)."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(HEAD + b"Connection: close\r\n\r\n")
        assert _read_until_closed(sock).startswith(b"HTTP/1.1 200 ")


def test_a_call_that_outlasts_the_head_deadline_is_answered(address):
    """The deadline is on the head, not on the answer: a call taking three deadlines is answered on its
    keep-alive connection, and a second request on it is answered too."""
    body = b'{"seconds": 1.5}'
    request = (b"POST /tools/wait/call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    with socket.create_connection(address, timeout=10) as sock:
        stream = sock.makefile("rb")
        for _ in range(2):
            sock.sendall(request)
            assert stream.readline().startswith(b"HTTP/1.1 200 ")
            length = 0
            while (line := stream.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert b'"result":1.5' in stream.read(length).replace(b" ", b"")


def test_a_head_that_never_ends_is_closed_with_408(address):
    """A client that sends part of a head and stops is answered 408 and disconnected."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(HEAD)
        assert _read_until_closed(sock).startswith(b"HTTP/1.1 408 ")


def test_trickling_header_lines_does_not_keep_a_connection_open(address):
    """A slowloris client, sending one header line after another and never the blank line, is disconnected
    while it is still sending."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(HEAD)
        for line in range(200):
            try:
                sock.sendall(f"X-Line-{line}: a\r\n".encode())
            except OSError:  # reset or broken pipe: the server closed the connection
                break
            time.sleep(0.05)
        else:
            pytest.fail("200 header lines were accepted without the connection being closed")


def test_a_complete_request_is_answered_and_an_idle_keep_alive_connection_closed(address):
    """A whole head is answered; the connection, then idle, is closed by the keep-alive timeout."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(HEAD + b"\r\n")
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b'{"status":"ok"}')


def test_a_second_head_on_a_keep_alive_connection_has_its_own_deadline(address):
    """After a first answer, a second head begun on the same connection and never ended gets the 408 too."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(HEAD + b"\r\n")
        stream = sock.makefile("rb")
        assert stream.readline().startswith(b"HTTP/1.1 200 ")
        while stream.readline() != b"\r\n":
            pass
        assert stream.read(len(b'{"status":"ok"}')) == b'{"status":"ok"}'
        sock.sendall(HEAD)
        assert stream.read().startswith(b"HTTP/1.1 408 ")


@pytest.mark.parametrize("pieces", [1, 3], ids=["one read", "trickled"])
def test_a_head_over_max_header_bytes_is_refused(address, pieces):
    """A head larger than max_header_bytes is answered 431 and the connection closed, whether it arrives in
    one read or in pieces."""
    head = HEAD + b"X-Big: " + b"a" * 8192 + b"\r\n\r\n"
    with socket.create_connection(address, timeout=10) as sock:
        step = len(head) // pieces + 1
        try:
            for start in range(0, len(head), step):
                sock.sendall(head[start:start + step])
                time.sleep(0.05)
        except OSError:  # the server may close before the last piece
            pass
        assert _read_until_closed(sock).startswith(b"HTTP/1.1 431 ")


def test_a_head_split_anywhere_under_the_limit_is_answered(address):
    """A head within the limit is answered however its bytes are split, the blank line included."""
    head = HEAD + b"X-Pad: " + b"p" * 3000 + b"\r\n\r\n"
    for split in (len(head) - 1, len(head) - 2, len(head) - 3, 10):
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(head[:split])
            time.sleep(0.05)
            sock.sendall(head[split:])
            assert _read_until_closed(sock).startswith(b"HTTP/1.1 200 "), split


def test_serve_applies_the_header_timeout_from_its_settings(examples_dir):
    """`tool-gateway serve` (a real process, header_timeout_s from the environment) closes a connection whose
    head never ends, and still answers whole requests."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "TOOL_GATEWAY_HEADER_TIMEOUT_S": "0.5"}
    process = subprocess.Popen([sys.executable, "-m", "gateway", "serve", str(examples_dir), "--port", str(port),
                                "--no-reload"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None and time.monotonic() < deadline, "serve did not start"
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
                break
            except httpx.TransportError:
                time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(HEAD)
            assert _read_until_closed(sock).startswith(b"HTTP/1.1 408 ")
    finally:
        process.terminate()
        process.wait(15)


def test_auto_takes_httptools_and_uvloop_where_installed_and_falls_back_where_not(monkeypatch):
    """`auto` is the C parser and loop when they import, h11 and asyncio when they do not; naming one that is
    not installed is a settings error that says what to do."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from gateway.server.http import connections
    from gateway.settings import SettingsInvalid

    assert connections.parser_and_loop(Settings()) == ("httptools", "uvloop")
    assert connections.parser_and_loop(Settings(http_parser="h11", event_loop="asyncio")) == ("h11", "asyncio")
    # What serve() runs: the chosen parser's protocol, with the limits, on the chosen loop.
    chosen = connections.server_config(None, Settings(), "127.0.0.1")
    assert issubclass(chosen.http, HttpToolsProtocol) and issubclass(chosen.http, connections.HeadLimits)
    assert chosen.loop == "uvloop"
    plain = connections.server_config(None, Settings(http_parser="h11", event_loop="asyncio"), "127.0.0.1")
    assert issubclass(plain.http, connections.H11HeadLimits) and plain.loop == "asyncio"
    monkeypatch.setattr(connections, "_installed", lambda module: False)
    assert connections.parser_and_loop(Settings()) == ("h11", "asyncio")
    with pytest.raises(SettingsInvalid, match=r"'event_loop': uvloop is not installed here .* or use asyncio"):
        connections.parser_and_loop(Settings(event_loop="uvloop"))


def test_an_unknown_parser_is_refused_by_the_settings():
    from gateway.settings import SettingsInvalid, load_settings

    with pytest.raises(SettingsInvalid, match=r"setting 'http_parser': invalid value 'llhttp' \(use one of: auto, "
                                              r"httptools, h11\)"):
        load_settings(None, {"TOOL_GATEWAY_HTTP_PARSER": "llhttp"})
