"""Browser sessions across replicas: a call may name a page whose WebSocket another replica holds.

``ClusterBridge`` wraps this replica's ``Bridge`` (``local``, which keeps its limits and frames) with two things:

- a registry in the shared state: ``bridge:<session>`` → the id of the replica holding its WebSocket, written
  before the page learns its id, renewed every heartbeat while the WebSocket lives (it lives ``3 × heartbeat_s``)
  and deleted when it closes, so the sessions of a replica that died disappear with nothing to clean up;
- forwarding: a call for a session held elsewhere is published on the owner's channel ``replica:<id>:bridge``
  with a request id; the owner runs it on its local bridge and publishes the answer on the caller's channel
  (the same name with the caller's id), which the caller has listened to since it started. The wait is bounded
  by the tool's timeout, as a local call's is (``invoke`` cancels it).

A session no replica holds fails at once with a clear error: no record, or an owner that no longer listens
(``publish`` reached nobody). Each replica listens for the app's lifetime (``bridging``, a lifespan service) and
subscribes again when the store comes back; while it is not listening, calls that would need forwarding fail
at once rather than wait for an answer that could not arrive.

With the in-memory state (one process) the same code runs: every session is local, so nothing is forwarded,
and the registry is this process's. Session ids are secrets (knowing one is what lets a caller use that page):
messages show only their first characters.

Messages are JSON::

    caller → owner   {"type": "call", "id": "<request id>", "reply_to": "<caller's replica id>", "session": "<id>",
                      "tool": "<tool id>", "arguments": {...}, "context": {conversation_id, user, tool_call_id}}
    owner → caller   {"type": "reply", "id": "<request id>", "value": <JSON value>}  or  {..., "error": "<text>"}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any, Protocol

from ..context import CallContext
from ..errors import ToolError
from ..state import StateUnavailable
from .bridge import Bridge, Session
from .cluster import DEFAULT_HEARTBEAT_S, Served

log = logging.getLogger("gateway.bridge")
RECORDS = "bridge:"
RENEW_BATCH = 100  # records renewed at once: a replica with thousands of pages does not open thousands of sockets
RESUBSCRIBE_S = 0.5  # between attempts to listen again while the store is unreachable
SHOWN_CHARS = 6  # of a session id in a message


def channel(replica_id: str) -> str:
    return f"replica:{replica_id}:bridge"


def shown(session_id: str) -> str:
    """A session id as a message may show it: enough to tell which, not enough to use it."""
    return f"'{session_id[:SHOWN_CHARS]}…'"


class ClusterBridge:
    """The browser sessions of every replica, as this replica reaches them."""

    def __init__(self, gateway: Served, local: Bridge):
        self.gateway = gateway
        self.local = local
        self.replica_id: str | None = None  # set by ``bridging``; None: no lifespan, this process alone
        self.heartbeat_s = float(gateway.settings.cluster.get("heartbeat_s", DEFAULT_HEARTBEAT_S))
        self.listening = False
        self._waiting: dict[str, asyncio.Future[Any]] = {}  # request id -> the forwarded call's answer
        self._answering: set[asyncio.Task[None]] = set()  # calls this replica runs for others

    @property
    def ttl_s(self) -> float:
        return 3 * self.heartbeat_s

    async def opened(self, session: Session) -> None:
        """Register a page that just connected (before it learns its id, so a call naming it finds it)."""
        if self.replica_id is None:
            return
        try:
            await self.gateway.state.put(RECORDS + session.id, self.replica_id.encode(), self.ttl_s)
        except StateUnavailable as exc:  # the page still serves calls made here; renewal registers it later
            log.warning("browser session %s is not registered yet: %s", shown(session.id), exc)

    async def closed(self, session: Session) -> None:
        """Forget a page that went away (its record, unless the store is down: then it expires)."""
        if self.replica_id is None:
            return
        with contextlib.suppress(StateUnavailable):
            await self.gateway.state.delete(RECORDS + session.id)

    async def execute(self, session_id: str, tool_id: str, arguments: dict[str, Any], context: CallContext) -> Any:
        """Run ``tool_id`` in the page holding ``session_id``, here or on the replica that holds it."""
        if session_id in self.local or self.replica_id is None:
            return await self.local.execute(session_id, tool_id, arguments, context)
        try:
            owner = await self.gateway.state.get(RECORDS + session_id)
        except StateUnavailable as exc:
            raise ToolError(f"Tool '{tool_id}' runs in the user's browser, and browser session {shown(session_id)} "
                            f"is not connected to this replica; which replica holds it is unknown: {exc}") from None
        if owner is None or owner.decode() == self.replica_id:
            raise self._nowhere(tool_id, session_id)
        return await self._forward(owner.decode(), session_id, tool_id, arguments, context)

    def _nowhere(self, tool_id: str, session_id: str) -> ToolError:
        return ToolError(f"Tool '{tool_id}' runs in the user's browser, and browser session {shown(session_id)} is "
                         "not connected to any replica: no open page holds the browser session named by this call "
                         "(the page was closed, the replica holding it stopped, or the session id is wrong).")

    async def _forward(self, owner: str, session_id: str, tool_id: str, arguments: dict[str, Any],
                       context: CallContext) -> Any:
        if not self.listening:
            raise ToolError(f"Tool '{tool_id}' runs in the user's browser on another replica, and this replica "
                            "cannot hear its answer now: the shared state is unavailable.")
        request_id = uuid.uuid4().hex
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answer
        message = {"type": "call", "id": request_id, "reply_to": self.replica_id, "session": session_id,
                   "tool": tool_id, "arguments": arguments,
                   "context": {"conversation_id": context.conversation_id, "user": context.user,
                               "tool_call_id": context.tool_call_id}}
        try:
            try:
                heard = await self.gateway.state.publish(channel(owner), _dumps(message))
            except StateUnavailable as exc:
                raise ToolError(f"Tool '{tool_id}' runs in the user's browser on another replica, which cannot be "
                                f"reached: {exc}") from None
            if not heard:  # its record outlived it: the owner stopped listening
                raise self._nowhere(tool_id, session_id)
            return await answer  # invoke's timeout cancels this wait
        finally:
            self._waiting.pop(request_id, None)

    def received(self, raw: bytes) -> None:
        """A message on this replica's channel: a call to run here, or the answer to one forwarded from here."""
        try:
            message = json.loads(raw)
            kind = message["type"]
        except (ValueError, TypeError, KeyError):
            log.warning("bridge: dropped a message on %s that is not one of ours", channel(str(self.replica_id)))
            return
        if kind == "reply":
            answer = self._waiting.pop(str(message.get("id")), None)
            if answer is None or answer.done():  # the caller gave up (timed out, cancelled)
                return
            if "error" in message:
                answer.set_exception(ToolError(str(message["error"])))
            else:
                answer.set_result(message.get("value"))
        elif kind == "call":
            task = asyncio.create_task(self._answer(message), name="bridge-forwarded-call")
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)

    async def _answer(self, message: dict[str, Any]) -> None:
        """Run a call another replica forwarded on the local page, and publish the answer to it."""
        tool_id = str(message.get("tool"))
        reply: dict[str, Any] = {"type": "reply", "id": message.get("id")}
        tool = self.gateway.catalog.tools.get(tool_id)
        timeout = (tool.definition.timeout_s if tool else None) or self.gateway.settings.default_timeout_s
        context = CallContext(**{k: v for k, v in dict(message.get("context") or {}).items()
                                 if k in ("conversation_id", "user", "tool_call_id")})
        try:
            async with asyncio.timeout(timeout):  # the caller gives up then too: do not hold the page's call longer
                reply["value"] = await self.local.execute(str(message.get("session")), tool_id,
                                                          dict(message.get("arguments") or {}), context)
        except ToolError as exc:
            reply["error"] = str(exc)
        except TimeoutError:
            reply["error"] = f"Tool '{tool_id}' did not finish within {timeout:g} s."
        except Exception as exc:  # a bug here must still answer: the caller would otherwise wait for its timeout
            log.exception("bridge: a forwarded call of tool '%s' failed", tool_id)
            reply["error"] = (f"Tool '{tool_id}' failed on the replica holding its browser page "
                              f"({type(exc).__name__}; see replica {self.replica_id}'s log).")
        try:
            await self.gateway.state.publish(channel(str(message.get("reply_to"))), _dumps(reply))
        except StateUnavailable as exc:  # the caller times out; nothing else can be done with the answer
            log.warning("bridge: could not answer a forwarded call of tool '%s': %s", tool_id, exc)

    async def listen(self) -> None:
        """Hear this replica's channel until cancelled, subscribing again whenever the store drops it."""
        assert self.replica_id is not None
        warned = False
        while True:
            try:
                async with self.gateway.state.subscribe(channel(self.replica_id)) as messages:
                    self.listening = True
                    if warned:
                        log.info("bridge: listening again for forwarded browser calls")
                        warned = False
                    async for raw in messages:
                        self.received(raw)
            except StateUnavailable as exc:
                if not warned:
                    log.warning("bridge: cannot listen for forwarded browser calls: %s", exc)
                    warned = True
            finally:
                self.listening = False
                self._fail_waiting()
            await asyncio.sleep(RESUBSCRIBE_S)

    def _fail_waiting(self) -> None:
        """Answers to calls forwarded from here can no longer arrive: end their waits now, not at their timeout."""
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(ToolError("The call was forwarded to the replica holding its browser session, "
                                               "and the shared state was lost before the answer came."))
        self._waiting.clear()

    async def renew(self) -> None:
        """Every heartbeat, give each local session's record another ``ttl_s`` (written again if the store lost
        it), until cancelled."""
        assert self.replica_id is not None
        owner = self.replica_id.encode()
        while True:
            await asyncio.sleep(self.heartbeat_s)
            ids = self.local.session_ids()
            try:
                for start in range(0, len(ids), RENEW_BATCH):
                    await asyncio.gather(*(self.gateway.state.put(RECORDS + i, owner, self.ttl_s)
                                           for i in ids[start:start + RENEW_BATCH]))
            except StateUnavailable:  # the heartbeat reports the store's trouble (/status: degraded)
                continue


class Bridged(Served, Protocol):
    """What ``bridging`` reads of the gateway: the cluster services' view, and the bridge."""

    bridge: ClusterBridge | None  # set by the server that serves browser tools (gateway.server.client)


@contextlib.asynccontextmanager
async def bridging(gateway: Bridged) -> AsyncIterator[ClusterBridge | None]:
    """The cross-replica bridge for the app's lifespan: listens and renews from now on (after the replica
    registry, whose id it takes), stops with the app."""
    bridge = gateway.bridge
    if not isinstance(bridge, ClusterBridge) or gateway.replicas is None:  # no browser routes, or no registry
        yield None
        return
    bridge.replica_id = gateway.replicas.id
    tasks = [asyncio.create_task(bridge.listen(), name="bridge-listen"),
             asyncio.create_task(bridge.renew(), name="bridge-renew")]
    try:
        yield bridge
    finally:
        for task in (*tasks, *bridge._answering):
            task.cancel()
        await asyncio.gather(*tasks, *bridge._answering, return_exceptions=True)
        bridge.replica_id = None


def _dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
