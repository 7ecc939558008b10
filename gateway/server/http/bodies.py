"""Request bodies, as every HTTP surface reads them: bounded in size, then parsed as JSON into a 400 when bad;
and, for the fast paths that read a request from its ASGI scope, its headers (``first_headers``).

What ``parse_json`` refuses, beyond what is not JSON at all:

- bytes that are not UTF-8 (including surrogates encoded as UTF-8, which Python's ``json`` would let through);
- an object with the same key twice (``{"s": 1, "s": 2}``): JSON leaves the meaning open and Python keeps the
  last, so a caller and a tool could read two different requests; the 400 names the key;
- a lone surrogate escape (``"\\ud800"``), which decodes to a string no response could ever encode back; the
  400 says where it is;
- nesting deeper than the C parser's recursion allows.

A client that goes away before sending the whole body is not an error of anyone's: one debug line, and a 400
that nobody will read.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from starlette.requests import Request
from starlette.types import Receive, Scope

from ...content.surrogates import find_lone
from ...errors import BadRequest, PayloadTooLarge
from ...schema.argerrors import json_path

log = logging.getLogger("gateway.server")
# A surrogate escape is \uD800–\uDFFF: only a body that holds one can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``limit`` — never read past it."""
    return await receive_body(request.scope, request.receive, request.headers.get("content-length", ""), limit)


async def receive_body(scope: Scope, receive: Receive, declared: str, limit: int) -> bytes:
    """``read_body`` for a caller that holds no ``Request`` (the fast paths: ``rest.fast``, ``McpSurface._take``): ``declared`` is the request's
    first ``Content-Length`` value, or "".

    Read from the ASGI messages directly: ``Request.stream`` is an async generator, whose set-up costs more than
    reading the one message a small body comes in."""
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"Request body of {declared} bytes is over the limit of {limit} bytes.")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            log.debug("client disconnected after %d of %s body bytes of %s %s", size, declared or "?",
                      scope["method"], scope["path"])
            raise BadRequest("The client disconnected before sending the whole request body.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"Request body is over the limit of {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # the common case costs one comparison
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _no_constant(name: str) -> Any:
    # Python's json reads NaN, Infinity and -Infinity, which are not JSON: nothing downstream could send them on.
    raise ValueError(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constant)


def parse_json(body: bytes) -> Any:
    """The JSON value a body holds; ``BadRequest`` saying why (and where) when it holds none we accept."""
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Request body is not UTF-8 text (byte {exc.start}: {exc.reason}).") from None
    try:
        value = _DECODER.decode(text)
    except _DuplicateKey as exc:
        raise BadRequest(f"Request body is not JSON this server accepts: an object has the duplicate key "
                         f"{exc.key!r}; send each key once.") from None
    except RecursionError:  # the C parser recurses once per nesting level: [[[[… deep enough is not a bug of ours
        raise BadRequest("Request body is not JSON this server accepts: it is nested too deeply.") from None
    except ValueError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}.") from None
    if _SURROGATE_ESCAPE.search(text):
        where = find_lone(value)
        if where is not None:
            raise BadRequest(f"Request body is not JSON this server accepts: the string at {json_path(where)} holds a "
                             "lone surrogate escape (\\ud800-\\udfff without its pair), which is not text.")
    return value


def first_headers(scope: Scope) -> dict[str, str]:
    """A request's headers by (lowercase) name, the first of each name: what Starlette's ``Headers.get`` gives,
    which the routes and the SDK read (one dict instead of a scan of every header per lookup)."""
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = name.decode("latin-1")
        if key not in headers:
            headers[key] = value.decode("latin-1")
    return headers
