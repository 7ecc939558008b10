"""The tool calls of a turn (``gateway.loop.loop``): what the gateway does with each call the model makes, and
the caller's results for the calls it was handed.

Each call is answered by the gateway — run on the server through ``gateway.invoke`` (concurrently, bounded), or
refused with an error result the model can read (unknown name, call limit reached, arguments not JSON) — or
handed back to the caller (a client tool, a caller's own function). Results the caller returns are normalised
like server results and pass out through their tools' filters.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..approvals.gate import gate, needs_approval
from ..catalog.snapshot import Catalog
from ..context import CallContext
from ..errors import ArgumentsInvalid, ToolError
from ..formats import restore_arguments
from ..invoke import filter_result, invoke, json_value, parse_arguments, validate_arguments
from ..results import ToolResult, error_result, normalise
from .handoff import last_user_index
from .messages import CONTENT_BLOCKS, ModelReply, ToolCall, new_call_id, text_of
from .offer import Offer, Offered
from .request import InvalidRequest
from .trace import ToolExecution

# The context of a call by its id and side: "server", or "client" for a result the caller ran.
ContextFor = Callable[[str, str], CallContext]


@dataclass(frozen=True)
class Answer:
    """A call the gateway answers itself: run on the server, or refused with an error result."""

    call: ToolCall
    arguments: Any
    offered: Offered | None = None  # set when the tool is to run
    refusal: str | None = None


@dataclass(frozen=True)
class HandBack:
    call: ToolCall


def plan(call: ToolCall, offer: Offer, calls: Counter[str], tool_format: str) -> Answer | HandBack:
    """What to do with one call: run it, hand it back, or answer it with an error. ``calls`` counts the turn's
    calls by name; this one is counted here."""
    if call.name in offer.caller_tools:
        return HandBack(call)
    offered = offer.tools.get(call.name)
    if offered is None:
        close = difflib.get_close_matches(call.name, offer.names, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return Answer(call, json_value(call.arguments), refusal=(
            f"Unknown tool '{call.name}'.{hint} Available tools: {', '.join(offer.names) or 'none'}."))
    calls[call.name] += 1
    limit = offered.tool.definition.max_calls
    if limit is not None and calls[call.name] > limit:
        return Answer(call, json_value(call.arguments), refusal=(
            f"Tool '{call.name}' may be called at most {limit} time(s) in one turn; it was not run. "
            "Answer with the results you have."))
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError as exc:
        return Answer(call, json_value(call.arguments), refusal=(
            f"Invalid arguments for tool '{call.name}': not valid JSON ({exc}). "
            "Send the arguments as one JSON object."))
    if tool_format == "openai-strict":
        arguments = restore_arguments(offered.tool.input_schema, arguments)
    if offered.side == "client":
        try:  # checked here, so the caller only ever gets calls it can run
            validate_arguments(offered.tool, parse_arguments(offered.tool, arguments))
        except ArgumentsInvalid as exc:
            return Answer(call, arguments, refusal=str(exc))
        return HandBack(call)
    return Answer(call, arguments, offered)


async def approved(catalog: Catalog, plans: list[Answer | HandBack], offer: Offer,
                   context: ContextFor) -> list[Answer | HandBack]:
    """``plans`` with each hand-back of a gateway tool that needs a person's approval (``gateway.approvals``)
    checked first, as ``invoke`` checks a call it runs: the caller only ever gets a call that was approved; one that
    was not is answered to the model with why."""
    checked: list[Answer | HandBack] = []
    for item in plans:
        offered = offer.tools.get(item.call.name) if isinstance(item, HandBack) else None
        if offered is not None and needs_approval(offered.tool, catalog):
            arguments = json.loads(item.call.arguments) if item.call.arguments.strip() else {}
            try:
                await gate(catalog, offered.tool, arguments, context(item.call.id, "client"))
            except ToolError as exc:  # pending, denied, or refused: the model hears it; nothing is handed back
                checked.append(Answer(item.call, arguments, refusal=str(exc)))
                continue
        checked.append(item)
    return checked


async def execute(catalog: Catalog, answers: list[Answer], max_parallel: int,
                  context: ContextFor) -> list[ToolResult]:
    """Results in call order: refusals at once, tool runs concurrently, at most ``max_parallel`` at a time."""
    limit = asyncio.Semaphore(max_parallel)

    async def one(answer: Answer) -> ToolResult:
        if answer.offered is None:
            return error_result(answer.call.name, answer.refusal or "")
        async with limit:
            return await invoke(catalog, answer.offered.tool.id, answer.arguments, context(answer.call.id, "server"))

    return list(await asyncio.gather(*(one(a) for a in answers)))


async def accept_results(catalog: Catalog, messages: list[dict[str, Any]], sent: tuple[dict[str, Any], ...],
                         rounds: int, context: ContextFor) -> list[ToolExecution]:
    """Take the caller's results for the calls of the last assistant message, when ``messages`` end with them
    (in place: ``sent`` is the request's own messages, ``messages`` those with handed-back rounds expanded).

    Results of gateway tools are normalised like server results (JSON, output schema, size cap); a call left
    unanswered is answered with an error, so the model is never sent a call without a result.
    """
    index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") != "tool"), -1)
    last = messages[index] if index >= 0 else {}
    if index < last_user_index(messages) or last.get("role") != "assistant" or not last.get("tool_calls"):
        return []
    calls = {c["id"]: c for c in last["tool_calls"]}
    given = {m["tool_call_id"]: m for m in messages[index + 1:]}
    stray = sorted(set(given) - set(calls))
    if stray:
        raise InvalidRequest(f"messages: tool result(s) for {', '.join(stray)}, which the assistant message "
                             "before them did not call.", "messages")
    mine = {m["tool_call_id"] for m in _trailing_results(sent)}
    received, tail = [], []
    for call_id, call in calls.items():
        message = given.get(call_id)
        name = call["function"]["name"]
        if message is None:
            message = tool_message(call_id, error_result(name, "The caller returned no result for this call."))
        elif call_id in mine:
            message, execution = await _client_result(catalog, call, message, rounds, context)
            received.append(execution)
        tail.append(message)
    messages[index + 1:] = tail
    return received


async def _client_result(catalog: Catalog, call: Mapping[str, Any], message: Mapping[str, Any], rounds: int,
                         context: ContextFor) -> tuple[dict[str, Any], ToolExecution]:
    name, text = call["function"]["name"], text_of(message.get("content"))
    arguments = json_value(call["function"].get("arguments"))
    tool = catalog.tools.get(name)
    if tool is None or "client" not in tool.executors:  # a caller's own function: its result is its business
        result = ToolResult(name, bool(message.get("is_error")), text, text, side="client")
    elif message.get("is_error"):
        result = error_result(name, text, "client")
    else:
        try:
            result = normalise(tool, json_value(text), "client", catalog.settings.max_result_chars)
        except ToolError as exc:
            result = error_result(name, str(exc), "client")
    if tool is not None and "client" in tool.executors:
        # The caller ran a gateway tool: its result passes out through the tool's filters like any other.
        given = arguments if isinstance(arguments, dict) else {}
        result = await filter_result(catalog, name, given, context(call["id"], "client"), result)
    return tool_message(call["id"], result), ToolExecution.of(call["id"], arguments, result, rounds, timed=False)


def tool_message(call_id: str, result: ToolResult) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": result.text}
    if result.is_error:
        message["is_error"] = True  # kept for providers that mark errors (Anthropic); dropped for OpenAI
    if result.content is not None and any(block.get("type") != "text" for block in result.content):
        message[CONTENT_BLOCKS] = result.blocks()
    return message


def _trailing_results(messages: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    results = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.append(message)
    return results


def unique_ids(reply: ModelReply) -> ModelReply:
    """The reply with an id of its own for every call (some servers repeat ids such as 'call_0')."""
    seen: set[str] = set()
    calls = []
    for call in reply.tool_calls:
        if not call.id or call.id in seen:
            call = ToolCall(new_call_id(), call.name, call.arguments)
        seen.add(call.id)
        calls.append(call)
    return dataclasses.replace(reply, tool_calls=tuple(calls))
