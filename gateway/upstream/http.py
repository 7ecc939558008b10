"""Talking to upstream HTTP services: the client, capped reads, httpx's exceptions in words an LLM can use.

httpx's exceptions are translated once, here (``describe``), and ``tests/bindings/test_http_errors.py`` walks
httpx's module to prove that every exception class it defines has its own message — a new httpx release with
a new class fails that test instead of surfacing as "internal error".

    httpx.HTTPError
    ├── RequestError ── TransportError ── TimeoutException (Connect/Read/Write/PoolTimeout)
    │                 │                 ├── NetworkError (Connect/Read/Write/CloseError)
    │                 │                 ├── ProtocolError (Local/RemoteProtocolError)
    │                 │                 └── ProxyError, UnsupportedProtocol
    │                 ├── DecodingError
    │                 └── TooManyRedirects
    └── HTTPStatusError
    InvalidURL, CookieConflict, StreamError (StreamConsumed, StreamClosed, ResponseNotRead, RequestNotRead)
"""

from __future__ import annotations

import email.utils
import random
import socket
import time
from http.cookiejar import CookieJar, CookiePolicy
from typing import Any

import httpx

from . import h1

UPSTREAM_EXCEPTIONS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx.InvalidURL, httpx.CookieConflict,
                                                    httpx.StreamError)
_RETRY_HINT = "; retrying later may help"
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's own defaults

# Every exception class httpx defines -> what it means for the call, for the LLM and whoever reads traces.
MESSAGES: dict[type[Exception], str] = {
    httpx.HTTPError: "the HTTP request failed ({detail})",
    httpx.RequestError: "the HTTP request failed ({detail})",
    httpx.TransportError: "the connection to {host} failed ({detail})",
    httpx.TimeoutException: "{host} did not answer in time" + _RETRY_HINT,
    httpx.ConnectTimeout: "connecting to {host} timed out: the service may be down" + _RETRY_HINT,
    httpx.ReadTimeout: "{host} took the request but did not answer within {timeout}" + _RETRY_HINT,
    httpx.WriteTimeout: "sending the request to {host} timed out" + _RETRY_HINT,
    httpx.PoolTimeout: "no connection to {host} became free in time: too many calls in flight" + _RETRY_HINT,
    httpx.NetworkError: "network error talking to {host} ({detail})" + _RETRY_HINT,
    httpx.ConnectError: "could not connect to {host} ({detail})" + _RETRY_HINT,
    httpx.ReadError: "the connection to {host} broke while reading the answer ({detail})" + _RETRY_HINT,
    httpx.WriteError: "the connection to {host} broke while sending the request ({detail})" + _RETRY_HINT,
    httpx.CloseError: "closing the connection to {host} failed ({detail})",
    httpx.ProtocolError: "HTTP protocol error with {host} ({detail})",
    httpx.LocalProtocolError: "the request could not be sent as valid HTTP ({detail})",
    httpx.RemoteProtocolError: "{host} answered with invalid HTTP or closed the connection early ({detail})",
    httpx.ProxyError: "the HTTP proxy could not reach {host} ({detail})",
    httpx.UnsupportedProtocol: "the URL's scheme is not supported ({detail})",
    httpx.DecodingError: "the answer from {host} could not be decoded, e.g. broken compression ({detail})",
    httpx.TooManyRedirects: "{host} redirected too many times",
    httpx.HTTPStatusError: "{host} answered with an error status ({detail})",
    httpx.InvalidURL: "the request URL is invalid ({detail})",
    httpx.CookieConflict: "conflicting cookies ({detail})",
    httpx.StreamError: "the answer's stream was misused by the gateway ({detail})",
    httpx.StreamConsumed: "the request body was already sent and cannot be sent again",
    httpx.StreamClosed: "the answer's stream was closed before it was read",
    httpx.ResponseNotRead: "the answer was used before it was read",
    httpx.RequestNotRead: "the request body was used before it was read",
}
# Worth another attempt: the request may not have reached the service, or the service may recover.
TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
# Answers worth another attempt: a timeout, rate limiting, a transient conflict (OpenAI's 409 is a lock
# timeout), or a failure of the service (Anthropic's 529 is "overloaded"). Other 4xx answers are final.
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class _NoCookies(CookiePolicy):
    """Accepts and returns no cookie: a client shared by every user must not carry one user's session."""

    netscape = True
    rfc2965 = False
    hide_cookie2 = False

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def domain_return_ok(self, domain: str, request: Any) -> bool:
        return False

    def path_return_ok(self, path: str, request: Any) -> bool:
        return False


class _CookiesIgnored(httpx.Cookies):
    """A client's cookies that never look at an answer's ``Set-Cookie`` (the jar's policy would refuse each one
    anyway): httpx builds two urllib stand-ins per answer to ask the jar, a tenth of an HTTP-bound tool's CPU."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class _Client(httpx.AsyncClient):
    @property  # type: ignore[override]
    def cookies(self) -> httpx.Cookies:
        return self._ignored

    def __init__(self, **options: Any):
        super().__init__(**options)
        self._ignored = _CookiesIgnored(CookieJar(policy=_NoCookies()))


def new_client(limits: httpx.Limits = DEFAULT_LIMITS, tls: httpx.AsyncBaseTransport | None = None,
               **options: Any) -> httpx.AsyncClient:
    """An ``AsyncClient`` for upstream calls: it follows no redirect by itself, keeps no cookie, and sends plain
    http on ``PlainTransport`` (a proxy the environment names for a host still takes that host's requests), the
    rest on ``tls`` (by default httpx's transport with ``limits``)."""
    transport = PlainTransport(tls or httpx.AsyncHTTPTransport(limits=limits), limits)
    return _Client(follow_redirects=False, transport=transport, **options)


class PlainTransport(httpx.AsyncBaseTransport):
    """Plain ``http://`` on ``h1``'s pool (a fraction of httpcore's CPU a request); https, and anything else, on
    ``tls`` (httpx's own transport). ``limits`` bound each: connections in use at once, and kept idle."""

    def __init__(self, tls: httpx.AsyncBaseTransport, limits: httpx.Limits):
        self.tls = tls
        max_idle = limits.max_keepalive_connections
        self.pool = h1.Pool(limits.max_connections or 1_000_000, 20 if max_idle is None else max_idle)
        self.origins: dict[tuple[str, int], h1.Origin] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            return await self.tls.handle_async_request(request)
        # The host as httpx resolves it (IDNA 2008): the resolver's own encoding of a non-ASCII name (IDNA 2003)
        # may name another host than the one the allowed hosts were checked against.
        key = (url.raw_host.decode("ascii"), url.port or 80)
        origin = self.origins.get(key)
        if origin is None:
            # One per host:port a tool (or a redirect it may follow) names: the definitions bound how many.
            origin = self.origins[key] = h1.Origin(httpx, *key, self.pool)
        timeouts = h1.Timeouts(**request.extensions.get("timeout", {}))
        try:
            body = request.content  # read when the request was built from bytes (json, form, content)
        except httpx.RequestNotRead:
            body = b"".join([chunk async for chunk in request.stream])  # type: ignore[union-attr]
        head, connection = await origin.send(request.method.encode(), url.raw_path, request.headers.raw, body,
                                             timeouts)
        return httpx.Response(head.status_code, headers=list(head.headers),
                              stream=origin.body(connection, timeouts.read),
                              extensions={"http_version": b"HTTP/" + head.http_version, "reason_phrase": head.reason})

    async def aclose(self) -> None:
        for origin in self.origins.values():
            origin.close()
        self.origins.clear()
        await self.tls.aclose()


def describe(exc: Exception, url: httpx.URL, timeout_s: float | None = None) -> str:
    """What ``exc`` (an httpx exception) means for a call to ``url``, without the URL's query string."""
    host = f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"
    if isinstance(exc, httpx.ConnectError):
        cause = _root_cause(exc)
        if isinstance(cause, socket.gaierror):
            return f"the host name '{url.host}' could not be resolved (DNS lookup failed: {cause.strerror})"
        if isinstance(cause, ConnectionRefusedError):
            return f"{host} refused the connection: the service is not listening there" + _RETRY_HINT
    message = next(MESSAGES[cls] for cls in type(exc).__mro__ if cls in MESSAGES)
    timeout = f"{timeout_s:g} s" if timeout_s is not None else "the time allowed"
    return message.format(host=host, detail=str(exc) or type(exc).__name__, timeout=timeout)


def _root_cause(exc: BaseException) -> BaseException | None:
    """The first gaierror or ConnectionRefusedError down the chain (httpx → httpcore → OSError), else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (socket.gaierror, ConnectionRefusedError)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - time.time(), 0.0)


def backoff(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1, 2, ...) when the service did not say: 0.5 s, 1 s,
    2 s, ... up to 8 s, each ±25 % so that many callers retrying at once spread out."""
    return min(0.5 * 2 ** (attempt - 1), 8.0) * (0.75 + random.random() / 2)


class TooLarge(Exception):
    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(f"larger than {limit} bytes")


async def read_capped(response: httpx.Response, limit: int, *, strict: bool = True) -> bytes:
    """The (decoded) body, reading no more than ``limit`` bytes: past it, ``TooLarge`` or, if not ``strict``,
    the first ``limit`` bytes."""
    declared = response.headers.get("content-length", "")
    if strict and declared.isdigit() and int(declared) > limit and "content-encoding" not in response.headers:
        raise TooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            if strict:
                raise TooLarge(limit)
            break
    return b"".join(chunks)[:limit]
