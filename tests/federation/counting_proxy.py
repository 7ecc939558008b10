"""A TCP proxy in front of one HTTP upstream that writes down every HTTP request the gateway sends through it:
``(HTTP method, JSON-RPC method)``, the latter ``None`` for a GET or DELETE. Bytes go through as they come, both
ways (an SSE stream stays a stream); an upstream that is down or dies closes the gateway's connection, exactly as
it would without the proxy, which is why this proxies TCP rather than HTTP."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable

from support import accepting, free_socket

HEAD_LIMIT = 64 * 1024


def jsonrpc_method(body: bytes) -> str:
    try:
        message = json.loads(body)
    except ValueError:
        return "(not json)"
    return message.get("method", "(answer)") if isinstance(message, dict) else "(batch)"


class Requests:
    """Reads the requests out of one connection's client→upstream bytes (HTTP/1.1 with Content-Length bodies, as
    the gateway's clients send them); ``last`` is the latest."""

    def __init__(self, seen: list[tuple[str, str | None]]):
        self.seen = seen
        self.buffer = b""
        self.last: tuple[str, str | None] | None = None

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0 or len(self.buffer) > HEAD_LIMIT:
            if end < 0:
                raise ValueError("request head over 64 KiB")
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            fields = dict(line.lower().split(":", 1) for line in head[1:] if ":" in line)
            length = int(fields.get("content-length", "0").strip() or 0)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            verb = head[0].split(" ", 1)[0]
            self.last = (verb, jsonrpc_method(body) if verb == "POST" else None)
            self.seen.append(self.last)

    @property
    def streaming(self) -> bool:
        """Whether the connection carries a change stream (the 2025-11-25 GET stream, a 2026-07-28 listen)."""
        return self.last is not None and (self.last[0] == "GET" or self.last[1] == "subscriptions/listen")


class CountingProxy:
    """Listening on a free port of 127.0.0.1 (``url``) until ``close``; ``seen`` lists the requests in order.

    While ``holding``, a change stream the upstream ends stays open towards the gateway (until ``close``): an
    upstream restarted meanwhile is then found out by the next request on its old session alone (the case the
    restart test means to try), not by the stream's end, which would race with that request."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.seen: list[tuple[str, str | None]] = []
        self.holding = False
        self.held: list[socket.socket] = []
        self.listener = free_socket()
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        accepting(self.listener, self._connect)

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.listener.close()
        self.release()

    def release(self) -> None:
        self.holding = False
        while self.held:
            held = self.held.pop()
            try:
                held.shutdown(socket.SHUT_RDWR)  # wakes the thread reading it, which close alone would not
            except OSError:
                pass
            held.close()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
        except OSError:
            self.seen.append(("(refused)", None))  # the upstream is down: what the gateway tried is counted too
            client.close()  # and it sees what it would see without the proxy
            return
        upstream.settimeout(None)
        requests = Requests(self.seen)
        threading.Thread(target=self._pipe, args=(upstream, client, None, lambda: self.holding and requests.streaming),
                         daemon=True).start()
        self._pipe(client, upstream, requests.feed)

    def _pipe(self, source: socket.socket, target: socket.socket, feed: Callable[[bytes], None] | None,
              hold: Callable[[], bool] = lambda: False) -> None:
        """Copy ``source`` to ``target`` (``feed`` reading what the gateway sends); when ``source`` ends, end
        ``target`` too, unless ``hold()`` says to keep it open until ``release``."""
        try:
            while data := source.recv(65536):
                if feed is not None:
                    feed(data)
                target.sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            ends = [source]
            if hold():
                self.held.append(target)
            else:
                ends.append(target)
            for end in ends:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()
