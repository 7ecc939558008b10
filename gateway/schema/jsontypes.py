"""JSON Schema's type names and bound keywords as Python tests: the one table both fast checks compile from.

``gateway.schema.fastcheck`` (a tool's arguments) and ``gateway.schema.fastschema`` (a definitions file) each
answer for plain schemas without jsonschema; what ``"type": "number"`` or ``"maximum"`` means must not differ
between them. Each test is certain only where it says yes: ``integer`` takes only Python ints (1.0 is an
integer to JSON Schema too, but that is jsonschema's call; fastschema says so with its own ``integer``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) in (int, float),
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
# A bound keyword's comparison of a number with the keyword's argument.
BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda v, a: v >= a,
    "maximum": lambda v, a: v <= a,
    "exclusiveMinimum": lambda v, a: v > a,
    "exclusiveMaximum": lambda v, a: v < a,
}
