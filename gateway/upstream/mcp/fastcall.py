"""``tools/call`` to a streamable-HTTP upstream as one POST the gateway makes itself, beside the SDK's session.

The official client's call (``ClientSession.call_tool``) hands a request through memory streams to the transport's
task, which posts it, parses the answer into pydantic models and hands it back through the streams: about three
milliseconds of CPU per call on a small machine, the most of what the gateway added to an upstream's tool. Here a
call is one POST on the session's own ``httpx2.AsyncClient`` (its connection pool, the upstream's configured
headers with their secrets, its timeouts), stamped by the session exactly as the SDK stamps its own requests
(``mcp-session-id``, ``mcp-protocol-version``, and on 2026-07-28 the ``_meta`` envelope and ``Mcp-*`` headers),
its answer read as the SDK's transport reads it:

- ``application/json``: one JSON-RPC message, read whole (as the SDK does), checked by the SDK's own envelope
  validator, so an answer the SDK could not read fails here with the SDK's words;
- ``text/event-stream``: events until the response to this request's id, each at most the SDK's event size;
  notifications before it go to the session (``tools/list_changed`` included), a server→client request in the
  stream is answered as the session answers one (its callbacks), posted back on the session; a stream that closes
  before the response is resumed with a GET and ``Last-Event-ID`` after its ``retry:`` delay (SEP-1699);
- HTTP statuses as the transport maps them (202, a JSON-RPC error body at 4xx, even one without an id as
  server-everything sends, 404 with a session: the session is forgotten, so the caller renews it and resends);
  one whose body holds no JSON-RPC error, and 401/403 always, is ``HttpRefused``: the status, the request and
  the upstream's challenge (``gateway.upstream.mcp.refusals``).

A redirect is not followed: nothing ran, and the call goes to the SDK (``Handover``), whose origin rules apply.
Cancelled (the tool's deadline), a 2025-11-25 session is told ``notifications/cancelled`` as the SDK tells it; on
2026-07-28 closing the answer's stream is the signal, as in the SDK. What is done with the result (the SDK's
result validators, output schema, input-required rounds) is the session's (``gateway.upstream.mcp.connection``).

Stdio upstreams, and every other request but ``tools/list`` (``gateway.upstream.mcp.listing``), stay on the SDK.
``TOOL_GATEWAY_MCP_UPSTREAM_FAST=0`` turns this off (tests compare both paths; ``ENABLED`` is read at each call).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from typing import Any, Protocol

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from .config import CREDENTIALS_REFUSED
from .refusals import HttpRefused, refusal
from .wire import Wire, usable

log = logging.getLogger("gateway.mcp_pool")

ENABLED = os.environ.get("TOOL_GATEWAY_MCP_UPSTREAM_FAST", "1") != "0"
MAX_SSE_EVENT_BYTES = 1024 * 1024  # the SDK transport's own bound on one event (DEFAULT_MAX_SSE_EVENT_SIZE)
# A JSON answer is read at most this far (the SDK reads it whole, for as long as the upstream sends): 16 times an SSE
# event's bound, and far past what max_result_chars lets a tool's result keep.
MAX_JSON_BYTES = 16 * MAX_SSE_EVENT_BYTES
MAX_ERROR_BYTES = 65_536  # an error answer is read for its JSON-RPC error only
# Resuming a call's event stream that closed before its answer (SEP-1699), as the SDK's transport does: its wait
# when the stream gave no retry: delay, and its failed attempts in a row before giving up. An upstream's delay is
# taken up to a minute, and a call's stream is resumed MAX_RESUMES times at most, whatever its deadline.
DEFAULT_RETRY_MS = 1000
MAX_RETRY_MS = 60_000
MAX_RESUME_FAILURES = 2
MAX_RESUMES = 100
# A reply or notification whose answer the upstream holds back must not keep a pooled connection for the session's
# read timeout (300 s): a hundred of them would fill the pool the session's own requests need.
COURTESY_TIMEOUT = httpx2.Timeout(10.0)
# No content-coding: an answer is read as it arrives, so a compressed one could inflate (gzip on gzip: 47 KB to
# 16 GiB) in pieces that never give the event loop a turn; one that comes compressed anyway is refused.
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json",
          "accept-encoding": "identity"}
# Ids of our own, far from the SDK session's counter (it starts at 0): a server keys in-flight requests by id.
_ids = itertools.count(1 << 40)


class Handover(Exception):
    """The fast path did not send the call (or the upstream did not take it): the SDK's session makes it."""


class TooLarge(MCPError):
    """The answer is longer than the bound it was read with; nothing more of it was read."""


class Session(Protocol):
    """What a fast call asks of the SDK session it stands beside (``gateway.upstream.mcp.connection``)."""

    session_id: str | None  # the upstream's mcp-session-id (2025-11-25), None on 2026-07-28
    protocol_version: str  # the negotiated revision

    @property
    def modern(self) -> bool: ...  # a 2026-07-28 session (no client→server notifications over HTTP)

    def stamp(self, message: dict[str, Any]) -> dict[str, str]: ...  # fills the message's _meta; its headers

    async def answer(self, request_id: Any, method: str, params: Any) -> dict[str, Any]: ...

    async def notified(self, method: str, params: Any) -> None: ...


class FastCall:
    """``tools/call`` on one HTTP session of one upstream (see the module's docstring)."""

    def __init__(self, http: httpx2.AsyncClient, url: str, session: Session):
        self.http = http
        self.url = url
        self.shown = url.partition("?")[0]  # for log lines: a query may carry a key
        self.session = session
        # Else httpx2: TLS, a proxy, or OAuth (the client's auth flow sets and renews the token).
        self.wire = Wire(http, url) if usable(url) and http.auth is None else None
        self._background: set[asyncio.Task[None]] = set()

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The ``result`` member of the upstream's answer; ``MCPError`` for a JSON-RPC error it answered or an
        answer that could not be read (the SDK's codes and words), ``Handover`` when nothing was sent."""
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def request(self, method: str, params: dict[str, Any], limit: int = MAX_JSON_BYTES) -> dict[str, Any]:
        """``call`` for any request (``gateway.upstream.mcp.listing`` sends tools/list): a JSON answer is read up to
        ``limit`` bytes (past it, ``TooLarge``)."""
        request_id = next(_ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        headers = self._headers(message)
        try:
            body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        except ValueError:  # not JSON (a NaN the SDK would refuse as well): the SDK says so in its words
            raise Handover from None
        try:
            if self.wire is not None and not self.http.cookies:  # cookies: httpx2 keeps and sends its jar
                response = await self.wire.post(body, headers)
            else:
                request = self.http.build_request("POST", self.url, content=body, headers=headers)
                response = await self.http.send(request, stream=True)
            try:
                return await self._answer(response, method, request_id, limit)
            finally:
                await response.aclose()
        except asyncio.CancelledError:
            self._cancelled(request_id)  # an id the upstream never saw is ignored by it (the spec says so)
            raise
        except httpx2.DecodingError as exc:  # a body its content-encoding does not describe
            raise MCPError(code=PARSE_ERROR, message=f"Failed to decode its answer: {exc}") from None
        except (httpx2.TransportError, httpx2.StreamError) as exc:
            # The SDK's transport task dies on these and its session with it: the caller opens a new one.
            log.debug("fast %s to %s failed: %r", method, self.shown, exc)
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None

    def close(self) -> None:
        if self.wire is not None:
            self.wire.aclose()

    def _headers(self, message: dict[str, Any] | None = None) -> dict[str, str]:
        """A request's headers (stamped by the session, which fills its ``_meta``), or, for a message the session
        does not stamp (a reply, a courtesy cancel), the transport's own: the negotiated version."""
        session = self.session
        headers = {**ACCEPT, **(session.stamp(message) if message is not None
                                else {"mcp-protocol-version": session.protocol_version})}
        if session.session_id:
            headers["mcp-session-id"] = session.session_id
        return headers

    async def _answer(self, response: httpx2.Response, method: str, request_id: int, limit: int
                      ) -> dict[str, Any]:
        status = response.status_code
        if 300 <= status < 400 and response.has_redirect_location:
            raise Handover
        if status == 202:
            raise MCPError(code=INVALID_REQUEST, message="server answered a request with 202 Accepted")
        coding = response.headers.get("content-encoding", "").strip().lower()
        if coding not in ("", "identity"):
            raise MCPError(code=PARSE_ERROR, message=f"Its answer is compressed ({coding[:40]!r}), which the gateway "
                                                     "asked it not to be; not read")
        content_type = response.headers.get("content-type", "").lower()
        if status >= 400:
            error = await _error_body(response) if content_type.startswith("application/json") else None
            if error is not None and status not in CREDENTIALS_REFUSED:
                raise MCPError.from_error_data(error)  # the upstream's own words say what happened
            if error is None:
                error = (ErrorData(code=INTERNAL_ERROR, message="Server returned an error response") if status != 404
                         else ErrorData(code=METHOD_NOT_FOUND, message="Not Found") if self.session.session_id is None
                         else ErrorData(code=INVALID_REQUEST, message="Session terminated"))
            # The status, the request and the upstream's challenge, for words that say what happened (the secrets
            # it may echo are the session's header values).
            refused = refusal(response, method, self.http.headers.values())
            raise HttpRefused(refused, error.code, error.message)
        if content_type.startswith("application/json"):
            body = await _read(response, limit)
            try:
                message = (await asyncio.to_thread(_large_message, body) if len(body) > MAX_SSE_EVENT_BYTES
                           else jsonrpc_message_adapter.validate_json(body, by_name=False))
            except ValidationError as exc:
                raise MCPError(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}") from None
            return _result(message, request_id)
        if content_type.startswith("text/event-stream"):
            return await self._events(response, request_id)
        raise MCPError(code=INVALID_REQUEST, message=f"Unexpected content type: {content_type}")

    async def _events(self, response: httpx2.Response, request_id: int) -> dict[str, Any]:
        """The answer in the POST's event stream; a stream that closes before it (an upstream that frees its
        connection, SEP-1699) is resumed as the SDK's transport resumes one: after the stream's ``retry:`` delay,
        a GET with ``Last-Event-ID`` (two failed attempts in a row give up; each resumed stream that ends again
        without the answer starts the count anew, up to ``MAX_RESUMES`` in all; the tool's deadline bounds
        everything)."""
        where = _Position()
        found = await self._read(response, request_id, where)
        failed = resumed = 0
        while found is None:
            if where.last_id is None:
                raise MCPError(code=CONNECTION_CLOSED, message="SSE stream ended without a response")
            if failed >= MAX_RESUME_FAILURES or resumed >= MAX_RESUMES:
                raise MCPError(code=CONNECTION_CLOSED,
                               message="SSE stream ended and reconnection attempts were exhausted")
            await asyncio.sleep(min(where.retry_ms, MAX_RETRY_MS) / 1000)
            resumed += 1
            headers = {**self._headers(), "accept": "text/event-stream", "last-event-id": where.last_id}
            try:
                async with self.http.stream("GET", self.url, headers=headers) as again:
                    if again.status_code != 200 or not again.headers.get("content-type", "").lower().startswith(
                            "text/event-stream"):
                        failed += 1
                        continue
                    failed = 0
                    found = await self._read(again, request_id, where)
            except httpx2.TransportError as exc:
                log.debug("resuming a call's stream from %s failed: %r", self.shown, exc)
                failed += 1
        return found

    async def _read(self, response: httpx2.Response, request_id: int, where: _Position) -> dict[str, Any] | None:
        """The answer if this stream holds it, None if it ends (or breaks) first; ``where`` follows its event ids
        and retry delay."""
        try:
            async for event in httpx2.EventSource(response, max_event_size=MAX_SSE_EVENT_BYTES):
                where.last_id = event.id or where.last_id
                if event.retry is not None:
                    where.retry_ms = event.retry
                if event.event != "message" or not event.data:
                    continue  # a priming event (an id for resuming, no message)
                try:
                    message = jsonrpc_message_adapter.validate_json(event.data, by_name=False)
                except ValidationError as exc:
                    raise MCPError(code=PARSE_ERROR, message=f"Failed to parse SSE message: {exc}") from None
                if isinstance(message, JSONRPCResponse | JSONRPCError):
                    # The SDK takes the first response on a request's own stream as its answer, whatever its id.
                    return _result(message, request_id, matched=True)
                if isinstance(message, JSONRPCNotification):
                    await self.session.notified(message.method, message.params)
                elif isinstance(message, JSONRPCRequest):
                    await self._reply(message)
        except httpx2.SSEError as exc:
            raise MCPError(code=CONNECTION_CLOSED, message=f"SSE stream failed: {exc}") from None
        except httpx2.TransportError as exc:  # it broke rather than ended: resumable all the same
            log.debug("a call's stream from %s broke: %r", self.shown, exc)
        return None

    async def _reply(self, request: JSONRPCRequest) -> None:
        """Answer a server→client request met in the stream as the session answers one, on the session."""
        try:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id,
                                     "result": await self.session.answer(request.id, request.method, request.params)}
        except MCPError as exc:
            reply = {"jsonrpc": "2.0", "id": request.id,
                     "error": exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
        except Exception as exc:  # noqa: BLE001 — the SDK's dispatcher answers any other failure with code 0
            reply = {"jsonrpc": "2.0", "id": request.id, "error": {"code": 0, "message": str(exc)}}
        await self._post(reply)

    def _cancelled(self, request_id: int) -> None:
        """Tell a 2025-11-25 upstream the call was abandoned (the SDK's courtesy cancel); on 2026-07-28 the closed
        stream said it. Sent from a task of its own: the cancelled caller does not wait for it."""
        if self.session.modern:
            return
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": request_id, "reason": "caller cancelled"}}
        task = asyncio.get_running_loop().create_task(self._post(notice))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _post(self, message: dict[str, Any]) -> None:
        """A message that expects no answer (a reply, a notification); a failure is only logged, as the SDK does.
        Its answer's body is not read (the SDK reads none either): an upstream could make it endless."""
        try:
            async with self.http.stream("POST", self.url, content=json.dumps(message).encode(),
                                        headers=self._headers(), timeout=COURTESY_TIMEOUT):
                pass
        except Exception as exc:  # noqa: BLE001 — best effort, like the SDK's courtesy writes
            log.debug("posting %s to %s failed: %r", message.get("method", "a reply"), self.shown, exc)


async def _error_body(response: httpx2.Response) -> ErrorData | None:
    """The JSON-RPC error an error status's body holds, if it holds one. Its id may be missing: server-everything
    answers an unknown session with ``{"jsonrpc": "2.0", "error": {...}}`` (no id), which is no valid message."""
    try:
        data = json.loads(await _read(response, MAX_ERROR_BYTES))
        return ErrorData.model_validate(data["error"]) if isinstance(data, dict) else None
    except (ValueError, KeyError, TypeError, ValidationError, MCPError):  # not a JSON-RPC error, or longer than one
        return None


class _Position:
    """Where a call's event stream got to: its last event id (what a GET resumes from) and retry delay."""

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.retry_ms: float = DEFAULT_RETRY_MS


def _large_message(body: bytes) -> Any:
    """A large answer's message, for a worker thread. Not ``validate_json``: it holds the GIL for the whole parse
    (a second for 9 MB), so the loop would wait all the same; ``json.loads`` takes a fifth of that, and the
    envelope's check does not walk its ``result``."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise MCPError(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}") from None
    return jsonrpc_message_adapter.validate_python(data, by_name=False)


async def _read(response: httpx2.Response, limit: int) -> bytes:
    """The answer's body, decoded; ``TooLarge`` as soon as it passes ``limit`` bytes (nothing more is read)."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise TooLarge(code=INTERNAL_ERROR, message=f"Its answer is larger than {limit} bytes; not read further")
        chunks.append(chunk)
    return b"".join(chunks)


def _result(message: Any, request_id: int, matched: bool = False) -> dict[str, Any]:
    if not matched and getattr(message, "id", None) != request_id:
        raise MCPError(code=PARSE_ERROR, message="Failed to parse JSON response: Invalid JSON: "
                                                 "its id is not the request's")
    if isinstance(message, JSONRPCError):
        raise MCPError.from_error_data(message.error)
    if isinstance(message, JSONRPCResponse):
        return message.result
    raise MCPError(code=PARSE_ERROR, message="Failed to parse JSON response: Invalid JSON: not a response")
