"""The built-in invocation filters, usable in YAML by their bare name.

- ``attach_output_schema``: the LLM reads a result as ``{"value": ..., "schema": ...}`` (Semantic Kernel's third
  way of telling a model the return-value schema; ``return_schema: result``). The structured value (REST
  ``result``, MCP ``structuredContent``) is unchanged; only the text the LLM reads is wrapped.
- ``redact``: regular expressions (RE2, linear time) and literal strings removed from what a tool answers — its
  text, every string in its structured value and its content blocks (not their base64 data), and its error
  message.
- ``cache``: answers a repeated call of a read-only or idempotent tool from memory for ``ttl_s`` seconds (errors
  and results cut at ``max_result_chars`` are not kept). Semantic Kernel's documentation names caching as the use
  of answering *before* ``next``; in a gateway serving LLM loops, models repeat the same lookups across turns and
  conversations, and each repeat otherwise costs an upstream call.
  (Approval of destructive calls, SK's other flagship sample, needs a human channel that not every surface has.)

Each entry of ``BUILTINS`` takes the spec's ``with`` mapping, checks it (``FilterProblem`` at the key that is
wrong) and returns the filter's async ``run(call, next)``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import re2

from ..content.blocks import rewritten
from ..definitions.offer_rules import compile_pattern
from .call import FilterCall, FilterProblem, Next

Run = Callable[[FilterCall, Next], Awaitable[Any]]


def _keys(config: Mapping[str, Any], allowed: dict[str, tuple[type, ...]], name: str) -> None:
    for key, value in config.items():
        if key not in allowed:
            known = ", ".join(allowed) or "none"
            raise FilterProblem(f"built-in filter '{name}' has no option {key!r} (options: {known})", ["with", key])
        if not isinstance(value, allowed[key]) or (isinstance(value, bool) and bool not in allowed[key]):
            kinds = " or ".join(t.__name__ for t in allowed[key])
            raise FilterProblem(f"built-in filter '{name}': option {key!r} must be {kinds}, got {value!r}",
                                ["with", key])


def attach_output_schema(config: Mapping[str, Any]) -> Run:
    _keys(config, {}, "attach_output_schema")

    async def run(call: FilterCall, next: Next) -> Any:
        result = await next()
        validator = call.tool.output_validator
        if result.is_error or validator is None:
            return result
        text = json.dumps({"value": result.value, "schema": validator.schema}, ensure_ascii=False)
        return replace(result, text=text)

    return run


def redact(config: Mapping[str, Any]) -> Run:
    _keys(config, {"patterns": (list,), "literals": (list,), "replacement": (str,)}, "redact")
    alternatives = []
    for key in ("patterns", "literals"):
        for index, item in enumerate(config.get(key) or []):
            if not isinstance(item, str) or not item:
                raise FilterProblem(f"redact: each of '{key}' must be a non-empty string, got {item!r}",
                                    ["with", key, index])
            if key == "patterns":
                try:
                    compile_pattern(item)
                except ValueError as exc:
                    raise FilterProblem(f"redact: {exc}", ["with", key, index]) from None
                alternatives.append(f"(?:{item})")
            else:
                alternatives.append(re2.escape(item))
    if not alternatives:
        raise FilterProblem("redact needs 'patterns' or 'literals' under 'with'", ["with"] if config else [])
    pattern = compile_pattern("|".join(alternatives))
    replacement = str(config.get("replacement", "[redacted]")).replace("\\", "\\\\")

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(replacement, value)
        if isinstance(value, list):
            return [clean(item) for item in value]
        if isinstance(value, dict):
            return {key: clean(item) for key, item in value.items()}
        return value

    async def run(call: FilterCall, next: Next) -> Any:
        result = await next()
        content = None if result.content is None else rewritten(result.content, clean)
        return replace(result, value=clean(result.value), text=clean(result.text), error=clean(result.error),
                       content=content)

    return run


def cache(config: Mapping[str, Any]) -> Run:
    _keys(config, {"ttl_s": (int, float), "max_entries": (int,), "per": (str,), "any_tool": (bool,)}, "cache")
    ttl = float(config.get("ttl_s", 60))
    size = int(config.get("max_entries", 1000))
    per = config.get("per", "user")
    if ttl <= 0 or size < 1:
        raise FilterProblem("cache: 'ttl_s' must be above 0 and 'max_entries' at least 1", ["with"])
    if per not in ("user", "conversation", "everyone"):
        raise FilterProblem(f"cache: 'per' must be user, conversation or everyone, got {per!r}", ["with", "per"])
    any_tool = bool(config.get("any_tool", False))
    entries: OrderedDict[tuple[Any, ...], tuple[float, Any]] = OrderedDict()

    def cacheable(call: FilterCall) -> bool:
        hints = call.definition.annotations
        return any_tool or bool(hints.get("read_only") or hints.get("idempotent"))

    async def run(call: FilterCall, next: Next) -> Any:
        if not cacheable(call):
            return await next()
        user, conversation = call.context.user, call.context.conversation_id
        # A conversation id is whatever a caller sends: it narrows the user's cache, never crosses users.
        who = {"user": user, "conversation": (user, conversation), "everyone": None}[per]
        # A digest, not the arguments: a caller sending max_entries distinct megabyte-sized arguments must not
        # make the cache hold them all.
        arguments = hashlib.sha256(json.dumps(call.arguments, sort_keys=True, default=str).encode()).digest()
        key = (call.tool_id, call.side, who, arguments)
        now = time.monotonic()
        hit = entries.get(key)
        if hit is not None and hit[0] > now:
            entries.move_to_end(key)
            return hit[1]
        result = await next()
        # A failure is worth trying again; a result cut at max_result_chars may hold any amount of structured
        # value, and max_entries of those would be no memory bound.
        if not result.is_error and not result.truncated:
            entries[key] = (now + ttl, result)
            entries.move_to_end(key)
            while len(entries) > size:
                entries.popitem(last=False)
        return result

    return run


BUILTINS: dict[str, Callable[[Mapping[str, Any]], Run]] = {
    "attach_output_schema": attach_output_schema,
    "redact": redact,
    "cache": cache,
}
