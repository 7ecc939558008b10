"""The ``ClientChannel`` of a tool call taken by the MCP SDK (``gateway.client_channel``): progress, log messages,
elicitation and sampling, on the call's own stream.

A call that may talk (``Tool.talks``) is answered as SSE when its client accepts that (``mcp.sdk``); on the
2025-11-25 revision the same stream carries the server's requests, whose answers the client POSTs back. A call
answered as JSON has no wire for any of it: its channel says nothing (a notification there would be taken for the
call's answer), and a question is a ``ClientCannotAnswer`` error result at once. So is a question for a client that
did not declare the capability. A 2026-07-28 call's single exchange carries no server request: its question ends the
call with the multi-round-trip ``input_required`` result (``Rounds``), and the client calls again with the answer
(matched by the question's order; ``requestState`` comes back from the client, unsigned, and is trusted as the
client's own answers are).

Log messages honour the session's ``logging/setLevel`` (``LogLevels``) and, on 2026-07-28, the request's own
log-level opt-in (the SDK's ``allowed_log_levels``).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ...client_channel import LOG_LEVELS, ClientCannotAnswer, ClientChannel, QuestionAsked
from ...errors import ToolError

MAX_REQUEST_STATE = 262_144  # characters of requestState read back (the answers of earlier rounds); past it, none

# method -> (what it is called, the client capability it needs, its request model, its result model)
_REQUESTS = {
    "elicitation/create": ("elicitation", "elicitation", mcp_types.ElicitRequest, mcp_types.ElicitResult),
    "sampling/createMessage": ("sampling", "sampling", mcp_types.CreateMessageRequest,
                               mcp_types.CreateMessageResult),
}


class LogLevels:
    """The level each 2025 session asked for with ``logging/setLevel``, forgotten with its connection."""

    def __init__(self) -> None:
        self._levels: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def set(self, connection: Any, level: str) -> None:
        self._levels[connection] = LOG_LEVELS.index(level)

    def allows(self, connection: Any, level: str) -> bool:
        """Whether the session listens at ``level``: every level until it sets one (as the SDK sends)."""
        return LOG_LEVELS.index(level) >= self._levels.get(connection, 0)


class McpChannel(ClientChannel):
    """The channel of one call the SDK took (see the module's docstring)."""

    __slots__ = ("ctx", "levels", "rounds", "streams")

    def __init__(self, ctx: ServerRequestContext[Any], levels: LogLevels, params: Any) -> None:
        self.ctx = ctx
        self.levels = levels
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        # A 2025 call has a stream only when answered as SSE (the transport then lets it send requests); a
        # 2026-07-28 one has an SSE sink or nothing, and the SDK drops what has no sink.
        self.streams = modern or ctx.session.can_send_request
        self.rounds = Rounds(params) if modern else None

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self.streams:  # the SDK sends nothing when the request carried no progressToken
            await self.ctx.session.report_progress(done, total, message)

    async def log_message(self, level: str, data: Any, logger: str | None = None) -> None:
        ctx = self.ctx
        if not self.streams or level not in allowed_log_levels(ctx.protocol_version, ctx.meta) \
                or not self.levels.allows(ctx.session._connection, level):
            return
        params = mcp_types.LoggingMessageNotificationParams(level=level, data=data, logger=logger)
        await ctx.session.send_notification(mcp_types.LoggingMessageNotification(params=params),
                                            related_request_id=ctx.request_id)

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        session = self.ctx.session
        what, request, result_type = question(
            method, params, lambda capability: getattr(session.client_capabilities, capability, None) is not None,
            reachable=self.rounds is not None or session.can_send_request)
        if self.rounds is not None:
            return self.rounds.answer(what, request, result_type)
        try:
            result = await session.send_request(request, result_type,
                                                metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id))
        except MCPError as exc:
            raise refused(what, exc.error.message) from None
        except ValidationError as exc:
            raise not_mcp(what, exc) from None
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def question(method: str, params: Mapping[str, Any], declared: Callable[[str], bool],
             reachable: bool = True) -> tuple[str, Any, Any]:
    """A tool's request to its client, checked before it is asked: what it is called, the request (its model) and
    its result's model. ``ClientCannotAnswer`` for a method the gateway does not relay, a capability the client
    did not declare (``declared``) or a call whose answer cannot carry it (not ``reachable``), ``ToolError`` for
    a request that is not valid MCP."""
    what, capability, request_type, result_type = _REQUESTS.get(method, (method, None, None, None))
    if request_type is None:
        raise ClientCannotAnswer(what, " (the gateway relays elicitation and sampling only)")
    if not declared(capability):
        raise ClientCannotAnswer(what, f" (it did not declare the {capability} capability)")
    if not reachable:
        raise ClientCannotAnswer(what, " (this call's answer has no stream for the question: the client must "
                                       "accept text/event-stream)")
    try:
        request = request_type.model_validate({"method": method, "params": dict(params)}, by_name=False)
    except ValidationError as exc:
        raise ToolError(f"The {what} request is not valid MCP: {first_error(exc)}") from None
    return what, request, result_type


class InputRequired(QuestionAsked):
    """A 2026-07-28 call's question: the call ends, answered ``input_required`` (``Rounds.result``)."""


class Rounds:
    """The questions of one 2026-07-28 call, asked by the multi-round-trip result (see the module's docstring).

    Questions are known by their order in the run (``q0``, ``q1``…): a tool that asks the same questions in the
    same order on every run gets each answer where it asked.
    """

    __slots__ = ("answers", "asked", "pending")

    def __init__(self, params: Any) -> None:
        # The fast path's plain call (``messages.PlainCall``) has neither: a call carrying them is the SDK's model.
        self.answers = _earlier(getattr(params, "request_state", None))
        for key, answer in (getattr(params, "input_responses", None) or {}).items():
            self.answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.asked = 0
        self.pending: dict[str, Any] | None = None

    def answer(self, what: str, request: Any, result_type: Any) -> dict[str, Any]:
        key = f"q{self.asked}"
        self.asked += 1
        if key in self.answers:
            try:  # checked as the client's own answers are: requestState came back from the client
                return result_type.model_validate(self.answers[key], by_name=False).model_dump(
                    by_alias=True, mode="json", exclude_none=True)
            except ValidationError:
                pass  # asked again
        self.pending = {key: request.model_dump(by_alias=True, mode="json", exclude_none=True)}
        raise InputRequired(f"The tool asks the calling client ({what}) and runs again with its answer.")

    def result(self) -> dict[str, Any]:
        return {"resultType": "input_required", "inputRequests": self.pending,
                "requestState": json.dumps(self.answers, separators=(",", ":"))}


def _earlier(state: str | None) -> dict[str, Any]:
    """The answers of earlier rounds, as the client echoed them; anything else is none (the tool asks again)."""
    if not state or len(state) > MAX_REQUEST_STATE:
        return {}
    try:
        answers = json.loads(state)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(answers, dict):
        return {}
    return {key: value for key, value in answers.items() if isinstance(value, dict)}


def refused(what: str, said: str) -> ToolError:
    """The tool's error when its client answered a question with an error (either path: SDK or fast)."""
    return ToolError(f"The calling client refused the {what} request: {said}")


def not_mcp(what: str, exc: ValidationError) -> ToolError:
    """The tool's error when its client's answer to a question is not the result MCP defines for it."""
    return ToolError(f"The calling client's answer to {what} is not valid MCP: {first_error(exc)}")


def first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]
