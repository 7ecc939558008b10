"""A TCP proxy on a free port of 127.0.0.1 in front of an upstream, that can be told to reset the next connection
whose first request is an MCP handshake (``initialize`` or ``server/discover``): what a server that has just
started does to the first connection it is not ready for."""

from __future__ import annotations

import socket
import struct
import threading

from support import accepting

HANDSHAKES = (b'"initialize"', b'"server/discover"')


class ResettingProxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.armed = 0  # handshakes still to reset
        self.reset = 0  # handshakes reset so far
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        accepting(self.listener, self._connect)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def close(self) -> None:
        self.listener.close()

    def _connect(self, client: socket.socket) -> None:
        with client:
            first = _request(client)
            if self.armed and any(handshake in first for handshake in HANDSHAKES):
                self.armed -= 1
                self.reset += 1
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                return
            with upstream:
                upstream.settimeout(None)
                upstream.sendall(first)
                threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
                _pipe(client, upstream)


def _request(client: socket.socket) -> bytes:
    """The connection's first request, whole (its head, and its body by its Content-Length)."""
    received = b""
    while b"\r\n\r\n" not in received:
        if not (data := client.recv(65536)):
            return received
        received += data
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.startswith(b"content-length:")),
                  0)
    while len(received) < len(head) + 4 + length and (data := client.recv(65536)):
        received += data
    return received


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass
