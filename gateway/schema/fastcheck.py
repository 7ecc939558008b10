"""A fast yes for arguments that plainly match a simple input schema; jsonschema decides everything else.

jsonschema walks a schema through generic keyword dispatch, ~35 µs for two numbers: a sixth of a REST call.
Most tool schemas are flat objects of scalars, so ``compile_check`` turns such a schema into nested closures
that answer "valid" in a few microseconds. The closures only ever say yes when the value is certainly valid:
any keyword they do not know makes the schema not compilable, and any doubt (a float for an integer, an enum
value of another type) answers no — which only means jsonschema runs, as it would have, and words the errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .jsontypes import BOUNDS, TYPES

Check = Callable[[Any], bool]
_SCALARS = (str, int, float, bool, type(None))
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly"})


def compile_check(schema: Any) -> Check | None:
    """A check that returns True only for values valid under ``schema``; None when the schema is not simple."""
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, Mapping):
        return None
    checks: list[Check] = []
    for keyword, argument in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        check = _keyword(keyword, argument, schema)
        if check is None:
            return None
        checks.append(check)
    return _all_of(checks)


def lazy_check(schema: Any) -> Check:
    """``compile_check(schema)``, compiled on the first call (many tools are never called): a schema that is not
    simple answers False, so that jsonschema decides, as when there is no fast check."""
    return _LazyCheck(schema)


class _LazyCheck:
    __slots__ = ("compiled", "schema")  # an object, not a closure: 10,000 of them are held

    def __init__(self, schema: Any) -> None:
        self.schema, self.compiled = schema, None

    def __call__(self, value: Any) -> bool:
        if self.compiled is None:
            self.compiled = compile_check(self.schema) or _no
        return self.compiled(value)


def _all_of(checks: list[Check]) -> Check:
    # Loops, not all() over a generator: a generator's frame per call was half the cost of a check.
    if len(checks) == 1:
        return checks[0]

    def check(value: Any) -> bool:
        for each in checks:
            if not each(value):
                return False
        return True

    return check


def _no(value: Any) -> bool:
    return False


def _keyword(keyword: str, argument: Any, schema: Mapping[str, Any]) -> Check | None:
    if keyword == "type":
        names = [argument] if isinstance(argument, str) else argument
        if not isinstance(names, list) or not all(name in TYPES for name in names):
            return None
        tests = [TYPES[name] for name in names]
        if len(tests) == 1:
            return tests[0]
        return lambda v: any(test(v) for test in tests)
    if keyword == "enum" and isinstance(argument, list) and all(type(m) in _SCALARS for m in argument):
        members = list(argument)
        # Exact type match: Python's 1 == True must not let a boolean through an integer enum.
        return lambda v: any(type(m) is type(v) and m == v for m in members)
    if keyword in ("minLength", "maxLength") and type(argument) is int:
        low = keyword == "minLength"
        return lambda v: not isinstance(v, str) or (len(v) >= argument if low else len(v) <= argument)
    if keyword == "pattern" and isinstance(argument, str):
        try:
            compiled = re.compile(argument)
        except re.error:
            return None
        return lambda v: not isinstance(v, str) or compiled.search(v) is not None
    if keyword in BOUNDS and type(argument) in (int, float):
        compare = BOUNDS[keyword]
        return lambda v: type(v) not in (int, float) or compare(v, argument)
    if keyword == "properties" and isinstance(argument, Mapping):
        return _properties(argument)
    if keyword == "required" and isinstance(argument, list):
        names = frozenset(argument)
        return lambda v: not isinstance(v, dict) or v.keys() >= names
    if keyword == "additionalProperties" and isinstance(argument, bool) and "patternProperties" not in schema:
        if argument:
            return lambda v: True
        known = frozenset(schema.get("properties", {}))
        return lambda v: not isinstance(v, dict) or known.issuperset(v)
    if keyword == "items":
        item = compile_check(argument)
        if item is None:
            return None
        return lambda v: not isinstance(v, list) or all(item(x) for x in v)
    if keyword in ("minItems", "maxItems") and type(argument) is int:
        low = keyword == "minItems"
        return lambda v: not isinstance(v, list) or (len(v) >= argument if low else len(v) <= argument)
    return None


def _properties(properties: Mapping[str, Any]) -> Check | None:
    compiled = {name: compile_check(sub) for name, sub in properties.items()}
    if any(check is None for check in compiled.values()):
        return None
    pairs = list(compiled.items())

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for name, each in pairs:
            if name in value and not each(value[name]):
                return False
        return True

    return check
