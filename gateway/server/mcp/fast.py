"""The MCP fast path: one ``tools/call`` or ``tools/list`` POSTed to ``/mcp``, answered without the SDK's
per-request machinery (a transport, a dispatcher, a task, pydantic models of every message), with the SDK's own
answer: the same checks, handlers, result shaping and framing.

What it takes — a request in the plainest form real clients send, where the SDK's answer is known:

- one JSON-RPC request object (``jsonrpc``, ``id``, ``method``, ``params`` and nothing else), the method
  ``tools/call`` or ``tools/list``, ``Content-Type: application/json``, an ``Accept`` that takes JSON;
- 2026-07-28 (an ``MCP-Protocol-Version`` header that is not a handshake revision): the envelope in ``_meta``
  and the ``Mcp-Method``/``Mcp-Name`` headers agreeing with it, each routing header once, no base64-wrapped
  name, and no ``x-mcp-header`` parameters on the called tool (whose ``Mcp-Param-*`` headers the SDK checks);
- 2025-11-25 (or any handshake revision): an ``Mcp-Session-Id`` this replica holds (initialised, not ended) or
  one whose record another replica stored (``mcp.sessions``), exactly as the SDK path would serve it; the
  session's negotiated revision is the one its params are checked and its result shaped for;
- params that the SDK's own validators (``mcp_types.methods``) accept for that revision;
- a call of a tool that may talk to its client (``ToolHandlers.talks``), answered by ``streamed`` (JSON, or SSE
  from its first notification); on 2025-11-25 only in a session this replica holds, whose client POSTs the answers
  to its questions here (a JSON-RPC response naming a question that waits is taken here, any other goes to the
  SDK).

Anything else — a batch, a notification, another method, a missing or odd header, a session this replica
cannot vouch for, a tracer provider configured (the SDK's span) — goes to the SDK unchanged. ``ENABLED`` is the
switch (tests compare both paths). A ``tools/list`` page is serialised once per catalog, kind of caller, page
and revision (``Catalog.memo``) and reused as bytes.

What a request must be for it, and how its answer is shaped, is ``mcp.messages``; its handlers are the SDK's
(``mcp.handlers``). ``McpSurface.fast_post`` hands
it a POST from ``front.Front``, below Starlette's exception and routing layers; a browser's POST (``Origin``) comes
through them, to ``McpSurface.__call__``.

A 2025-11-25 client may cancel a call with ``notifications/cancelled`` on its session: that notification still
goes to the SDK (which refuses another key's), and a fast call it names, if the same key made it, is cancelled and answered ``-32800 Request cancelled`` as the SDK's
transport answers one.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from starlette.types import Receive, Scope, Send

from ... import __version__
from ...client_channel import SILENT, ClientChannel
from ..http.auth import SCOPE_KEY
from .handlers import ToolHandlers
from .messages import (
    INTERNAL_ERROR,
    JSON_BYTES,
    MODERN_ERROR_STATUS,
    REQUEST_CANCELLED,
    ROUTING_HEADERS,
    ProtocolError,
    Types,
    accepts_sse,
    call_shaped,
    coerce_id,
    duplicated,
    plain_post,
    request_of,
    to_json,
    validated,
)

if TYPE_CHECKING:
    from .sessions import SharedSessions  # the SDK's (it imports the SDK): present once the SDK runs

log = logging.getLogger("gateway.mcp")
# Tests switch it off to compare with the SDK's own answers; TOOL_GATEWAY_MCP_FAST=0 does for a server process
# (bench_speed.py compares both in one run).
ENABLED = os.environ.get("TOOL_GATEWAY_MCP_FAST", "1") != "0"
# The SDK answers every request it is handed with one JSON body (``mcp.sdk``; a call of a tool that talks to its
# client, ``ToolHandlers.talks``, as SSE once it talks: on 2026-07-28 ``streamed`` does the same here, on 2025-11-25
# the SDK takes it): the framing the fast path reproduces. With SSE answers configured, it would step aside.
JSON_RESPONSES = True
SERVER_NAME = "tool-gateway"
SERVER_TITLE = "Tool gateway"
SERVER_VERSION = __version__  # the release named to MCP clients
CACHE_HINTS = {"tools/list": (0, "private")}  # method -> (ttl_ms, scope) of the SDK's cache hint


class FastPath:
    """The fast path of one ``McpSurface``: its ``handlers``, and ``traced`` (``McpSurface.traced``: then the SDK
    answers all). ``loaded_types`` waits for ``mcp_types`` until ``types_loaded`` gave them; ``sessions`` are the
    SDK's 2025-11-25 sessions while it runs (``McpSurface.run`` sets them), None before and after."""

    def __init__(self, handlers: ToolHandlers, traced: bool, loaded_types: Callable[[], Awaitable[Types]]):
        self.handlers = handlers
        self.traced = traced
        self.loaded_types = loaded_types
        self.sessions: SharedSessions | None = None
        self.types: Types | None = None
        self._server_info: dict[str, Any] = {}
        # (owner's key name, session id, request id) -> a call in flight: the owner is part of the key so that
        # another key's notifications/cancelled naming the session never finds (and ends) the owner's call.
        self._cancellable: dict[tuple[str | None, str, Any], _Call] = {}
        self.log_levels: Any = None  # the SDK's ``channel.LogLevels`` (logging/setLevel of each session) while it runs
        self._questions: Any = None  # ``streamed.Questions``, once a 2025 talking call came

    def types_loaded(self, types: Types) -> None:
        self.types = types
        self._server_info = types.implementation(name=SERVER_NAME, version=SERVER_VERSION,
                                                 title=SERVER_TITLE).model_dump(by_alias=True, mode="json",
                                                                                exclude_none=True)

    async def answer(self, scope: Scope, receive: Receive, send: Send, message: Any, headers: Mapping[str, str],
                     added: Sequence[tuple[bytes, bytes]] = (), talks: bool = False) -> bool:
        """Answer ``message`` (a screened POST body; ``headers``: the request's ``first_headers``; ``added``:
        headers to send after the answer's own) and say so, or leave it (False) to the SDK, untouched. ``talks``:
        it calls a tool that may talk to its client, which only a 2026-07-28 request may bring here (``streamed``);
        on 2025-11-25 such a call needs the session's stream, which is the SDK's."""
        if not ENABLED or not JSON_RESPONSES or self.traced or type(message) is not dict:
            return False
        if message.get("method") == "notifications/cancelled":
            self._cancel(scope, headers, message)
            return False
        if self._questions is not None and "method" not in message:
            return await self._answer_to_question(scope, send, headers, message, added)
        request = request_of(message)
        if request is None:
            return False
        if not plain_post(headers):
            return False
        types = self.types or await self.loaded_types()
        requested = headers.get("mcp-protocol-version")
        if requested is not None and requested not in types.handshake:
            return await self._modern(scope, receive, send, headers, request, types, added, talks)
        return await self._legacy(scope, receive, send, headers, request, types, added, talks)

    # -- the two revisions ----------------------------------------------------------------------------------

    async def _modern(self, scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str],
                      request: tuple[Any, str, Any], types: Types, added: Sequence[tuple[bytes, bytes]],
                      talks: bool) -> bool:
        request_id, method, params = request
        if duplicated(scope, ROUTING_HEADERS) or not self._envelope_agrees(headers, method, params, types):
            return False
        if method == "tools/call":
            name = params.get("name")
            if not isinstance(name, str) or self.handlers.input_schema(name) is not None:
                return False
        version = headers["mcp-protocol-version"]
        typed = validated(types, method, version, params)
        if typed is None:
            return False
        capabilities = params["_meta"][types.capabilities_key]
        if talks:
            from mcp.server.connection import allowed_log_levels  # imported once a talking call comes

            from .channel import Rounds
            from .streamed import StreamChannel, answered

            meta = params["_meta"]  # the envelope: checked above
            levels = allowed_log_levels(version, meta)  # only what the request's logLevel opted in to
            declared = capabilities if type(capabilities) is dict else {}
            await answered(lambda channel: self._outcome(scope, headers, request_id, method, version, typed, types,
                                                         None, capabilities, channel),
                           lambda answer: StreamChannel(answer, meta, levels.__contains__,
                                                        lambda capability: declared.get(capability) is not None,
                                                        rounds=Rounds(typed)),
                           receive, send, added, accepts_sse(headers), modern=True)
            return True
        outcome = await self._outcome(scope, headers, request_id, method, version, typed, types, None, capabilities)
        status = MODERN_ERROR_STATUS.get(outcome.code, 200) if outcome.code is not None else 200
        await _respond(send, status, [(b"content-length", b"%d" % len(outcome.body)), (b"content-type", JSON_BYTES),
                                      *added], outcome.body)
        return True

    async def _legacy(self, scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str],
                      request: tuple[Any, str, Any], types: Types, added: Sequence[tuple[bytes, bytes]],
                      talks: bool) -> bool:
        request_id, method, params = request
        session_id = headers.get("mcp-session-id")
        sessions = self.sessions
        # No session: the SDK opens one. No SDK yet: no session can be held here. scope["user"]: the SDK's own
        # credential check of a session (the gateway's auth never sets it).
        if session_id is None or sessions is None or "user" in scope:
            return False
        session = await sessions.fast_session(session_id, scope[SCOPE_KEY].name)
        if session is None or (talks and (session.connection is None or self.log_levels is None)):
            return False  # a talking call's questions are answered on a session held here
        typed = validated(types, method, session.version, params)
        if typed is None:
            return False
        with session.serving():
            cancellable = (scope[SCOPE_KEY].name, session_id, coerce_id(request_id)) if session.held else None
            if talks:
                await self._legacy_talking(scope, receive, send, headers, request, typed, types, added, session,
                                           cancellable)
                return True
            outcome = await self._outcome(scope, headers, request_id, method, session.version, typed, types,
                                          cancellable, session.capabilities)
            await _respond(send, 200, [(b"content-type", JSON_BYTES), (b"mcp-session-id", session_id.encode("latin-1")),
                                       (b"content-length", b"%d" % len(outcome.body)), *added], outcome.body)
        return True

    async def _legacy_talking(self, scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str],
                              request: tuple[Any, str, Any], typed: Any, types: Types,
                              added: Sequence[tuple[bytes, bytes]], session: Any, cancellable: Any) -> None:
        """A 2025-11-25 call of a tool that may talk (``streamed``), in ``session``, held here: its log messages
        as the session's ``logging/setLevel`` lets through, its questions asked on its stream."""
        from mcp.server.connection import allowed_log_levels  # imported once a talking call comes

        from .streamed import Questions, StreamChannel, answered

        request_id, method, params = request
        owner, session_id, version = scope[SCOPE_KEY].name, headers["mcp-session-id"], session.version
        questions = self._questions = self._questions or Questions()
        meta = params.get("_meta") if type(params) is dict else None
        allowed = allowed_log_levels(version, meta if type(meta) is dict else None)
        connection, log_levels, capabilities = session.connection, self.log_levels, session.capabilities

        def channel(answer: Any) -> StreamChannel:
            return StreamChannel(
                answer, meta, lambda level: level in allowed and log_levels.allows(connection, level),
                lambda capability: getattr(capabilities, capability, None) is not None,
                ask=lambda *asked: questions.ask(owner, session_id, connection, *asked))

        await answered(lambda client: self._outcome(scope, headers, request_id, method, version, typed, types,
                                                    cancellable, capabilities, client),
                       channel, receive, send, ((b"mcp-session-id", session_id.encode("latin-1")), *added),
                       accepts_sse(headers), modern=False)

    async def _answer_to_question(self, scope: Scope, send: Send, headers: Mapping[str, str], message: dict[str, Any],
                                  added: Sequence[tuple[bytes, bytes]]) -> bool:
        """A client's answer to a question a fast call asked on its session (``streamed.Questions``): given to the
        call and acknowledged (202, as the SDK acknowledges one); any other message goes to the SDK."""
        session_id = headers.get("mcp-session-id")
        if session_id is None or not plain_post(headers) or ("result" in message) == ("error" in message):
            return False
        if not self._questions.answered(scope[SCOPE_KEY].name, session_id, message):
            return False
        await _respond(send, 202, [(b"content-type", JSON_BYTES), (b"mcp-session-id", session_id.encode("latin-1")),
                                   (b"content-length", b"0"), *added], b"")
        return True

    def _envelope_agrees(self, headers: Mapping[str, str], method: str, params: Any, types: Types) -> bool:
        """Whether the SDK's 2026-07-28 classifier routes this request (``classify_inbound_request``'s ladder,
        the accepting branch only; a base64-wrapped ``Mcp-Name`` is left to it)."""
        meta = params.get("_meta") if params is not None else None
        if type(meta) is not dict or types.version_key not in meta or types.capabilities_key not in meta:
            return False
        version = meta[types.version_key]
        if headers.get("mcp-protocol-version") != version or headers.get("mcp-method") != method:
            return False
        if method == "tools/call" and params.get("name") is not None:
            name = headers.get("mcp-name")
            if name is None or name.startswith("=?base64?") or name != params["name"]:
                return False
        return isinstance(version, str) and version in types.modern

    # -- the answer -----------------------------------------------------------------------------------------

    async def _outcome(self, scope: Scope, headers: Mapping[str, str], request_id: Any, method: str, version: str,
                       typed: Any, types: Types, cancellable: tuple[str | None, str, Any] | None,
                       capabilities: Any, client: ClientChannel = SILENT) -> _Outcome:
        modern = version in types.modern
        caller = scope[SCOPE_KEY]
        call = _Call() if cancellable is not None else None
        try:
            if cancellable is not None:
                self._cancellable[cancellable] = call
            try:
                if method == "tools/list":
                    result = self._page(caller, headers, typed, version, types)
                else:
                    called = await self.handlers.call_tool(caller, headers, request_id, typed, client, capabilities)
                    # A talking call that asked its client something ends this round with the question (as
                    # SdkServer.call_tool does): the streamed channel's Rounds.
                    rounds = getattr(client, "rounds", None)
                    if rounds is not None and rounds.pending:
                        called = rounds.result()
                    result = to_json(self._shaped(types, method, version, called))
            except asyncio.CancelledError:
                if call is None or not call.taken():  # not (only) the client's cancellation: it goes on
                    raise
            finally:
                if cancellable is not None and self._cancellable.get(cancellable) is call:
                    del self._cancellable[cancellable]
        except ProtocolError as exc:
            error = _Outcome.error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("MCP %s failed", method)
            # As the SDK answers: a generic internal error on 2026-07-28; on the handshake revisions its
            # dispatcher pins code 0 and the exception's text.
            error = (_Outcome.error(request_id, INTERNAL_ERROR, "Internal server error") if modern
                     else _Outcome.error(request_id, 0, str(exc)))
        else:
            error = None
        if call is not None and call.cancelled:  # answered so on the 2025 wire, whatever the call came to
            call.taken()
            return _Outcome.error(request_id, REQUEST_CANCELLED, "Request cancelled")
        if error is not None:
            return error
        return _Outcome(b'{"jsonrpc":"2.0","id":' + to_json(request_id) + b',"result":' + result + b"}")

    def _page(self, caller: Any, headers: Mapping[str, str], typed: Any, version: str, types: Types) -> bytes:
        """A ``tools/list`` result as bytes: a page that starts where the handlers' pages start is kept in the
        catalog's memo (per kind of caller and revision); one at a cursor a client made up is not."""
        catalog, key, start = self.handlers.list_view(caller, headers, typed)

        def page() -> bytes:
            listed = self.handlers.list_page(catalog, key, start, caller)
            return to_json(self._shaped(types, "tools/list", version, listed))

        kept = self.handlers.page_key(key, start)
        return page() if kept is None else catalog.memo((*kept, version), page)

    def _shaped(self, types: Types, method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
        """A handler's result as the SDK shapes it for the wire (``ServerRunner._serialize``): the cache hint,
        the revision's own result schema (fields it lacks dropped), then on 2026-07-28 ``resultType`` and the
        server's identity in ``_meta``."""
        hint = CACHE_HINTS.get(method)
        if hint is not None:
            result = {"ttlMs": hint[0], "cacheScope": hint[1], **result}
        shaped = call_shaped(version, result) if method == "tools/call" else None
        if shaped is None:
            try:
                shaped = types.serialize(method, version, result)
            except ValueError:  # pydantic's ValidationError
                log.exception("handler for %r returned an invalid result", method)
                raise ProtocolError(INTERNAL_ERROR, "Handler returned an invalid result") from None
        if version in types.modern:
            if shaped.get("resultType") is None:
                shaped["resultType"] = "complete"
            meta = shaped.get("_meta")
            if meta is None or (isinstance(meta, dict) and meta.get(types.server_info_key) is None):
                shaped["_meta"] = {**(meta or {}), types.server_info_key: dict(self._server_info)}
        return shaped

    def _cancel(self, scope: Scope, headers: Mapping[str, str], message: dict[str, Any]) -> None:
        session_id = headers.get("mcp-session-id")
        params = message.get("params")
        if session_id is None or not isinstance(params, dict):
            return
        request_id = params.get("requestId")
        if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
            return
        call = self._cancellable.get((scope[SCOPE_KEY].name, session_id, coerce_id(request_id)))
        if call is not None and not call.cancelled:
            call.cancel()


class _Call:
    """A fast call a 2025-11-25 client may cancel: its request's task, cancelled once. (An anyio ``CancelScope``
    did this at ~9 µs a call, cancelled or not; the task's own cancel count costs nothing until used.)"""

    __slots__ = ("cancelled", "pending", "task")

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.cancelled = self.pending = False

    def cancel(self) -> None:
        self.cancelled = self.pending = True
        self.task.cancel()  # the task waits inside the call (it is registered only meanwhile): raised there

    def taken(self) -> bool:
        """Take back this call's cancellation from the task, once (whether the call saw it or swallowed it);
        whether the task is left with no other cancellation to carry on."""
        if self.pending:
            self.pending = False
            return self.task.uncancel() == 0
        return False


class _Outcome(NamedTuple):  # a tuple: built on every call, at a third of a frozen dataclass's cost
    body: bytes
    code: int | None = None  # a JSON-RPC error's

    @classmethod
    def error(cls, request_id: Any, code: int, message: str, data: Any = None) -> _Outcome:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return cls(to_json({"jsonrpc": "2.0", "id": request_id, "error": error}), code)


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """What Starlette's ``Response`` sends, with the headers in its order."""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
