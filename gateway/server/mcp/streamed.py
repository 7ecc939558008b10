"""A ``tools/call`` of a tool that may talk to its client (``Tool.talks``: progress, log messages, questions), on
the fast path, answered as the SDK's transports answer it:

- a call that says nothing to its client before it ends is answered as JSON, exactly as the fast path answers
  any other call (on 2026-07-28 its error with the table-mapped status);
- from the first thing it says — or once the call has run ``PING_INTERVAL_S`` — the answer is an SSE stream (when
  the client accepts one): each notification an ``event: message``, a comment line every ``PING_INTERVAL_S``
  while the call runs (a proxy's idle-read timeout must not close it), the call's own answer last;
- a question (elicitation, sampling): on 2026-07-28 it ends the call with the multi-round-trip ``input_required``
  result (``channel.Rounds``), as on the SDK's path; on 2025-11-25 it is a request in the stream, whose answer
  the client POSTs on its session (``Questions``: the fast path takes that POST to the waiting call);
- the client closing its answer: on 2026-07-28 that cancels the call (how a call is cancelled on that revision);
  on 2025-11-25 it does not (the spec: a disconnection is not a cancellation; ``notifications/cancelled`` is),
  and the call runs on with nobody to hear it, as on the SDK's path.

A client that accepts JSON only hears no notification: its channel drops them, as the SDK's does, and a 2025 call's
question is a ``ClientCannotAnswer`` error result.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from starlette.types import Receive, Send

from ...client_channel import ClientCannotAnswer, ClientChannel
from .channel import Rounds, not_mcp, question, refused
from .messages import JSON_BYTES, MODERN_ERROR_STATUS, to_json

PING_INTERVAL_S = 15.0  # the SDK's _SSE_PING_INTERVAL
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
               (b"connection", b"keep-alive"), (b"x-accel-buffering", b"no")]
PING = b": ping\r\n\r\n"


def event(message: bytes) -> bytes:
    """One JSON-RPC message (its JSON) as an SSE frame, as the SDK frames it."""
    return b"event: message\r\ndata: " + message + b"\r\n\r\n"


class Answer:
    """The answer of one call: nothing sent yet, or an SSE stream begun (``sse``: whether the client takes one;
    ``modern``: a 2026-07-28 call, whose JSON error takes its table-mapped status)."""

    __slots__ = ("added", "begun", "gone", "lock", "modern", "send", "sse")

    def __init__(self, send: Send, added: Sequence[tuple[bytes, bytes]], sse: bool, modern: bool) -> None:
        self.send, self.added, self.sse, self.modern = send, added, sse, modern
        self.begun = self.gone = False
        self.lock = asyncio.Lock()  # the call's task and the pinger both write: a frame at a time, the head first

    async def frame(self, data: bytes) -> None:
        """Send ``data`` on the stream, beginning it if it is not yet (a client that takes no SSE hears nothing)."""
        if not self.sse:
            return
        async with self.lock:
            if not self.begun:
                self.begun = True
                await self.send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *self.added]})
            await self.send({"type": "http.response.body", "body": data, "more_body": True})

    async def last(self, body: bytes, code: int | None) -> None:
        """The call's own answer (``body``: its JSON-RPC message; ``code``: its error's): the stream's last frame, or
        the whole answer as JSON when no stream began."""
        async with self.lock:
            if self.begun:
                await self.send({"type": "http.response.body", "body": event(body), "more_body": False})
                return
            status = MODERN_ERROR_STATUS.get(code, 200) if self.modern and code is not None else 200
            await self.send({"type": "http.response.start", "status": status, "headers": [
                (b"content-length", b"%d" % len(body)), (b"content-type", JSON_BYTES), *self.added]})
            await self.send({"type": "http.response.body", "body": body})


class Questions:
    """The questions 2025-11-25 calls on the fast path asked their clients and wait on, by (the asking call's key
    name, its session, the question's id): the owner and session are part of the key, so that an answer POSTed by
    another key, or on another session, never reaches a call that is not its own."""

    def __init__(self) -> None:
        self.waiting: dict[tuple[str | None, str, str], asyncio.Future[dict[str, Any] | None]] = {}
        # The SDK numbers its own requests to a session 0, 1, …: these can never be one of them.
        self._ids = (f"gateway-{number}" for number in itertools.count())
        self._watched: set[str] = set()  # sessions whose end ends their questions

    def _ended(self, session_id: str) -> None:
        """The session ended (the client's DELETE, its idle timeout): its questions will never be answered."""
        self._watched.discard(session_id)
        for (_, asked_in, _), future in self.waiting.items():
            if asked_in == session_id and not future.done():
                future.set_result(None)

    def answered(self, owner: str | None, session_id: str, message: dict[str, Any]) -> bool:
        """Give ``message`` (a JSON-RPC response) to the question it answers; False when none waits for it."""
        request_id = message.get("id")
        future = self.waiting.get((owner, session_id, request_id)) if type(request_id) is str else None
        if future is None or future.done():
            return False
        future.set_result(message)
        return True

    async def ask(self, owner: str | None, session_id: str, connection: Any, answer: Answer, what: str,
                  request: Any, result_type: Any) -> dict[str, Any]:
        """Send ``request`` (an SDK request model) on the call's stream and wait for the client's answer, as long as
        the session (the SDK's ``connection`` of it) lasts."""
        if answer.gone:
            raise ClientCannotAnswer(what, " (the client closed this call's stream)")
        if session_id not in self._watched:
            self._watched.add(session_id)
            connection.exit_stack.callback(self._ended, session_id)
        request_id = next(self._ids)
        key = (owner, session_id, request_id)
        self.waiting[key] = asyncio.get_running_loop().create_future()
        try:
            message = {"jsonrpc": "2.0", "id": request_id,
                       **request.model_dump(by_alias=True, mode="json", exclude_none=True)}
            await answer.frame(event(to_json(message)))
            reply = await self.waiting[key]
        finally:
            del self.waiting[key]
        if reply is None:
            raise ClientCannotAnswer(what, " (its session ended before it answered)")
        error = reply.get("error")
        if error is not None:
            said = error.get("message") if type(error) is dict else None
            raise refused(what, said if type(said) is str else str(error))
        try:
            return result_type.model_validate(reply.get("result"), by_name=False).model_dump(
                by_alias=True, mode="json", exclude_none=True)
        except ValidationError as exc:
            raise not_mcp(what, exc) from None


Asker = Callable[[Answer, str, Any, Any], Awaitable[dict[str, Any]]]


class StreamChannel(ClientChannel):
    """The ``ClientChannel`` of a call answered here (see the module's docstring): ``listens`` says whether a log
    message at a level is sent, ``declared`` whether the client declared a capability; a question goes to
    ``rounds`` (2026-07-28) or to ``ask`` (2025-11-25, on the stream)."""

    __slots__ = ("answer", "ask", "declared", "listens", "progress_token", "rounds")

    def __init__(self, answer: Answer, meta: Any, listens: Callable[[str], bool], declared: Callable[[str], bool],
                 rounds: Rounds | None = None, ask: Asker | None = None) -> None:
        self.answer, self.listens, self.declared, self.rounds, self.ask = answer, listens, declared, rounds, ask
        token = meta.get("progressToken") if type(meta) is dict else None
        self.progress_token = token if isinstance(token, (str, int)) and not isinstance(token, bool) else None

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        await self.answer.frame(event(to_json({"jsonrpc": "2.0", "method": method, "params": params})))

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:  # the SDK sends nothing when the request carried no progressToken
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": done}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._notify("notifications/progress", params)

    async def log_message(self, level: str, data: Any, logger: str | None = None) -> None:
        if not self.listens(level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._notify("notifications/message", params)

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        what, request, result_type = question(method, params, self.declared,
                                              reachable=self.rounds is not None or self.answer.sse)
        if self.rounds is not None:
            return self.rounds.answer(what, request, result_type)
        assert self.ask is not None
        return await self.ask(self.answer, what, request, result_type)


async def answered(call: Callable[[StreamChannel], Awaitable[tuple[bytes, int | None]]],
                   channel: Callable[[Answer], StreamChannel], receive: Receive, send: Send,
                   added: Sequence[tuple[bytes, bytes]], sse: bool, modern: bool) -> None:
    """Run ``call`` (its outcome: the JSON-RPC answer's bytes and its error's code) with the channel ``channel``
    makes for its answer, and answer it (see the module's docstring)."""
    answer = Answer(send, added, sse, modern)
    task = asyncio.current_task()
    assert task is not None
    watcher = asyncio.ensure_future(_watch(receive, answer, task if modern else None))
    outcome = None
    try:
        outcome = await call(channel(answer))
    except asyncio.CancelledError:
        if not (modern and answer.gone):
            raise
    finally:
        watcher.cancel()
    if answer.gone:  # the client left: nobody is there to answer
        if modern and task.uncancel() > 0:  # cancelled from elsewhere too (the server stopping)
            raise asyncio.CancelledError
        return
    assert outcome is not None
    await answer.last(*outcome)


async def _watch(receive: Receive, answer: Answer, cancels: asyncio.Task[Any] | None) -> None:
    """Ping the stream every ``PING_INTERVAL_S`` (beginning it), and note when the client disconnects (its body was
    read: the next message is the disconnect), cancelling the call ``cancels``, if any."""
    while True:
        try:
            message = await asyncio.wait_for(receive(), PING_INTERVAL_S)
        except TimeoutError:
            await answer.frame(PING)
            continue
        if message.get("type") == "http.disconnect":
            answer.gone = True
            if cancels is not None:
                cancels.cancel()
            return
