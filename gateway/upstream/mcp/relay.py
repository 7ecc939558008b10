"""Relays of what an upstream MCP server sends during a call of one of its tools to the client that made the call:
its progress and log notifications, and its elicitation and sampling requests (whose answers go back up).

A pooled upstream session is shared by every call of its tools, and the SDK's client does not say which call a
message belongs to. The gateway's own ``tools/call`` (``gateway.upstream.mcp.fastcall``) reads the call's answer stream in
the calling task, and the session's handlers (``Relay``, given to its ``mcp.Client``) run there for a message
met in it: so the calling task's channel (``CURRENT``, set by the binding around the call, ``relaying``) is whom
the message is for. A progress token added to the call (``stamp``) makes the upstream send progress at all; the
channel maps it to the calling client's own.

A message met on no call's stream — the session's GET stream (where a TypeScript server sends a request it does
not tie to the call), a call the SDK made itself (stdio upstreams, a handed-over call) — goes to the one call of
that upstream in flight; with several in flight it cannot be placed: a notification is dropped, a request
answered with an error saying so. A request for a caller that cannot answer (REST, chat, the CLI, a client
without the capability) is answered with an error in ``ClientCannotAnswer``'s words, which the upstream's tool
reports.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import mcp_types
from mcp_types import LOG_LEVEL_META_KEY

from ...client_channel import LOG_LEVELS, SILENT, ClientChannel
from ...errors import ToolError

CURRENT: ContextVar[ClientChannel] = ContextVar("gateway.mcp_relay.channel", default=SILENT)
PROGRESS_TOKEN = "gateway-relay"  # one per call's own stream: the stream, not the token, tells calls apart
# upstream (its UpstreamConfig) -> the channels of its calls in flight, for what it sends on no call's stream
_in_flight: dict[Hashable, list[ClientChannel]] = {}


@contextlib.contextmanager
def relaying(channel: ClientChannel, upstream: Hashable) -> Iterator[None]:
    """What ``upstream`` sends during the calls made in this block goes to ``channel``."""
    token = CURRENT.set(channel)
    calls = _in_flight.setdefault(upstream, [])
    calls.append(channel)
    try:
        yield
    finally:
        CURRENT.reset(token)
        calls.remove(channel)
        if not calls and _in_flight.get(upstream) is calls:
            del _in_flight[upstream]


def stamp(message: dict[str, Any]) -> None:
    """Ask for progress and logs on a ``tools/call`` whose caller listens: an upstream sends no progress without
    a token, and on 2026-07-28 no log message without the request's level (every level: the caller's channel
    sends what its client listens to)."""
    if CURRENT.get() is SILENT or message.get("method") != "tools/call":
        return
    params = message.setdefault("params", {})
    meta = params.get("_meta")
    params["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), "progressToken": PROGRESS_TOKEN,
                       LOG_LEVEL_META_KEY: LOG_LEVELS[0]}


class Relay:
    """What one pooled session of ``upstream`` does with what the upstream sends (its ``mcp.Client``'s message
    handler and callbacks; the callbacks' presence declares the elicitation and sampling capabilities)."""

    def __init__(self, upstream: Hashable) -> None:
        self.upstream = upstream

    def channel(self) -> ClientChannel | None:
        """The calling task's channel; met on no call's stream (a GET stream, a call the SDK made), the one call
        of this upstream in flight; None when several are (the message cannot be placed)."""
        current = CURRENT.get()
        if current is not SILENT:
            return current
        calls = _in_flight.get(self.upstream, ())
        return calls[0] if len(calls) == 1 else None if calls else SILENT

    def handling(self, on_message: Callable[[Any], Awaitable[Any]] | None) -> Callable[[Any], Awaitable[None]]:
        """The session's message handler: a progress notification of a relayed call relayed, then ``on_message``."""
        async def handle(message: Any) -> None:
            if isinstance(message, mcp_types.ProgressNotification):
                await self._progressed(message.params)
            if on_message is not None:
                await on_message(message)

        return handle

    def callbacks(self) -> dict[str, Any]:
        return {"logging_callback": self._logged, "elicitation_callback": self._elicit,
                "sampling_callback": self._sample}

    async def _progressed(self, params: mcp_types.ProgressNotificationParams) -> None:
        channel = self.channel()
        if channel is not None and params.progress_token == PROGRESS_TOKEN and math.isfinite(params.progress) \
                and (params.total is None or math.isfinite(params.total)):
            await channel.progress(params.progress, params.total, params.message)

    async def _logged(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        channel = self.channel()
        if channel is not None and params.level in LOG_LEVELS:  # the SDK checked the rest: JSON, in size
            await channel.log_message(params.level, params.data, params.logger)

    async def _elicit(self, context: Any, params: mcp_types.ElicitRequestParams) -> Any:
        return await self._asked("elicitation/create", params, mcp_types.ElicitResult)

    async def _sample(self, context: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
        return await self._asked("sampling/createMessage", params, mcp_types.CreateMessageResult)

    async def _asked(self, method: str, params: Any, result_type: Any) -> Any:
        """The calling client's answer to the upstream's request, or an error the upstream reads (saying why)."""
        channel = self.channel()
        if channel is None:
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=(
                f"The gateway cannot tell which of the calls in flight the {method} request belongs to: send it on "
                "the call's own stream."))
        try:
            answer = await channel.request(method, params.model_dump(by_alias=True, mode="json", exclude_none=True))
        except ToolError as exc:
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=str(exc))
        return result_type.model_validate(answer, by_name=False)
