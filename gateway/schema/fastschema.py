"""A compiled check of a definitions file against ``schemas/tool-definitions.schema.json``: jsonschema's verdict,
fast, for the common case.

jsonschema walks the definitions schema through generic keyword dispatch, ``$ref`` lookups and validator copies:
about as long as parsing the file's YAML, which made it half of loading 10,000 tools. ``compile_schema`` turns a
schema (and the files its ``$ref``s name) into nested closures that answer True (certainly valid), False
(certainly invalid) or None (not sure). The loader trusts only True: anything else runs jsonschema, as before,
which also words the errors. Certainty both ways is needed for ``oneOf``, ``anyOf``, ``not`` and ``if``; a doubt
(a float that may be an integer, a keyword the compiler does not know) is None, never a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .jsontypes import BOUNDS, TYPES

Verdict = bool | None
Check = Callable[[Any], Verdict]
_IGNORED = frozenset({"title", "description", "default", "examples", "$comment", "$schema", "$defs", "$id",
                      "deprecated", "readOnly", "writeOnly"})


class NotCompilable(Exception):
    """The schema uses a keyword (or a value) this compiler does not decide."""


def compile_schema(path: Path) -> Check:
    """The check of the schema in the JSON file at ``path``; every check answers None if it is not compilable."""
    try:
        return _Compiler(path.parent).ref(path.name)
    except (NotCompilable, OSError, ValueError, KeyError, re.error):
        return lambda value: None


class _Compiler:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.documents: dict[str, Any] = {}
        self.compiled: dict[str, Check] = {}

    def ref(self, target: str, document: str = "") -> Check:
        """The check of the schema a ``$ref`` names (in ``document``, the file the ``$ref`` is in)."""
        file, _, pointer = target.partition("#")
        key = f"{file or document}#{pointer}"
        if key not in self.compiled:
            holder: list[Check] = []
            self.compiled[key] = lambda value: holder[0](value)  # a recursive $ref meets this until it is compiled
            holder.append(self.schema(self._resolve(file or document, pointer), file or document))
            self.compiled[key] = holder[0]
        return self.compiled[key]

    def _resolve(self, file: str, pointer: str) -> Any:
        if "://" in file or ".." in file:
            raise NotCompilable(file)  # only sibling schema files, as the loader's registry allows
        if file not in self.documents:
            self.documents[file] = json.loads((self.base / file).read_text(encoding="utf-8"))
        node = self.documents[file]
        for part in (p for p in pointer.split("/") if p):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def schema(self, schema: Any, document: str) -> Check:
        if schema is True or schema == {}:
            return lambda value: True
        if schema is False:
            return lambda value: False
        if not isinstance(schema, Mapping):
            raise NotCompilable(repr(schema))
        checks = [self.keyword(keyword, argument, schema, document)
                  for keyword, argument in schema.items() if keyword not in _IGNORED]
        if len(checks) == 1:
            return checks[0]
        return lambda value: _all(check(value) for check in checks)

    def keyword(self, keyword: str, argument: Any, schema: Mapping[str, Any], document: str) -> Check:
        simple = _simple(keyword, argument)
        if simple is not None:
            return simple
        sub = self.schema
        if keyword == "$ref" and isinstance(argument, str):
            return self.ref(argument, document)
        if keyword == "properties" and isinstance(argument, Mapping):
            pairs = [(name, sub(value, document)) for name, value in argument.items()]
            return lambda v: not isinstance(v, dict) or _all(check(v[n]) for n, check in pairs if n in v)
        if keyword == "additionalProperties" and "patternProperties" not in schema:
            known = frozenset(schema.get("properties", {}))
            extra = sub(argument, document)
            return lambda v: not isinstance(v, dict) or _all(extra(x) for k, x in v.items() if k not in known)
        if keyword == "propertyNames":
            names = sub(argument, document)
            return lambda v: not isinstance(v, dict) or _all(names(k) for k in v)
        if keyword == "items":
            item = sub(argument, document)
            return lambda v: not isinstance(v, list) or _all(item(x) for x in v)
        if keyword in ("allOf", "anyOf", "oneOf") and isinstance(argument, list) and argument:
            branches = [sub(branch, document) for branch in argument]
            combine = {"allOf": _all, "anyOf": _any, "oneOf": _one}[keyword]
            return lambda v: combine(branch(v) for branch in branches)
        if keyword == "not":
            negated = sub(argument, document)
            return lambda v: _not(negated(v))
        if keyword == "if":
            condition = sub(argument, document)
            then = sub(schema.get("then", True), document)
            otherwise = sub(schema.get("else", True), document)
            return lambda v: _choose(condition(v), then, otherwise, v)
        if keyword in ("then", "else"):
            return lambda v: True  # decided by "if" (alone they do nothing)
        raise NotCompilable(keyword)


def _simple(keyword: str, argument: Any) -> Check | None:
    """The checks of keywords that need no subschema; None for other keywords."""
    if keyword == "type":
        names = [argument] if isinstance(argument, str) else argument
        if not isinstance(names, list) or not all(name in _TYPES for name in names):
            raise NotCompilable(f"type {argument!r}")
        tests = [_TYPES[name] for name in names]
        return lambda v: _any(test(v) for test in tests)
    if keyword in ("enum", "const"):
        members = argument if keyword == "enum" else [argument]
        if not isinstance(members, list) or not all(type(m) in (str, bool, type(None), int) for m in members):
            raise NotCompilable(keyword)
        return lambda v: _member(v, members)
    if keyword == "required" and isinstance(argument, list):
        names = list(argument)
        return lambda v: not isinstance(v, dict) or all(name in v for name in names)
    if keyword == "pattern" and isinstance(argument, str):
        compiled = re.compile(argument)  # jsonschema matches with Python's re too
        return lambda v: not isinstance(v, str) or compiled.search(v) is not None
    if keyword in _COUNTS and type(argument) is int:
        measure, low = _COUNTS[keyword]
        return lambda v: measure(v) is None or (measure(v) >= argument if low else measure(v) <= argument)
    if keyword in BOUNDS and type(argument) in (int, float):
        compare = BOUNDS[keyword]
        return lambda v: type(v) not in (int, float) or compare(v, argument)
    if keyword == "uniqueItems" and argument is True:
        return _unique
    return None


def _all(verdicts: Any) -> Verdict:
    unsure = False
    for verdict in verdicts:
        if verdict is False:
            return False
        unsure = unsure or verdict is None
    return None if unsure else True


def _any(verdicts: Any) -> Verdict:
    unsure = False
    for verdict in verdicts:
        if verdict is True:
            return True
        unsure = unsure or verdict is None
    return None if unsure else False


def _one(verdicts: Any) -> Verdict:
    found = list(verdicts)
    if None in found:
        return None
    return found.count(True) == 1


def _not(verdict: Verdict) -> Verdict:
    return None if verdict is None else not verdict


def _choose(condition: Verdict, then: Check, otherwise: Check, value: Any) -> Verdict:
    if condition is None:
        return None
    return then(value) if condition else otherwise(value)


def _member(value: Any, members: list[Any]) -> Verdict:
    if any(type(m) is type(value) and m == value for m in members):
        return True
    # jsonschema counts 1.0 equal to 1 (and compares containers deeply): not this compiler's call.
    return None if isinstance(value, float) else False


def _integer(value: Any) -> Verdict:
    if type(value) is int:
        return True
    return None if type(value) is float and value.is_integer() else False  # 1.0 is an integer to JSON Schema


def _unique(value: Any) -> Verdict:
    if not isinstance(value, list):
        return True
    if all(type(x) is str for x in value) or all(type(x) is int for x in value):
        return len(set(value)) == len(value)
    return None  # 1 and 1.0, True and 1, nested values: jsonschema's equality decides


# The shared table, but for a float that may be an integer: this compiler says "not sure" where fastcheck says no.
_TYPES: dict[str, Check] = {**TYPES, "integer": _integer}


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str) else None


def _size(kind: type) -> Callable[[Any], int | None]:
    return lambda value: len(value) if isinstance(value, kind) else None


_COUNTS: dict[str, tuple[Callable[[Any], int | None], bool]] = {
    "minLength": (_length, True), "maxLength": (_length, False),
    "minItems": (_size(list), True), "maxItems": (_size(list), False),
    "minProperties": (_size(dict), True), "maxProperties": (_size(dict), False),
}
