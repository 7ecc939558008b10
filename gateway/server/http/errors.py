"""One JSON error shape for every HTTP failure the server answers: ``{"error": "<message>", "status": <code>}``.

Gateway errors carry their status (``GatewayError.status``), Starlette's routing errors (404, 405) keep theirs,
and anything unexpected becomes a 500 whose body names only a reference for the log line that holds the
traceback. Tool failures are not errors here: they are 200 results with ``is_error`` set (see ``invoke``).

A request refused for its credentials (``Unauthorized``, ``Forbidden``) is also an ``auth_failure`` event on the
gateway's stream (``refused``): here for every surface whose errors reach these handlers, and through the same
function from the surfaces that render their own (MCP's 401 before the SDK, chat in OpenAI's error shape).
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from ...content.surrogates import replace_lone
from ...errors import Forbidden, GatewayError, Unauthorized, UnknownTool
from .auth import MissingKey

log = logging.getLogger("gateway.server")
# The surface an auth failure is counted under, by the path's first segment; any other path is "rest".
SURFACES = {"mcp": "mcp", "v1": "chat", "admin": "admin", "metrics": "metrics", "client": "client"}


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(body), status, headers, media_type="application/json")


def dumps(body: Any) -> bytes:
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate that got this far (results are scrubbed in invoke): U+FFFD
        return replace_lone(text).encode()


def error_response(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> Response:
    return json_response({"error": message, "status": status, **extra}, status, headers)


def gateway_error(exc: GatewayError) -> Response:
    if isinstance(exc, UnknownTool):
        return error_response(exc.status, str(exc), tool=exc.tool_id, did_you_mean=list(exc.close_matches))
    if isinstance(exc, Unauthorized):
        return error_response(exc.status, str(exc), {"WWW-Authenticate": exc.challenge or "Bearer"})
    if isinstance(exc, Forbidden) and exc.challenge:
        return error_response(exc.status, str(exc), {"WWW-Authenticate": exc.challenge})
    return error_response(exc.status, str(exc))


async def on_gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    if exc.status >= 500:  # a GatewayError with no client-facing status is a bug like any other
        return await _on_unexpected(request, exc)
    refused(request, exc)
    return gateway_error(exc)


def refused(connection: HTTPConnection, exc: GatewayError) -> None:
    """Tell the gateway's event stream of ``exc`` if it refuses credentials: an ``auth_failure`` with the surface
    (from the path, never from anything the caller chose) and the reason (missing, invalid, forbidden)."""
    if isinstance(exc, MissingKey):
        reason = "missing"
    elif isinstance(exc, Unauthorized):
        reason = "invalid"
    elif isinstance(exc, Forbidden):
        reason = "forbidden"
    else:
        return
    gateway = getattr(connection.app.state, "gateway", None)
    if gateway is None:  # an app that mounts a surface without a gateway (a test's): no stream to tell
        return
    surface = SURFACES.get(connection.url.path.split("/", 2)[1], "rest")
    gateway.events.emit("auth_failure", surface=surface, reason=reason)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, exc.detail, dict(exc.headers or {}))


def internal_error(request: Request, exc: BaseException) -> str:
    """Log a bug met while answering ``request`` with its traceback under a fresh reference; the message for the
    client, which names only that reference (every surface wraps it in its own error shape)."""
    reference = uuid.uuid4().hex[:8]
    log.error("unhandled error on %s %s [ref %s]", request.method, request.url.path, reference, exc_info=exc)
    return f"Internal server error; ref {reference}."


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    return error_response(500, internal_error(request, exc))


# Starlette routes GatewayError and HTTPException through ExceptionMiddleware and Exception (the catch-all)
# through ServerErrorMiddleware, which sends our JSON instead of its HTML/plain-text traceback page.
EXCEPTION_HANDLERS = {GatewayError: on_gateway_error, HTTPException: _on_http_error, Exception: _on_unexpected}
