"""JSON Schema derived from a Python function's signature (the Semantic Kernel way), and the reverse trip.

``schema_for_function`` describes the parameters the LLM fills; ``schema_for_return`` what the function returns;
``coerce`` turns validated JSON arguments back into what the annotations ask for (Enum members, dataclasses,
dates), so tool functions get real Python values.

Descriptions come from ``Annotated[T, "text"]`` first, then from docstrings (``gateway.schema.docstrings``): a
function's ``Args:`` and ``Returns:``, a class's own text, and its fields' from an ``Attributes:`` section or a
string right below the field.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import enum
import inspect
import sys
import types
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from . import docstrings

_NULL = {"type": "null"}
_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): _NULL,
    dt.datetime: {"type": "string", "format": "date-time"},
    dt.date: {"type": "string", "format": "date"},
    dt.time: {"type": "string", "format": "time"},
}


_ARRAYS = (list, tuple, set, frozenset, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)


class SchemaDerivationError(Exception):
    """The signature uses a type that has no JSON Schema; the message names the parameter and the type."""


def parameters(fn: Callable[..., Any], hidden: Collection[str]) -> list[inspect.Parameter]:
    """The parameters the LLM fills: not context parameters, not *args/**kwargs."""
    return [
        p for p in inspect.signature(fn).parameters.values()
        if p.name not in hidden and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    return get_type_hints(target, include_extras=True)


def _readable_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return type_hints(fn)
    except Exception as exc:  # noqa: BLE001 — a hint naming something undefined fails, lazily, with any error
        raise SchemaDerivationError(f"cannot read type hints: {type(exc).__name__}: {exc}") from None


def schema_for_function(fn: Callable[..., Any], hidden: Collection[str]) -> dict[str, Any]:
    hints = _readable_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    documented = docstrings.descriptions(fn, docstrings.parse(fn))
    for param in parameters(fn, hidden):
        if param.name not in hints:
            raise SchemaDerivationError(
                f"parameter '{param.name}' has no type hint: annotate it, or give the tool an input_schema"
            )
        try:
            schema = schema_for_type(hints[param.name])
        except SchemaDerivationError as exc:
            raise SchemaDerivationError(f"parameter '{param.name}': {exc}") from None
        schema = _described(schema, documented.get(param.name))
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif _is_json(param.default):
            schema = {**schema, "default": _jsonable(param.default)}
        properties[param.name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    return result


def schema_for_return(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The JSON Schema of what ``fn`` returns, from its return annotation (and its docstring's ``Returns:``).

    None when the annotation says nothing a schema could check: missing, ``None``, ``Any`` or ``object``.
    """
    hints = _readable_hints(fn)
    if hints.get("return", type(None)) is type(None):
        return None
    try:
        schema = schema_for_type(hints["return"])
    except SchemaDerivationError as exc:
        raise SchemaDerivationError(f"return annotation: {exc}") from None
    if not schema:
        return None
    returns = docstrings.parse(fn).returns
    return _described(schema, returns.description if returns else None)


def schema_for_type(hint: Any) -> dict[str, Any]:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        # Annotated[T, "description", {"pattern": ...}]: strings describe, mappings add schema keywords.
        schema = dict(schema_for_type(args[0]))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        for extra in (a for a in args[1:] if isinstance(a, Mapping)):
            schema = _constrain(schema, dict(extra))
        return schema
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    if hint is Any or hint is object:
        return {}
    if origin is Literal:
        values = list(args)
        kinds = {type(v) for v in values}
        schema = {"enum": values}
        if len(kinds) == 1 and next(iter(kinds)) in _SCALARS:
            schema = {**_SCALARS[next(iter(kinds))], "enum": values}
        return schema
    if origin in (Union, types.UnionType):
        # anyOf even for plain types, never a `type` list: the form every client reads (MCP Inspector warns on
        # `type: [boolean, "null"]`, and form builders and providers handle one type per schema).
        return {"anyOf": [schema_for_type(a) for a in args]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        schema = schema_for_type(Literal[tuple(member.value for member in hint)])
        return _described(schema, docstrings.parse(hint).description)
    if origin in _ARRAYS or hint in _ARRAYS:
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "prefixItems": [schema_for_type(a) for a in args], "items": False,
                    "minItems": len(args), "maxItems": len(args)}
        schema = {"type": "array", "items": schema_for_type(args[0] if args else Any)}
        if origin in (set, frozenset) or hint in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if args and args[0] is not str:
            raise SchemaDerivationError(f"dict keys must be str for JSON, got {args[0]!r}")
        schema = {"type": "object"}
        if args:
            schema["additionalProperties"] = schema_for_type(args[1])
        return schema
    if is_typeddict(hint):
        hints = _class_hints(hint)
        return _object(hint, hints, required=list(getattr(hint, "__required_keys__", hints)))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = _class_hints(hint)
        required = [f.name for f in dataclasses.fields(hint)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        return _object(hint, {f.name: hints[f.name] for f in dataclasses.fields(hint)}, required)
    raise SchemaDerivationError(f"type {getattr(hint, '__name__', hint)!r} has no JSON Schema equivalent")


def _class_hints(cls: type) -> dict[str, Any]:
    """A class's resolved annotations. typing looks its forward references up in ``sys.modules[cls.__module__]``;
    a definitions directory's module may be gone from there (another directory's build in the same process forgot
    it: the test suite runs many gateways), so then its functions' globals, which are that module's, are used."""
    module = sys.modules.get(cls.__module__)
    if module is None or getattr(module, cls.__name__, None) is not cls:
        globalns = next((f.__globals__ for f in vars(cls).values() if inspect.isfunction(f)), None)
        if globalns is not None:
            return get_type_hints(cls, globalns=globalns, include_extras=True)
    return get_type_hints(cls, include_extras=True)


def _constrain(schema: dict[str, Any], keywords: dict[str, Any]) -> dict[str, Any]:
    """Add keywords to a schema; for an optional ``T | None`` they go to the ``T`` branches (a null stays null)."""
    if _NULL in schema.get("anyOf", ()):
        return {**schema, "anyOf": [o if o == _NULL else {**o, **keywords} for o in schema["anyOf"]]}
    return {**schema, **keywords}


def _object(cls: type, hints: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    docstring = docstrings.parse(cls)
    documented = docstrings.descriptions(cls, docstring)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: _described(schema_for_type(hint), documented.get(name)) for name, hint in hints.items()},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = [name for name in hints if name in required]
    return _described(schema, docstring.description)


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    """``schema`` with ``description`` unless it has one already (``Annotated`` text wins over a docstring)."""
    if not description or not description.strip() or "description" in schema:
        return schema
    return {**schema, "description": description.strip()}


def _is_json(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None), enum.Enum)) or (
        isinstance(value, (list, tuple)) and all(_is_json(v) for v in value)
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def coercer(hint: Any) -> Callable[[Any], Any] | None:
    """``coerce`` for one parameter's hint, decided once per function instead of per call (reading a hint's origin
    and arguments costs ~1 µs a parameter a call): None where it leaves every value as it is (``str``, ``int``,
    ``bool``, ``Any``, unannotated), the int-to-float step for ``float``, else ``coerce`` itself."""
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if any(hint is plain for plain in _AS_IS):
        return None
    if hint is float:
        return _as_float
    return lambda value: coerce(value, hint)


_AS_IS = (str, int, bool, object, Any, type(None))


def _as_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def coerce(value: Any, hint: Any) -> Any:
    """Turn a validated JSON value into what ``hint`` asks for (Enum, dataclass, date, tuple, set)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return coerce(value, args[0])
    if value is None:
        return None
    if origin in (Union, types.UnionType):
        for option in args:
            if option is type(None):
                continue
            try:
                return coerce(value, option)
            except (TypeError, ValueError, KeyError):
                continue
        return value
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return hint(value)
        if hint is float:
            return _as_float(value)
        if hint in (dt.datetime, dt.date, dt.time) and isinstance(value, str):
            return hint.fromisoformat(value.replace("Z", "+00:00") if hint is not dt.date else value)
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            hints = get_type_hints(hint)
            return hint(**{k: coerce(v, hints.get(k, Any)) for k, v in value.items()})
    if origin in (list, tuple, set, frozenset) and isinstance(value, list):
        item = args[0] if args else Any
        items = [coerce(v, item) for v in value]
        return origin(items) if origin is not list else items
    if origin in (dict,) and isinstance(value, dict) and len(args) == 2:
        return {k: coerce(v, args[1]) for k, v in value.items()}
    return value
