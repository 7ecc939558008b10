"""A 2026-07-28 ``tools/call`` of a tool that may talk to its client (``Tool.talks``: progress, log messages,
questions), on the fast path, answered as the SDK's single-exchange transport answers it
(``mcp.server._streamable_http_modern``):

- a call that says nothing to its client before it ends is answered as JSON, its error with the table-mapped
  status, exactly as the fast path answers any other call;
- from the first thing it says — or once the call has run ``PING_INTERVAL_S`` — the answer is an SSE stream (when
  the client accepts one): each notification an ``event: message``, a comment line every ``PING_INTERVAL_S``
  while the call runs (a proxy's idle-read timeout must not close it), the call's own answer last;
- a question (elicitation, sampling) ends the call with the multi-round-trip ``input_required`` result
  (``channel.Rounds``), as on the SDK's path;
- the client closing its answer cancels the call: on this revision that is how a call is cancelled.

A client that accepts JSON only hears no notification: its channel drops them, as the SDK's does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mcp.server.connection import allowed_log_levels
from starlette.types import Receive, Send

from ...client_channel import ClientChannel
from .channel import Rounds, question
from .messages import JSON_BYTES, MODERN_ERROR_STATUS, to_json

PING_INTERVAL_S = 15.0  # the SDK's _SSE_PING_INTERVAL
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
               (b"connection", b"keep-alive"), (b"x-accel-buffering", b"no")]
PING = b": ping\r\n\r\n"


def event(message: bytes) -> bytes:
    """One JSON-RPC message (its JSON) as an SSE frame, as the SDK frames it."""
    return b"event: message\r\ndata: " + message + b"\r\n\r\n"


class Answer:
    """The answer of one call: nothing sent yet, or an SSE stream begun (``sse``: whether the client takes one)."""

    __slots__ = ("added", "begun", "lock", "send", "sse")

    def __init__(self, send: Send, added: Sequence[tuple[bytes, bytes]], sse: bool) -> None:
        self.send, self.added, self.sse = send, added, sse
        self.begun = False
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
            status = MODERN_ERROR_STATUS.get(code, 200) if code is not None else 200
            await self.send({"type": "http.response.start", "status": status, "headers": [
                (b"content-length", b"%d" % len(body)), (b"content-type", JSON_BYTES), *self.added]})
            await self.send({"type": "http.response.body", "body": body})


class StreamChannel(ClientChannel):
    """The ``ClientChannel`` of a call answered here (see the module's docstring)."""

    __slots__ = ("answer", "capabilities", "levels", "progress_token", "rounds")

    def __init__(self, answer: Answer, version: str, params: Mapping[str, Any], typed: Any, capabilities: Any) -> None:
        meta = params["_meta"]  # the envelope: the fast path takes no 2026-07-28 call without it
        self.answer = answer
        token = meta.get("progressToken")
        self.progress_token = token if isinstance(token, (str, int)) and not isinstance(token, bool) else None
        self.levels = allowed_log_levels(version, meta)
        self.capabilities = capabilities if type(capabilities) is dict else {}
        self.rounds = Rounds(typed)

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
        if level not in self.levels:  # 2026-07-28: only what the request's logLevel opted in to
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._notify("notifications/message", params)

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        what, request, result_type = question(method, params,
                                              lambda capability: self.capabilities.get(capability) is not None)
        return self.rounds.answer(what, request, result_type)


async def answered(call: Callable[[StreamChannel], Awaitable[tuple[bytes, int | None]]], version: str,
                   params: Mapping[str, Any], typed: Any, capabilities: Any, receive: Receive, send: Send,
                   added: Sequence[tuple[bytes, bytes]], sse: bool) -> None:
    """Run ``call`` (its outcome: the JSON-RPC answer's bytes and its error's code) with a ``StreamChannel``, and
    answer it (see the module's docstring). ``capabilities``: the client's, from the request's envelope."""
    answer = Answer(send, added, sse)
    channel = StreamChannel(answer, version, params, typed, capabilities)
    task = asyncio.current_task()
    assert task is not None
    gone: list[bool] = []
    watcher = asyncio.ensure_future(_watch(receive, answer, task, gone))
    outcome = None
    try:
        outcome = await call(channel)
    except asyncio.CancelledError:
        if not gone:
            raise
    finally:
        watcher.cancel()
    if gone:  # the client left (the call was cancelled, or ended first): nobody is there to answer
        if task.uncancel() > 0:  # cancelled from elsewhere too (the server stopping)
            raise asyncio.CancelledError
        return
    assert outcome is not None
    await answer.last(*outcome)


async def _watch(receive: Receive, answer: Answer, task: asyncio.Task[Any], gone: list[bool]) -> None:
    """Ping the stream every ``PING_INTERVAL_S`` (beginning it), and cancel the call when the client disconnects
    (its body was read: the next message is the disconnect)."""
    while True:
        try:
            message = await asyncio.wait_for(receive(), PING_INTERVAL_S)
        except TimeoutError:
            await answer.frame(PING)
            continue
        if message.get("type") == "http.disconnect":
            gone.append(True)
            task.cancel()
            return
