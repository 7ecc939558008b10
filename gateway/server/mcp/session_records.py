"""What an MCP session's shared record holds and how a request without one is answered
(``gateway.server.mcp.sessions`` stores, reads and renews the records).

A record is ``{"version", "owner", "client_info", "capabilities"}``: the negotiated protocol version, the name of
the key that opened the session, and the client's ``initialize`` info and capabilities. Any other value under a
record's key is another writer's or corrupt, and is read as missing.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.streamable_http_manager import _error_response
from mcp_types import INTERNAL_ERROR
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ...state import StateUnavailable
from ..http.errors import dumps


def well_shaped(raw: bytes) -> dict[str, Any] | None:
    """A session record as ``_store`` writes it, or None for any other value."""
    try:
        record = json.loads(raw)
    except ValueError:  # not JSON, or not UTF-8
        return None
    if (type(record) is not dict or record.get("version") not in HANDSHAKE_PROTOCOL_VERSIONS
            or "owner" not in record or not isinstance(record["owner"], str | None)
            or not all(isinstance(record.get(k), dict | None) for k in ("client_info", "capabilities"))):
        return None
    return record


def initialize_params(body: bytes) -> dict[str, Any] | None:
    """The params of an ``initialize`` request, when ``body`` is one (screened already: valid JSON)."""
    if b'"initialize"' not in body:  # most bodies: no parse
        return None
    message = json.loads(body)
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    return params if isinstance(params, dict) else {}


async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
    """What the SDK answers for a session that does not exist (its session manager's own response)."""
    await _error_response("Session not found", 404)(scope, receive, send)


async def unavailable(exc: StateUnavailable, scope: Scope, receive: Receive, send: Send) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {
        "code": INTERNAL_ERROR,
        "message": f"This MCP session is held by another replica and its record cannot be read: {exc}. "
                   "Retry shortly, or open a new session."}}
    await Response(dumps(body), exc.status, media_type="application/json")(scope, receive, send)
