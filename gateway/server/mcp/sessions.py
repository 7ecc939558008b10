"""MCP 2025-11-25 sessions that any replica serves: a record per session in the shared state (``gateway.state``).

The SDK's session manager keeps each session in the memory of the replica that answered its ``initialize`` (its
*holder*). Behind a load balancer with nothing sticky, the client's next request may reach another replica, where
the SDK would answer 404. So:

- ``initialize`` answered here: before the client sees the session id, its record is stored under
  ``mcp-session:<id>`` — the negotiated protocol version, the client's info and capabilities, and the API key that
  opened it — for the SDK's idle timeout (``mcp_session_idle_s``), renewed (at most every ``RENEW_EVERY_S``, or
  half the timeout) while the session is used anywhere.
- ``initialize`` by a key (the principal: an API key's name) already holding ``mcp_sessions_per_key`` sessions
  here is refused with HTTP 429 and a JSON-RPC error naming the cap; other keys still open sessions.
- A request naming a session this replica does not hold, whose record exists (and was opened by the same key), is
  served here on a transport of its own, born initialised from the record, in the manner of the SDK's stateless
  mode: one transport per request, no back-channel (the gateway's tools send nothing to the client during a call).
  A GET stream opened here is kept here: it hears ``notifications/tools/list_changed`` when this replica's catalog
  changes (every replica reloads from the same definitions).
- DELETE anywhere deletes the record and tells every replica (publish on ``mcp-session-closed``), so the holder
  closes its session and any replica holding a GET stream for it ends that stream.
- The store lost its records (Redis restarted without persistence, FLUSHALL, eviction): the holder notices when
  its subscription to that channel breaks, or at the latest on its next check (every ``check_s``, the cluster's
  heartbeat) that a mark of its own is gone from the store, and stores the records of the sessions it still holds.
- No record: the SDK answers as it always does (404, "Session not found"). The shared state unreachable: HTTP 503
  with a JSON-RPC error naming it — only for requests that needed a record; sessions held here keep working.

With the in-memory state (one process) the same code runs: every session is held here, so records are written
but never needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, NamedTuple

import anyio
from mcp.server.connection import Connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, SESSION_ID_PATTERN, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager, _error_response
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from ...state import SharedState, StateUnavailable
from ...state.misshapen import Misshapen
from .session_records import initialize_params, not_found, serve_from_record, unavailable, well_shaped

log = logging.getLogger("gateway.mcp")
RECORD = "mcp-session:"
CLOSED = "mcp-session-closed"  # channel: the id of a session a client deleted
SESSION_TTL_S = 1800.0  # with no idle timeout given to the SDK: a session unused this long is gone everywhere
RENEW_EVERY_S = 60.0
MARK = "mcp-sessions-mark:"  # + a replica's own id: see ``watch``
MARK_LIVES = 3  # checks: a mark outlives a late check or two
RETRY_LISTEN_S = 1.0  # between attempts to listen for closed sessions while the shared state is unreachable


class FastSession(NamedTuple):
    """A 2025-11-25 session the fast path may serve (``SharedSessions.fast_session``): its negotiated revision,
    whether this replica holds it, and ``serving`` (what the SDK path does around each of its requests)."""

    version: str
    held: bool
    serving: Any  # () -> a context manager
    capabilities: Any = None  # the client's (``ClientCapabilities`` held here; their JSON from a record)
    connection: Any = None  # the SDK's connection of a session held here (``SdkServer.track_connection``)



class SharedSessions:
    """The session records of one MCP surface, and the requests served from them."""

    def __init__(self, state: SharedState, manager: StreamableHTTPSessionManager, connections: set[Any],
                 held: dict[str, Connection], check_s: float, per_key: int):
        self.state = state
        self.per_key = per_key  # sessions one principal (the opening key's name) may hold open here
        # The record lives as long as the SDK keeps an unused session (its idle timeout), renewed well within that.
        self.ttl_s = manager.session_idle_timeout or SESSION_TTL_S
        self.renew_s = min(RENEW_EVERY_S, self.ttl_s / 2)
        self.check_s = check_s  # how often the store is checked for the loss of what this replica wrote
        self.mark = MARK + uuid.uuid4().hex  # this replica's: gone from the store when the store lost its data
        self.manager = manager
        self.connections = connections  # SdkServer's: connections to tell when the tools change
        self.held = held  # SdkServer's: the connection of each session held here, by its id
        self.renewed: dict[str, float] = {}  # session id -> when its record was last renewed from here
        self.opened: dict[str, bytes] = {}  # session id -> its record, for sessions opened here (to store again)
        self.owners: dict[str, str | None] = {}  # session id -> the API key that opened it, for sessions opened here
        self.streams: dict[str, set[StreamableHTTPServerTransport]] = {}  # GET streams served here from records
        self.tasks: set[asyncio.Task[None]] = set()
        self.misshapen = Misshapen(log)

    async def handle(self, scope: Scope, receive: Receive, send: Send, body: bytes | None, owner: str | None) -> None:
        """Serve one ``/mcp`` request (``body``: a POST's, already read and screened)."""
        headers = Headers(scope=scope)
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:  # 2026-07-28: stateless
            await self.manager.handle_request(scope, receive, send)
            return
        if session_id is None:
            opening = initialize_params(body) if body is not None else None
            if opening is not None:
                if self._over_cap(owner):
                    await _error_response(
                        f"Too many open MCP sessions for this API key: it holds {self.per_key} "
                        f"(mcp_sessions_per_key). Close one (DELETE /mcp with its Mcp-Session-Id), let one idle "
                        "out, or ask the admin to raise mcp_sessions_per_key.", 429, INVALID_REQUEST,
                    )(scope, receive, send)
                    return
                send = self._recording(send, opening, owner)
            await self.manager.handle_request(scope, receive, send)
            return
        deleting = scope["method"] == "DELETE"
        if deleting:
            send = self._closing(send, session_id)
        if session_id in self.manager._server_instances or not SESSION_ID_PATTERN.fullmatch(session_id):
            # Held here (or no id a session could have): the SDK serves it as usual, to the key that opened it only.
            if not self._owned(session_id, owner):
                log.warning("MCP session %s refused: opened with another API key", session_id[:16])
                await not_found(scope, receive, send)
                return
            await self.manager.handle_request(scope, receive, send)
            if not deleting:
                self._used(session_id)
            return
        try:
            record = await self._record(session_id, owner)
        except StateUnavailable as exc:
            await unavailable(exc, scope, receive, send)
            return
        if record is None:
            await self.manager.handle_request(scope, receive, send)  # the SDK's 404
            return
        await serve_from_record(self.manager, self.connections, self.streams, session_id, record, scope, receive, send)
        if not deleting:
            self._used(session_id)

    def _over_cap(self, owner: str | None) -> bool:
        """Whether ``owner`` already holds ``per_key`` sessions here. Refused rather than evicting the key's least
        recently used session: a client's own live sessions never end behind its back. (Counted over the
        sessions held here — at most the SDK's global cap — only when a session opens.)"""
        held = self.manager._server_instances  # the SDK's table: sessions that idled out or ended are gone from it
        return sum(1 for session_id, opener in self.owners.items()
                   if opener == owner and session_id in held) >= self.per_key

    async def fast_session(self, session_id: str, owner: str | None) -> FastSession | None:
        """The session a fast-path request names, when ``handle`` would serve it as the SDK does (held here,
        initialised and not ended; or from another replica's record opened with the same key); else None, and
        the request goes to ``handle``."""
        transport = self.manager._server_instances.get(session_id)
        if transport is not None:
            if not self._owned(session_id, owner):
                return None
            connection = self.held.get(session_id)
            idle = transport.idle_scope
            if (connection is None or not connection.initialize_accepted or transport.is_terminated
                    or session_id in self.manager._session_owners or (idle is not None and idle.cancel_called)):
                return None
            return FastSession(connection.protocol_version, True, lambda: self._serving(session_id, transport),
                               connection.client_capabilities, connection)
        if not SESSION_ID_PATTERN.fullmatch(session_id):
            return None
        try:
            record = await self._record(session_id, owner, quiet=True)
        except StateUnavailable:
            return None
        if record is None:
            return None
        return FastSession(record["version"], False, lambda: self._serving(session_id, None), record.get("capabilities"))

    def _owned(self, session_id: str, owner: str | None) -> bool:
        """Whether ``owner`` opened this session held here. The SDK checks a session's credential only when the
        request carries an authenticated ``scope["user"]``, which the gateway's API keys never set; a session id is
        not a credential, so the key that opened the session is checked here (a session opened here without a
        record, which no ``initialize`` makes, counts as opened without a key)."""
        return self.owners.get(session_id) == owner

    @contextlib.contextmanager
    def _serving(self, session_id: str, transport: StreamableHTTPServerTransport | None) -> Iterator[None]:
        """Around a fast-path request, what ``handle`` does around one: a held session is busy meanwhile (the
        transport's idle countdown, as in its ``handle_request``; mcp 2.3 keeps it private), and the record is
        renewed after."""
        counted = transport is not None and transport.idle_scope is not None and transport._idle_timeout is not None
        if counted:
            transport._requests_in_flight += 1
            if transport._requests_in_flight == 1:  # already infinite while another request is in flight
                transport.idle_scope.deadline = math.inf
        try:
            yield
        finally:
            if counted:
                transport._requests_in_flight -= 1
                if not transport._requests_in_flight:
                    transport.idle_scope.deadline = anyio.current_time() + transport._idle_timeout
            self._used(session_id)

    # -- records -------------------------------------------------------------------------------------------

    def _recording(self, send: Send, opening: dict[str, Any], owner: str | None) -> Send:
        """``send``, storing the session's record before the response that names a new session starts."""

        async def send_after_recording(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID_HEADER)
                if session_id is not None:
                    await self._store(session_id, opening, owner)
            await send(message)

        return send_after_recording

    async def _store(self, session_id: str, opening: dict[str, Any], owner: str | None) -> None:
        requested = opening.get("protocolVersion")
        record = {"version": requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION,
                  "client_info": opening.get("clientInfo"), "capabilities": opening.get("capabilities"),
                  "owner": owner}
        value = json.dumps(record).encode()
        if len(self.opened) % 1024 == 1023:  # now and then, not on every initialize
            self._forget_ended()
        self.opened[session_id] = value
        self.owners[session_id] = owner
        try:
            await self.state.put(RECORD + session_id, value, self.ttl_s)
        except StateUnavailable as exc:
            # The session works on this replica; elsewhere its requests fail (503, then 404 once the store is back
            # without the record) until the client opens a new one.
            log.warning("MCP session %s is served by this replica only: %s", session_id[:16], exc)
            return
        self.renewed[session_id] = time.monotonic()

    async def _record(self, session_id: str, owner: str | None, quiet: bool = False) -> dict[str, Any] | None:
        """The session's record, when there is one and the same key opened it (else, as the SDK does for another
        credential, the session does not exist). ``quiet``: a refusal is not logged (``handle`` logs it next)."""
        raw = await self.state.get(RECORD + session_id)
        if raw is None:
            return None
        record = well_shaped(raw)
        if record is None:  # another writer's or a corrupt value: as missing (the SDK's 404), never a 500
            self.misshapen.tell(session_id, f"MCP session {session_id[:16]}: its shared record has the wrong shape; "
                                            "treated as missing")
            return None
        if record.get("owner") != owner:
            if not quiet:
                log.warning("MCP session %s refused: opened with another API key", session_id[:16])
            return None
        return record

    def _closing(self, send: Send, session_id: str) -> Send:
        """``send``, ending the session everywhere before the client hears that its DELETE succeeded: the record
        deleted (no replica serves it from then on) and every replica told (the holder closes it, a replica with
        its GET stream ends that)."""

        async def send_after_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                self.renewed.pop(session_id, None)
                self.opened.pop(session_id, None)
                self.owners.pop(session_id, None)
                try:
                    await self.state.delete(RECORD + session_id)
                    await self.state.publish(CLOSED, session_id.encode())
                except StateUnavailable as exc:  # closed where it was served; the record expires by itself
                    log.warning("MCP session %s closed here only: %s", session_id[:16], exc)
            await send(message)

        return send_after_closing

    def _used(self, session_id: str) -> None:
        """Renew the record of a session in use, in the background: a held session never waits on the store."""
        now = time.monotonic()
        if now - self.renewed.get(session_id, 0.0) < self.renew_s:
            return
        self.renewed[session_id] = now
        if len(self.renewed) > 10_000:  # sessions never deleted: forget renewals older than a record lives
            self.renewed = {k: t for k, t in self.renewed.items() if now - t < self.ttl_s}
        self._background(self.state.touch(RECORD + session_id, self.ttl_s))

    def _background(self, step: Any) -> None:
        async def quietly() -> None:
            try:
                await step
            except StateUnavailable as exc:  # the record expires by itself; nothing waits on this
                log.debug("session record not updated: %s", exc)

        task = asyncio.create_task(quietly())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- sessions closed elsewhere -------------------------------------------------------------------------

    async def listen(self) -> None:
        """For the surface's lifetime: end what this replica holds of a session a client deleted elsewhere; after
        losing the store, store again the records of the sessions held here."""
        lost = False
        while True:
            try:
                async with self.state.subscribe(CLOSED) as closed:
                    if lost:
                        await self._store_again()
                        lost = False
                    async for message in closed:
                        await self._close_here(message.decode(errors="replace"))
            except StateUnavailable as exc:
                log.debug("not hearing of closed MCP sessions: %s", exc)
                lost = True
                await asyncio.sleep(RETRY_LISTEN_S)

    async def watch(self) -> None:
        """For the surface's lifetime: every ``check_s``, whether the store still holds this replica's mark; when
        not, it lost its data (a loss the subscription need not see, such as FLUSHALL or eviction), and the
        records of the sessions held here are stored again, then the mark."""
        while True:
            try:
                if not await self.state.touch(self.mark, MARK_LIVES * self.check_s):
                    await self._store_again()
                    await self.state.put(self.mark, b"", MARK_LIVES * self.check_s)
            except StateUnavailable as exc:
                log.debug("cannot check the MCP session records: %s", exc)
            await asyncio.sleep(self.check_s)

    async def _store_again(self) -> None:
        """The records of the sessions held here, stored again: the store may have come back empty. (A session
        deleted meanwhile elsewhere comes back until it idles out here: its DELETE reached no replica then.)"""
        self._forget_ended()
        for session_id, value in list(self.opened.items()):
            await self.state.put(RECORD + session_id, value, self.ttl_s)
        if self.opened:
            log.info("stored the records of %d MCP session(s) held here again", len(self.opened))

    def _forget_ended(self) -> None:
        """Drop the records kept of sessions that ended here (idle timeout, DELETE): the SDK no longer holds them."""
        held = self.manager._server_instances
        self.opened = {k: v for k, v in self.opened.items() if k in held}
        self.owners = {k: v for k, v in self.owners.items() if k in held}

    async def _close_here(self, session_id: str) -> None:
        held = self.manager._server_instances.get(session_id)  # the SDK's table (no public lookup in mcp 2.3)
        for transport in [*([held] if held is not None else []), *self.streams.get(session_id, ())]:
            if not transport.is_terminated:
                await transport.terminate()  # the SDK's own session task then forgets it

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        services = [asyncio.create_task(self.listen(), name="mcp-session-closed")]
        if self.state.kind != "memory":  # this process's memory loses nothing another replica needs
            services.append(asyncio.create_task(self.watch(), name="mcp-session-records"))
        try:
            yield
        finally:
            for task in services:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for pending in list(self.tasks):
                pending.cancel()
