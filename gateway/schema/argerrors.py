"""What is wrong with a tool's arguments (or result), in lines an LLM can act on: where, what was expected,
what came.

    at $.lights[0].brightness: expected one of "low", "medium", "high", got "very"
    at $.shape.kind: expected one of "circle", "rectangle", "polyline", got "hexagon"
    at $.size: expected integer or "auto", got true

jsonschema reports a failed ``oneOf``/``anyOf`` as one error holding every branch's errors; its ``best_match``
then picks one branch, which for a union told apart by a property (``kind: circle | rectangle``) is often the
wrong one ("'polyline' was expected"). So unions are read here first: the branch the value selects — by its
discriminator, or by its JSON type for unions of scalars — reports its own errors; when no branch is selected,
the allowed values or types are named.

Arguments are also bounded in depth (``MAX_ARGUMENT_DEPTH``), checked before any validator walks them: a
value nested hundreds of levels deep would otherwise exhaust the recursion of the validator or the tool.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .pointers import follow
from .published import json_type

if TYPE_CHECKING:
    from jsonschema import ValidationError

MAX_ARGUMENT_DEPTH = 64
"""How deeply objects and arrays may nest in a call's arguments; the arguments object itself is level 1."""


def shape_problem(value: Any, limit: int) -> str | None:
    """What makes ``value`` no argument a JSON Schema can judge, else None: objects and arrays nested more than
    ``limit`` levels, or a number JSON cannot hold (``1e999`` and ``NaN`` parse as inf and nan in Python, and a
    schema's ``type: number`` accepts them). One walk, level by level, without recursion."""
    if value.__class__ is dict:  # the common case, one level of strings, numbers, booleans and nulls: no walk
        for item in value.values():
            if item.__class__ not in _FLAT and (item.__class__ is not float or not math.isfinite(item)):
                break
        else:
            return None
    level = [value]
    depth = 0
    while level:
        if any(item.__class__ is float and not math.isfinite(item) for item in level):
            return "a number is not finite (JSON has no Infinity or NaN)"
        level = [item for item in level if isinstance(item, (dict, list))]
        if not level:
            return None
        depth += 1
        if depth > limit:
            return f"objects and arrays are nested more than {limit} levels deep (the limit is {limit})"
        level = [child for item in level for child in (item.values() if isinstance(item, dict) else item)]
    return None


_FLAT = frozenset({str, int, bool, type(None)})


def json_path(parts: Any) -> str:
    """``$.lights[0].brightness`` for the parts ``["lights", 0, "brightness"]``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def describe_errors(errors: list[ValidationError], root: Any = None) -> list[str]:
    """One or more lines per error, in order; ``root`` is the whole schema, for local ``$ref``s in unions."""
    return [line for error in errors for line in describe(error, root)]


def describe(error: ValidationError, root: Any = None) -> list[str]:
    if error.validator in ("oneOf", "anyOf") and error.context:
        return _union(error, root)
    return [describe_error(error)]


def describe_error(error: ValidationError) -> str:
    """``at $.lights[0].brightness: expected one of "low", "medium", "high", got "very"``."""
    path = json_path(error.absolute_path)
    validator, expected = error.validator, error.validator_value
    if validator == "required":
        return f"at {path}: missing required property {error.message.split(' is a required')[0]}"
    if validator == "additionalProperties":
        allowed = ", ".join(error.schema.get("properties", {})) or "none"
        extra = ", ".join(repr(k) for k in error.instance if k not in error.schema.get("properties", {}))
        return f"at {path}: unexpected property {extra} (allowed: {allowed})"
    if validator == "type":
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        return f"at {path}: expected {wanted}, got {got(error.instance)}"
    if validator == "enum":
        return f"at {path}: expected one of {_values(expected)}, got {excerpt(error.instance)}"
    if validator == "const":
        return f"at {path}: expected {excerpt(expected)}, got {got(error.instance)}"
    if error.context:  # a union we could not read: its most relevant branch says more than "not valid under any"
        from jsonschema.exceptions import best_match  # an error's wording only: jsonschema is loaded by then

        best = best_match([error])
        if best is not error:
            return describe_error(best)
    return f"at {path}: {error.message}"


def got(value: Any) -> str:
    """What came: ``null``, ``true``, ``false`` on their own (their type says nothing more), else the type and
    an excerpt (``string "one"``, ``integer 5``)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return f"{json_type(value)} {excerpt(value)}"


def excerpt(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _values(values: list[Any]) -> str:
    return ", ".join(excerpt(v) for v in values)


# -- unions -------------------------------------------------------------------------------------------------


def _union(error: ValidationError, root: Any) -> list[str]:
    path = json_path(error.absolute_path)
    resolve = _resolver(root)
    branches = [resolve(branch) for branch in error.validator_value]
    # Each sub-error's schema path starts with the index of the branch it belongs to.
    by_branch: dict[int, list[ValidationError]] = {}
    for sub in error.context or ():
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
    instance = error.instance
    discriminator = _discriminator(branches)
    if discriminator is not None and isinstance(instance, dict):
        name, accepted = discriminator
        allowed = _values(_unique(v for values in accepted for v in values))
        if name not in instance:
            return [f"at {path}: missing required property {name!r} (one of {allowed})"]
        selected = [i for i, values in enumerate(accepted) if any(_same(v, instance[name]) for v in values)]
        if not selected:
            where = json_path([*error.absolute_path, name])
            return [f"at {where}: expected one of {allowed}, got {excerpt(instance[name])}"]
    else:
        selected = [i for i, branch in enumerate(branches) if _admits(branch, instance)]
        if not selected:
            pinned = [_pinned(branch) for branch in branches]
            if all(values is not None for values in pinned):  # a union of constants is an enum
                values = _unique(v for vs in pinned for v in vs)  # type: ignore[union-attr]
                return [f"at {path}: expected one of {_values(values)}, got {excerpt(instance)}"]
            alternatives = [_alternative(branch) for branch in branches]
            if all(alternatives):
                return [f"at {path}: expected {' or '.join(_unique(alternatives))}, got {got(instance)}"]
    if len(selected) == 1 and by_branch.get(selected[0]):
        return describe_errors(by_branch[selected[0]], root)
    return [describe_error(error)]


def _resolver(root: Any) -> Callable[[Any], Any]:
    """Follows a branch's local ``$ref`` (``#/$defs/polyline``) into ``root``; anything else stays as it is."""

    def resolve(branch: Any) -> Any:
        ref = branch.get("$ref") if isinstance(branch, dict) else None
        if not isinstance(ref, str) or root is None:
            return branch
        target = follow(root, ref)
        if not isinstance(target, dict):
            return branch
        return {**target, **{k: v for k, v in branch.items() if k != "$ref"}}

    return resolve


def _discriminator(branches: list[Any]) -> tuple[str, list[list[Any]]] | None:
    """The property every branch pins to a ``const`` or an ``enum`` (``kind``), with the values each accepts."""
    if not branches or not all(isinstance(b, dict) and isinstance(b.get("properties"), dict) for b in branches):
        return None
    for name in branches[0]["properties"]:
        accepted = [_pinned(branch["properties"].get(name)) for branch in branches]
        if all(values is not None for values in accepted):
            return name, accepted  # type: ignore[return-value]
    return None


def _pinned(schema: Any) -> list[Any] | None:
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    return None


def _admits(branch: Any, instance: Any) -> bool:
    """Whether a branch is meant for this kind of value: its ``const``/``enum`` holds it, or its ``type`` is the
    value's type. A branch that says neither may be meant for anything."""
    if not isinstance(branch, dict):
        return branch is not False
    values = _pinned(branch)
    if values is not None:
        return any(_same(v, instance) for v in values)
    types = branch.get("type")
    if types is None:
        return True
    types = [types] if isinstance(types, str) else types
    kind = json_type(instance)
    return (kind in types or (kind == "integer" and "number" in types)
            or (kind == "number" and "integer" in types and float(instance).is_integer()))


def _alternative(branch: Any) -> str | None:
    """A branch in a few words: ``"auto"``, ``one of "fast", "slow"``, ``integer``; None if it says no more."""
    if not isinstance(branch, dict):
        return None
    values = _pinned(branch)
    if values is not None:
        return excerpt(values[0]) if len(values) == 1 else f"one of {_values(values)}"
    types = branch.get("type")
    if isinstance(types, str):
        return types
    if isinstance(types, list) and types:
        return " or ".join(types)
    return None


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == true`` in Python, not in JSON."""
    return type(a) is type(b) and a == b or (
        type(a) in (int, float) and type(b) in (int, float) and a == b)


def _unique(items: Any) -> list[Any]:
    found: list[Any] = []
    for item in items:
        if not any(_same(item, known) for known in found):
            found.append(item)
    return found
