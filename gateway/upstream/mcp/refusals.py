"""An upstream MCP server that answered a request with an HTTP error status (401/403 with its ``WWW-Authenticate``
challenge, 404, 5xx, any 4xx), in words that say which request, what it answered and what to do.

The SDK's client reports every such answer as "-32603: Server returned an error response" (or a JSON-RPC error the
body held): the status, the request and the challenge are lost. ``Heard`` watches a session's HTTP client for
them (``gateway.upstream.mcp.client.connected``), and ``gateway.upstream.mcp.fastcall`` raises ``HttpRefused`` for its own POSTs;
``validate``, ``/status``, the console and a call's error result then tell them. Nothing of ours is in the words:
the URL is shown without credentials or query, and the upstream's challenge (its own text) is bounded, made
printable, and has the connection's secret values taken out.
"""

from __future__ import annotations

import http
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2
from mcp.shared.exceptions import MCPError

from ..oauth.config import CONNECT_EXTENSION
from .config import CREDENTIALS_REFUSED

MAX_CHALLENGE_CHARS = 200  # of the upstream's own words (error_description): a line, not its page
MIN_SECRET_CHARS = 8  # a header's word this long is taken out of the challenge (an auth scheme's name is shorter)
# A WWW-Authenticate parameter: error="invalid_token" or error=invalid_token (RFC 6750 section 3).
_PARAMETER = re.compile(r'(error|error_description)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))', re.IGNORECASE)
# What the SDK's client says for an error status whose body held no JSON-RPC error: words that tell nothing.
STAND_INS = frozenset({"Server returned an error response", "Not Found", "Session terminated"})
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")
# Statuses a session's normal life answers without anything being wrong: a GET stream the upstream does not offer
# (405), a DELETE of a session it already forgot (404, 400).
_QUIET = {"GET": {405}, "DELETE": {400, 404, 405}}


@dataclass(frozen=True)
class Refusal:
    status: int
    request: str  # the JSON-RPC method (initialize, tools/list, tools/call, ...), or the HTTP method
    url: str  # without credentials or query
    challenge: str = ""  # the WWW-Authenticate error and its description, as the upstream worded them
    authorize: str = ""  # where an admin authorizes the gateway (OAuth: the path of GET /oauth/connect/<source>)

    @property
    def credentials(self) -> bool:
        """Whether the upstream refused the gateway's credentials (the source's headers)."""
        return self.status in CREDENTIALS_REFUSED

    def __str__(self) -> str:
        try:
            phrase = f" {http.HTTPStatus(self.status).phrase}"
        except ValueError:
            phrase = ""
        challenge = f" ({self.challenge})" if self.challenge else ""
        return f"its {self.request} to {self.url} was answered HTTP {self.status}{phrase}{challenge}: {self.advice}"

    @property
    def advice(self) -> str:
        if self.authorize:
            return f"an admin authorizes the gateway with its OAuth authorization server at {self.authorize}"
        if self.status == 401:
            return "check the source's headers/credentials (the token is missing, wrong or expired)"
        if self.status == 403:
            return "check the source's headers/credentials (they do not grant access to this server)"
        if self.status == 404:
            return "check the source's url (no MCP endpoint answers there)"
        if self.status >= 500:
            return "the upstream failed on its side (see its logs); the gateway keeps retrying"
        return "the upstream refused the request; check the source's url and headers"


class HttpRefused(MCPError):
    """A request the upstream answered with an HTTP error status: the JSON-RPC error its body held (or the SDK's
    stand-in for none), and the ``Refusal``."""

    def __init__(self, refusal: Refusal, code: int, message: str):
        super().__init__(code=code, message=message)
        self.refusal = refusal


def shown(url: str) -> str:
    """``url`` for people: no credentials, no query (it may carry a key)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"


def challenge(header: str, hidden: Iterable[str] = ()) -> str:
    """The ``error`` and ``error_description`` of a ``WWW-Authenticate`` value, printable, bounded, without any
    of the ``hidden`` values (the upstream may echo the token it refused)."""
    found: dict[str, str] = {}
    for name, quoted, bare in _PARAMETER.findall(header[:4096]):
        found.setdefault(name.lower(), quoted.replace('\\"', '"') if quoted else bare)
    words = ": ".join(v for v in (found.get("error"), found.get("error_description")) if v)
    # A header value and each word of it (the token after "Bearer"), longest first; short words ("Bearer") stay.
    parts = {part for value in hidden for part in (value, *value.split()) if len(part) >= MIN_SECRET_CHARS}
    for part in sorted(parts, key=len, reverse=True):
        words = words.replace(part, "[redacted]")
    words = _UNPRINTABLE.sub("?", words)
    return words if len(words) <= MAX_CHALLENGE_CHARS else words[:MAX_CHALLENGE_CHARS - 1] + "…"


def refusal(response: httpx2.Response, request: str, hidden: Iterable[str] = ()) -> Refusal:
    sent = response.request.headers.get("authorization")  # the bearer token an auth flow set, if it echoes it
    return Refusal(response.status_code, request, shown(str(response.request.url)),
                   challenge(response.headers.get("www-authenticate", ""), (*hidden, *filter(None, [sent]))),
                   response.request.extensions.get(CONNECT_EXTENSION, ""))


class Heard:
    """The last HTTP error status a session's client was answered (an event hook of its ``httpx2.AsyncClient``):
    what a failed ``initialize`` (or any request the SDK makes) really met."""

    def __init__(self, hidden: Iterable[str]):
        self.hidden = tuple(hidden)
        self.last: Refusal | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        method = response.request.method
        if response.status_code < 400 or response.status_code in _QUIET.get(method, ()):
            return
        self.last = refusal(response, _request_of(response.request) or method, self.hidden)


def _request_of(request: httpx2.Request) -> str | None:
    """The JSON-RPC method a POST carried (the SDK posts one message per request)."""
    try:
        message = json.loads(request.content) if request.method == "POST" else None
    except (ValueError, httpx2.RequestNotRead):
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method[:60] if isinstance(method, str) else None
