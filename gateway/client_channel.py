"""What a tool may say to the client that called it while it runs: progress, log messages, and questions for its
user (elicitation) or its model (sampling).

A Python tool receives these through context parameters (``gateway.context``): ``progress`` (a coroutine
function), ``log`` (a ``ToolLog``) and ``client`` (the ``ClientChannel`` itself). An MCP-bound tool relays what
its upstream sends during a call through the same channel (``gateway.bindings.mcp``).

The surface that takes a call sets the channel on its ``CallContext``: MCP gives one that speaks on the call's
own SSE stream (``gateway.server.mcp.channel``). Every other caller — REST, chat, the CLI, a JSON-answered MCP
call — gets the silent ``ClientChannel`` here: progress and logs go nowhere, and a question is a ``ToolError``
saying the caller cannot answer it, at once, never a wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ToolError

# The syslog severities MCP logging uses, least severe first (its ``LoggingLevel``).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class ClientCannotAnswer(ToolError):
    """A question for a calling client that cannot answer it: the tool's error result, naming what it asked."""

    def __init__(self, what: str, why: str = "") -> None:
        super().__init__(f"The calling client cannot answer {what}{why}.")


class QuestionAsked(ToolError):
    """A question that ends this round of the call (MCP 2026-07-28's ``input_required``): the client answers it and
    calls again, and the question is asked again then, answered. Not a failure to answer: let it through."""


class ClientChannel:
    """The channel of a caller that hears nothing and answers nothing (see the module's docstring).

    A surface that can talk to its client subclasses it; ``request`` and ``notify`` are what relays use, the
    rest is what a Python tool uses.
    """

    __slots__ = ()

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the client how far the call is (``notifications/progress``, when it asked for progress)."""

    async def log_message(self, level: str, data: Any, logger: str | None = None) -> None:
        """A log message for the client (``notifications/message``), if it listens at ``level``."""

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """A request to the client (``elicitation/create``, ``sampling/createMessage``): its result."""
        raise ClientCannotAnswer(_WHAT.get(method, method))

    async def elicit(self, message: str, requested_schema: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the client's user (form elicitation): ``{"action": "accept"|"decline"|"cancel", "content": {...}}``."""
        return await self.request("elicitation/create", {"mode": "form", "message": message,
                                                         "requestedSchema": dict(requested_schema)})

    async def sample(self, messages: Sequence[Mapping[str, Any]] | str, max_tokens: int,
                     **params: Any) -> dict[str, Any]:
        """Ask the client's model (``sampling/createMessage``); ``messages``: MCP sampling messages, or one user
        text; other parameters (``systemPrompt``, ``temperature``…) as MCP names them. The model's message."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        return await self.request("sampling/createMessage", {**params, "messages": list(messages),
                                                             "maxTokens": max_tokens})


_WHAT = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling"}
SILENT = ClientChannel()


class ToolLog:
    """The ``log`` a Python tool may declare: ``await log.info("...")`` and the other MCP levels, each
    ``(data, logger=None)``; ``data`` is any JSON value."""

    __slots__ = ("channel",)

    def __init__(self, channel: ClientChannel) -> None:
        self.channel = channel

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}: one of {', '.join(LOG_LEVELS)}")
        await self.channel.log_message(level, data, logger)

    async def debug(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("info", data, logger)

    async def notice(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("notice", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("error", data, logger)

    async def critical(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("critical", data, logger)

    async def alert(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("alert", data, logger)

    async def emergency(self, data: Any, logger: str | None = None) -> None:
        await self.channel.log_message("emergency", data, logger)
