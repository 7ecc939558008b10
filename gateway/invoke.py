"""``invoke``: the one execution path behind every surface (REST, MCP, the chat loop, the CLI).

    parse arguments → validate against the input schema → choose the side (server / browser)
    → rate limits, if the tool or the caller's key has one (``gateway.state.rate_limits``)
    → the tool's filters, if it has any (``gateway.filters.chains``: settings, toolset, tool; arguments validated again)
    → run the binding under the tool's timeout → normalise the result (``gateway.results``: JSON value + text,
      output schema, cap)

Everything that goes wrong with a call becomes a ``ToolResult`` with ``is_error`` set and a message an LLM can
act on (argument errors are worded by ``argerrors``), whatever the executor raises, ``SystemExit`` and
``KeyboardInterrupt`` included; only an unknown tool id raises (``UnknownTool``), because there is no tool to
answer for, and cancellation propagates, because no one is waiting for the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from .approvals.gate import gate
from .catalog.snapshot import Catalog, Tool
from .context import CallContext
from .definitions.model import Scope
from .errors import ArgumentsInvalid, ToolError, ToolTimeout
from .events import CallActivity, current_call, new_call_id
from .filters.call import Filter, FilterCall
from .results import ToolResult, error_result, normalise
from .schema.argerrors import MAX_ARGUMENT_DEPTH, describe_errors, shape_problem
from .schema.published import json_type
from .state.rate_limits import RateLimited, admit, applying, key_limits

log = logging.getLogger("gateway.invoke")


def parse_arguments(tool: Tool, raw: Any) -> dict[str, Any]:
    """Arguments as a JSON object, a JSON string holding one, or a bare value for a one-parameter tool."""
    if raw is None or raw == "":
        return {}
    value = raw
    text = raw.decode() if isinstance(raw, bytes) else raw
    if isinstance(raw, (str, bytes)):
        value = json_value(text)  # not JSON: a bare string, as the seed's tools accept
    if isinstance(value, dict):
        return value
    single = _single_parameter(tool)
    if single is not None:
        # A bare 42 for a string parameter is the text "42", not a number that fails validation.
        if isinstance(text, str) and not isinstance(value, str) and _accepts_only_strings(tool, single):
            return {single: text}
        return {single: value}
    expected = ", ".join(tool.input_schema.get("properties", {})) or "none"
    raise ArgumentsInvalid(
        f"Invalid arguments for tool '{tool.id}': expected a JSON object with the parameters ({expected}), "
        f"got {json_type(value)}."
    )


def _accepts_only_strings(tool: Tool, name: str) -> bool:
    return tool.input_schema["properties"][name].get("type") == "string"


def _single_parameter(tool: Tool) -> str | None:
    properties = list(tool.input_schema.get("properties", {}))
    return properties[0] if len(properties) == 1 else None


def validate_arguments(tool: Tool, arguments: dict[str, Any]) -> None:
    problem = shape_problem(arguments, MAX_ARGUMENT_DEPTH)
    if problem is not None:
        raise ArgumentsInvalid(f"Invalid arguments for tool '{tool.id}': {problem}.")
    if tool.fast_check is not None and tool.fast_check(arguments):
        return
    errors = sorted(tool.validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if errors:
        lines = describe_errors(errors, tool.input_schema)[:10]
        raise ArgumentsInvalid(f"Invalid arguments for tool '{tool.id}':\n" + "\n".join(f"- {line}" for line in lines))


def json_value(value: Any) -> Any:
    """A string holding JSON is that JSON value; anything else is itself (results from pages and LLM messages)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # nested deeper than the C parser recurses: text, like any non-JSON
        return value


def choose_side(tool: Tool, context: CallContext) -> str:
    """Server unless the tool runs only in the browser, or may and the caller named a browser session."""
    if tool.scope is Scope.CLIENT or (tool.scope is Scope.ALL and context.session and context.side != "server"):
        return "client"
    return "server"


async def invoke(catalog: Catalog, tool_id: str, raw_arguments: Any = None,
                 context: CallContext | None = None) -> ToolResult:
    """Run one call and tell it to the catalog's event stream (``gateway.events``): begun, then ended with its
    outcome; the call id names it in every log line and in an internal error's reference."""
    tool = catalog.get(tool_id)  # UnknownTool propagates: there is no tool to answer for
    context = context or CallContext()
    side = choose_side(tool, context)
    call = CallActivity("call", id=new_call_id(), tool=tool.id, surface=context.surface or "", caller=context.caller,
                        user=context.user, client_id=context.client_id, issuer=context.issuer, version=catalog.version, side=side, arguments=raw_arguments,
                        audit_arguments=tool.definition.audit_arguments, traceparent=context.traceparent,
                        conversation_id=context.conversation_id)
    events = catalog.events
    token = current_call.set(call)
    events.begin(call)
    try:
        result = await _call(catalog, tool, raw_arguments, context, side, call)
    except asyncio.CancelledError:  # the caller went away: the call ends with it
        events.end(call, "cancelled")
        raise
    finally:
        current_call.reset(token)
    result = _with_duration(result, time.perf_counter() - call.started)
    call.result, call.result_chars, call.truncated, call.error = result, len(result.text), result.truncated, result.error
    events.end(call, result.outcome or ("error" if result.is_error else "ok"))
    return result


async def _call(catalog: Catalog, tool: Tool, raw_arguments: Any, context: CallContext, side: str,
                call: CallActivity) -> ToolResult:
    filters = catalog.filters.of(tool.id)
    try:
        arguments = call.arguments = parse_arguments(tool, raw_arguments)
        validate_arguments(tool, arguments)  # before the filters: they see valid arguments
        limits = applying(tool.id, tool.definition.rate_limit, context.caller,
                          catalog.memo("rate_limits:keys", lambda: key_limits(catalog.settings.api_keys)))
        if limits:  # else no await: a call nobody limits never touches the shared state
            await admit(catalog.state, tool.id, limits)
        if tool.definition.approval is not None or catalog.settings.approvals.destructive:
            await gate(catalog, tool, arguments, context)  # before any filter or binding: nothing runs unapproved
        if filters:
            return await _filtered(catalog, FilterCall(tool, arguments, context, side), filters,
                                   partial(_innermost, catalog))
        return await _run(catalog, tool, arguments, context, side)
    except RateLimited as exc:
        return dataclasses.replace(error_result(tool.id, str(exc), side, exc.outcome), retry_after_s=exc.retry_after_s)
    except ToolError as exc:
        return error_result(tool.id, str(exc), side, exc.outcome, getattr(exc, "url", None),
                            getattr(exc, "approval", None))
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # noqa: BLE001 — the tool's own bug, logged by _failure
        return _failure(exc, f"Tool '{tool.id}'", tool.id, side)


def _with_duration(result: ToolResult, duration_s: float) -> ToolResult:
    """``dataclasses.replace(result, duration_s=...)`` without its generic walk of the fields (~6 µs a call): a
    copy, as a filter may answer with a result it keeps."""
    copy = object.__new__(ToolResult)
    copy.__dict__.update(result.__dict__, duration_s=duration_s)
    return copy


def _timeout(tool: Tool, catalog: Catalog) -> float:
    return tool.definition.timeout_s or catalog.settings.default_timeout_s


async def _run(catalog: Catalog, tool: Tool, arguments: dict[str, Any], context: CallContext,
               side: str) -> ToolResult:
    """The binding under the tool's timeout and a call slot, its value normalised; raises what goes wrong."""
    timeout = _timeout(tool, catalog)
    try:
        # Waiting for a free slot counts toward the timeout: a saturated gateway answers, it does not queue
        # forever.
        async with asyncio.timeout(timeout), _call_slots(catalog.settings.max_concurrent_calls):
            value = await tool.executors[side](arguments, context)
    except TimeoutError:
        raise ToolTimeout(f"Tool '{tool.id}' did not finish within {timeout:g} s.") from None
    return normalise(tool, value, side, catalog.settings.max_result_chars)


async def filter_result(catalog: Catalog, tool_id: str, arguments: dict[str, Any], context: CallContext,
                        result: ToolResult) -> ToolResult:
    """A result that came from outside the call path — a client tool the chat loop handed back to its caller, who
    ran it — passed out through the tool's filters, whose ``next()`` returns it (changed arguments change nothing:
    the call has happened)."""
    tool = catalog.get(tool_id)
    filters = catalog.filters.of(tool.id)
    if not filters:
        return result

    async def answered(call: FilterCall) -> ToolResult:
        return result

    try:
        return await _filtered(catalog, FilterCall(tool, arguments, context, result.side), filters, answered)
    except ToolError as exc:  # the onion's timeout
        return error_result(tool.id, str(exc), result.side, exc.outcome)


async def _filtered(catalog: Catalog, call: FilterCall, filters: tuple[Filter, ...],
                    innermost: Callable[[FilterCall], Awaitable[ToolResult]]) -> ToolResult:
    """The onion (``gateway.filters.chains``): each filter's ``next`` runs the filters inside it, innermost the tool.

    Every layer answers a ``ToolResult``, so a filter sees a tool's failure as an error result, and a filter's
    own failure is an error result for the filters around it. The tool's timeout bounds the whole onion.
    """
    tool = call.tool

    async def layer(index: int, call: FilterCall) -> ToolResult:
        if index == len(filters):
            return await _answer(innermost(call), f"Tool '{tool.id}'", call)
        outer = filters[index]

        async def next(given: FilterCall | None = None) -> ToolResult:
            return await layer(index + 1, given or call)

        return await _answer(_result_of(outer, call, next, catalog), f"Filter '{outer.name}' on tool '{tool.id}'",
                             call)

    timeout = _timeout(tool, catalog)
    try:
        async with asyncio.timeout(timeout):
            return await layer(0, call)
    except TimeoutError:
        raise ToolTimeout(f"Tool '{tool.id}' did not finish within {timeout:g} s.") from None


async def _innermost(catalog: Catalog, call: FilterCall) -> ToolResult:
    validate_arguments(call.tool, call.arguments)  # again: a filter may have changed them
    return await _run(catalog, call.tool, call.arguments, call.context, call.side)


async def _result_of(outer: Filter, call: FilterCall, next: Any, catalog: Catalog) -> ToolResult:
    """What a filter returned, as a result: a ``ToolResult`` as it is, any other value as the tool's value."""
    returned = await outer.run(call, next)
    if isinstance(returned, ToolResult):
        return returned
    if returned is None:
        raise TypeError(f"filter '{outer.name}' returned None: return what next() returned, or a value")
    return normalise(call.tool, returned, call.side, catalog.settings.max_result_chars)


async def _answer(step: Awaitable[ToolResult], who: str, call: FilterCall) -> ToolResult:
    """``step``'s result, or the error result of what it raised (cancellation propagates)."""
    try:
        return await step
    except ToolError as exc:
        return error_result(call.tool.id, str(exc), call.side, exc.outcome, getattr(exc, "url", None))
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # noqa: BLE001 — a filter's or the tool's own bug, logged by _failure
        return _failure(exc, who, call.tool.id, call.side)


def _failure(exc: BaseException, who: str, tool_id: str, side: str) -> ToolResult:
    """The tool's (or a filter's) own bug: log its internals, tell the LLM only that it failed. Called from an
    ``except BaseException``: an executor's SystemExit, KeyboardInterrupt or GeneratorExit is a failure too,
    never the server's exit. The reference is the call's id, which its log lines carry too."""
    call = current_call.get()
    reference = call.id if call is not None else new_call_id()
    log.exception("%s failed [ref %s]", who, reference)
    return error_result(tool_id, f"{who} failed with an internal error ({type(exc).__name__}); ref {reference}.", side,
                        "failed")


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[int, asyncio.Semaphore]] = \
    weakref.WeakKeyDictionary()


def _call_slots(limit: int) -> asyncio.Semaphore:
    """The process-wide cap on calls executing at once (``max_concurrent_calls``), one per event loop."""
    loop = asyncio.get_running_loop()
    known = _slots.get(loop)
    if known is None or known[0] != limit:
        known = _slots[loop] = (limit, asyncio.Semaphore(limit))
    return known[1]
