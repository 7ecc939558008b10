"""Hidden arguments: parameters a tool's binding receives that the LLM never sees nor sets.

A ``ToolDefinition.hidden_arguments`` maps a parameter to a fixed value, or to ``{"context": field}`` (a field
of the call's ``CallContext``: the user, the conversation...). The catalog serves the input schema without them
(``visible_schema``) — so arguments naming one fail validation like any unknown argument when the schema is
closed — and wraps the tool's executors (``with_hidden``) so that their values are merged in, over whatever the
arguments hold, before the binding runs. A context field the call lacks is an error result, never an omission:
an upstream that scopes its answers by the hidden user must not be asked without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..context import CallContext, Executor
from ..errors import ToolError


def visible_schema(schema: Mapping[str, Any], hidden: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` without the hidden parameters, in ``properties`` and ``required``."""
    if not hidden:
        return schema
    visible = dict(schema)
    visible["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k not in hidden}
    if "required" in schema:
        visible["required"] = [name for name in schema["required"] if name not in hidden]
    return visible


def with_hidden(executor: Executor, hidden: Mapping[str, Any], tool_id: str) -> Executor:
    """``executor`` with the hidden arguments' values merged into every call's arguments."""
    fixed = {name: value for name, value in hidden.items() if not _from_context(value)}
    contextual = {name: value["context"] for name, value in hidden.items() if _from_context(value)}

    async def execute(arguments: dict[str, Any], context: CallContext) -> Any:
        merged = {**arguments, **fixed}
        for name, field in contextual.items():
            value = getattr(context, field, None)
            if value is None:
                raise ToolError(f"Tool '{tool_id}' needs the call's {field.replace('_', ' ')} (for its parameter "
                                f"'{name}'), and this call has none.")
            merged[name] = value
        return await executor(merged, context)

    return execute


def _from_context(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"context"}
