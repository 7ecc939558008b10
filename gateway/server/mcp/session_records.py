"""What an MCP session's shared record holds, how a request of a session held elsewhere is served from its
record, and how a request without one is answered (``gateway.server.mcp.sessions`` stores, reads and renews the
records, and decides which requests are served from one).

A record is ``{"version", "owner", "client_info", "capabilities"}``: the negotiated protocol version, the name of
the key that opened the session, and the client's ``initialize`` info and capabilities. Any other value under a
record's key is another writer's or corrupt, and is read as missing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import anyio
from anyio.abc import TaskStatus
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager, _error_response
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
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


async def serve_from_record(manager: StreamableHTTPSessionManager, connections: set[Any],
                            streams: dict[str, set[StreamableHTTPServerTransport]], session_id: str,
                            record: dict[str, Any], scope: Scope, receive: Receive, send: Send) -> None:
    """One request of a session held elsewhere, on a transport of its own that ends with the request. A GET
    stream's connection is among ``connections`` (told when the tools change) and its transport in ``streams``
    (ended when a DELETE elsewhere closes the session) while it lasts."""
    listening = scope["method"] == "GET"  # the session's stream: kept here while the client keeps it open
    transport = StreamableHTTPServerTransport(
        mcp_session_id=session_id, is_json_response_enabled=manager.json_response, event_store=None,
        security_settings=manager.security_settings)

    async def run_server(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with transport.connect() as (read_stream, write_stream):
            # As the SDK's stateless mode: a reply to a server request would have nowhere to land.
            dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                read_stream, write_stream, inline_methods=frozenset({"initialize"}),
                transport_builder=lambda _md: TransportContext(kind="streamable-http", can_send_request=False))
            connection = Connection.from_envelope(record["version"], record.get("client_info"),
                                                  record.get("capabilities"),
                                                  **({"outbound": dispatcher} if listening else {}))
            task_status.started()
            if listening:
                connections.add(connection)
            try:
                # The manager's lifespan state, entered once for the app (the SDK keeps it private).
                await serve_connection(manager.app, dispatcher, connection=connection,
                                       lifespan_state=manager._lifespan_state)
            finally:
                connections.discard(connection)

    with _stream(streams, session_id, transport) if listening else contextlib.nullcontext():
        async with anyio.create_task_group() as group:
            await group.start(run_server)
            try:
                await transport.handle_request(scope, receive, send)
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()


@contextlib.contextmanager
def _stream(streams: dict[str, set[StreamableHTTPServerTransport]], session_id: str,
            transport: StreamableHTTPServerTransport) -> Iterator[None]:
    """Know a GET stream served here by its session, so a DELETE elsewhere ends it."""
    streams.setdefault(session_id, set()).add(transport)
    try:
        yield
    finally:
        held = streams.get(session_id, set())
        held.discard(transport)
        if not held:
            streams.pop(session_id, None)


async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
    """What the SDK answers for a session that does not exist (its session manager's own response)."""
    await _error_response("Session not found", 404)(scope, receive, send)


async def unavailable(exc: StateUnavailable, scope: Scope, receive: Receive, send: Send) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {
        "code": INTERNAL_ERROR,
        "message": f"This MCP session is held by another replica and its record cannot be read: {exc}. "
                   "Retry shortly, or open a new session."}}
    await Response(dumps(body), exc.status, media_type="application/json")(scope, receive, send)
