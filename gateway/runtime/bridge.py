"""Live browser sessions: how a REST or MCP call runs a client tool in the page of a user who has it open.

A page opens a WebSocket to ``/client/bridge`` (served by ``gateway.server.client``) and is given a session id.
A call to a tool with a browser binding that names the session (REST header ``X-Gateway-Session``, MCP
``_meta["gateway/session"]``) reaches ``Bridge.execute``, which forwards it to the page and waits for its answer.
Messages are JSON text frames::

    gateway → page   {"type": "session", "session": "<id>"}                 once, when the page connects
    gateway → page   {"type": "call", "id": "<call id>", "tool": "<tool id>", "input": "<JSON arguments>",
                      "context": {"conversation_id": ..., "user": ..., "tool_call_id": ...}}
    page → gateway   {"type": "result", "id": "<call id>", "value": <any JSON value>}
    page → gateway   {"type": "error", "id": "<call id>", "message": "<what the handler threw>"}

The wait is bounded by the tool's timeout (``invoke`` cancels it); an answer that arrives later is dropped. A
page that disconnects fails its pending calls at once with an error result, rather than leaving them to time out.

A page's value is read the way the chat loop reads a tool message: a string that holds valid JSON is that JSON
value (PlusWorkflow handlers return ``JSON.stringify(result)``, so ``"\\"x answered\\""`` becomes
``"x answered"``); any other string stays a string. ``invoke`` then normalises it like a server result (output
schema, size cap).

Session ids are random and unguessable: knowing one is what lets a caller use that page, so they are never
listed or logged. Opening a session needs no API key, so their number is capped, in all and per client address
(``MAX_SESSIONS``, ``MAX_SESSIONS_PER_CLIENT``); behind a reverse proxy every page shares the proxy's address.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..context import CallContext
from ..errors import ToolError
from ..events import NULL_BUS, EventBus
from ..invoke import json_value

log = logging.getLogger("gateway.bridge")
MAX_SESSIONS = 10_000  # live pages per gateway process; more are refused (the page may retry later)
# Live pages per client address, so that one host cannot take every slot (the bridge needs no API key).
MAX_SESSIONS_PER_CLIENT = 20
MAX_MESSAGE_CHARS = 2_000  # of an error message from a page, as the LLM reads it


class TooManySessions(Exception):
    """A session refused; ``reason`` is the short text the page reads in the WebSocket close frame."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


@dataclass(eq=False)
class Session:
    """One connected page. ``outbox`` holds the frames to send; the WebSocket endpoint writes them out."""

    id: str
    client: str | None = None  # the address the page connected from
    outbox: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    # call id -> (tool id, the future its caller awaits)
    pending: dict[str, tuple[str, asyncio.Future[Any]]] = field(default_factory=dict)

    def post(self, message: dict[str, Any]) -> None:
        self.outbox.put_nowait(json.dumps(message, ensure_ascii=False, separators=(",", ":")))


class Bridge:
    """The live sessions of one gateway process, by id; each one opened or closed is a ``bridge_session`` event
    on ``events`` (the gateway's)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_per_client: int = MAX_SESSIONS_PER_CLIENT,
                 events: EventBus = NULL_BUS):
        self._events = events
        self._sessions: dict[str, Session] = {}
        self._per_client: dict[str, int] = {}  # live sessions by client address
        self._max_sessions = max_sessions
        self._max_per_client = max_per_client

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def session_ids(self) -> list[str]:
        """The ids of the open sessions (for their records in the shared state: ``gateway.runtime.bridge_cluster``)."""
        return list(self._sessions)

    def connect(self, client: str | None = None) -> Session:
        """A new session for a page that just connected from address ``client``; its first frame (``session``)
        is already queued. ``TooManySessions`` past the gateway's or that address's limit."""
        if len(self._sessions) >= self._max_sessions:
            raise TooManySessions(f"{len(self._sessions)} browser sessions are open, the most this gateway keeps",
                                  "too many browser sessions on this gateway; try again later")
        if client is not None and self._per_client.get(client, 0) >= self._max_per_client:
            raise TooManySessions(f"{self._max_per_client} browser sessions are open from {client}, the most this "
                                  "gateway keeps per client address",
                                  f"too many browser sessions per client address ({self._max_per_client}); "
                                  "close another page first")
        session = Session(secrets.token_urlsafe(18), client)
        self._sessions[session.id] = session
        if client is not None:
            self._per_client[client] = self._per_client.get(client, 0) + 1
        session.post({"type": "session", "session": session.id})
        self._events.emit("bridge_session", change="opened", sessions=len(self._sessions))
        return session

    def disconnect(self, session: Session) -> None:
        """Forget a page that went away, failing each of its pending calls with an error result."""
        if self._sessions.pop(session.id, None) is not None:
            if session.client is not None:
                left = self._per_client.pop(session.client) - 1
                if left:
                    self._per_client[session.client] = left
            self._events.emit("bridge_session", change="closed", sessions=len(self._sessions))
        for tool_id, future in session.pending.values():
            if not future.done():
                future.set_exception(ToolError(
                    f"Tool '{tool_id}' did not finish: the browser page running it disconnected."))
        session.pending.clear()

    def receive(self, session: Session, frame: str) -> None:
        """Take a frame from the page: the answer to one of its pending calls. Anything else is dropped."""
        try:
            message = json.loads(frame)
        except (ValueError, RecursionError):  # nested deeper than the parser recurses: not an answer either
            log.debug("bridge: dropped a frame that is not JSON")
            return
        if not isinstance(message, dict) or message.get("type") not in ("result", "error"):
            log.debug("bridge: dropped a frame that is neither a result nor an error")
            return
        entry = session.pending.pop(str(message.get("id")), None)
        if entry is None:  # the call timed out, or the page answered twice
            log.debug("bridge: dropped an answer to no pending call")
            return
        tool_id, future = entry
        if future.done():
            return
        if message["type"] == "result":
            future.set_result(json_value(message.get("value")))  # the seed's handlers return JSON text
        else:
            text = str(message.get("message") or "the handler failed without a message")
            if len(text) > MAX_MESSAGE_CHARS:
                text = text[:MAX_MESSAGE_CHARS] + "…"
            future.set_exception(ToolError(f"Tool '{tool_id}' failed in the browser: {text}"))

    async def execute(self, session_id: str, tool_id: str, arguments: dict[str, Any], context: CallContext) -> Any:
        """Run ``tool_id`` in the page holding ``session_id`` and return its value; failures raise ``ToolError``."""
        session = self._sessions.get(session_id)
        if session is None:
            raise ToolError(f"Tool '{tool_id}' runs in the user's browser, and no open page holds the browser "
                            "session named by this call: the page was closed, or the session id is wrong.")
        call_id = uuid.uuid4().hex
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        session.pending[call_id] = (tool_id, future)
        session.post({
            "type": "call", "id": call_id, "tool": tool_id,
            "input": json.dumps(arguments, ensure_ascii=False),
            "context": {"conversation_id": context.conversation_id, "user": context.user,
                        "tool_call_id": context.tool_call_id},
        })
        try:
            return await future
        finally:  # on timeout (cancelled by invoke) the page's late answer finds no pending call and is dropped
            session.pending.pop(call_id, None)
