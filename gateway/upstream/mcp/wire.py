"""HTTP/1.1 POSTs to a plain-``http://`` upstream on ``gateway.upstream.h1``'s kept-alive connections, for
``gateway.upstream.mcp.fastcall``: an ``httpx2`` request costs about a millisecond of CPU on a small machine (its
models, the connection pool's locks and its check of every pooled connection, the headers and the body written in
two system calls); this is one write per request and a parser, and answers as an ``httpx2.Response`` so the caller
reads it as any other.

Only where httpx2 would do the same thing: plain http (TLS stays with httpx2), no proxy in the environment for the
host, no credentials in the URL; a call while the session's client holds cookies the upstream set (a load
balancer's affinity) goes through httpx2 too. The upstream's configured headers come from the session's
``httpx2.AsyncClient``, and so do its timeouts.
"""

from __future__ import annotations

import urllib.request
from urllib.parse import urlsplit

import httpx2

from .. import h1

MAX_IDLE = 32  # connections kept open for the next calls; a burst's extra ones are closed when done
# Connections in use at once to one upstream, as httpx2's pool allows the SDK's path (its default max_connections):
# a burst of calls to an upstream that answers slowly waits for one (bounded by each tool's deadline) instead of
# spending a file descriptor per call.
MAX_OPEN = 100
SKIPPED = frozenset({"accept-encoding", "host", "content-length", "transfer-encoding", "connection"})


def usable(url: str) -> bool:
    """Whether a POST to ``url`` is one httpx2 would make directly (plain http, no credentials in the URL, no proxy
    for its host)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.username is not None:  # httpx2 sends userinfo as Basic
        return False
    if not parts.hostname.isascii():  # an international name: httpx2 encodes it (IDNA 2008) for DNS and Host
        return False
    proxies = urllib.request.getproxies()
    return not (proxies.get("http") or proxies.get("all")) or bool(urllib.request.proxy_bypass(parts.hostname))


class Wire:
    """Kept-alive connections to one upstream (``usable(url)`` must hold)."""

    def __init__(self, http: httpx2.AsyncClient, url: str):
        parts = urlsplit(url)
        self.target = ((parts.path or "/") + (f"?{parts.query}" if parts.query else "")).encode()
        self.authority = parts.netloc.rpartition("@")[2]
        self.origin = h1.Origin(httpx2, parts.hostname or "", parts.port or 80, h1.Pool(MAX_OPEN, MAX_IDLE))
        # Waiting for a free connection is bounded by the tool's deadline, not by the client's pool timeout.
        self.timeouts = h1.Timeouts(connect=http.timeout.connect, read=http.timeout.read, write=http.timeout.write)
        self.request = httpx2.Request("POST", url)  # what the answers say they answer (httpx2 reads it)
        # The session's client headers (the upstream's configured ones): fixed for the client's life.
        self.headers = {k.lower(): v for k, v in http.headers.items() if k.lower() not in SKIPPED}

    async def post(self, body: bytes, headers: dict[str, str]) -> httpx2.Response:
        """The answer's status and headers; its body is read from the returned response (stream it, or
        ``aread``), and ``aclose`` gives the connection back (or drops it when the body was not read whole)."""
        merged = {**self.headers, **headers}
        head, connection = await self.origin.send(b"POST", self.target, [
            ("host", self.authority), *merged.items(), ("content-length", str(len(body)))], body, self.timeouts)
        # Bytes as received: httpx2 reads them as Latin-1 (a value may hold any byte HTTP allows), as for its own.
        return httpx2.Response(head.status_code, headers=list(head.headers),
                               stream=self.origin.body(connection, self.timeouts.read), request=self.request)

    def aclose(self) -> None:
        self.origin.close()
