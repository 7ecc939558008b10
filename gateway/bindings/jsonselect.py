"""Selecting a part of a JSON value: a JSON pointer (RFC 6901) or a small path expression.

    /data/items/0/name              JSON pointer: ~1 is '/', ~0 is '~'; a number indexes a list
    $.data.items[0].name            path: .name, ['any key'], [index] (negative counts from the end)
    $.data.items[*].name            [*] or .* takes every item, and the result is the list of what matched

``compile_selector`` checks the syntax once (a load-time problem); ``Selector.select`` then raises
``SelectionMissing`` with a message saying where the value ran out and what was there instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..schema.published import json_type

_PATH_STEP = re.compile(
    r"""\.(?P<name>[A-Za-z_][\w-]*)        # .name
      | \.\*|\[\*\]                        # .* or [*]
      | \[(?P<index>-?\d+)\]               # [3] or [-1]
      | \[(?P<quoted>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\]   # ['key'] or ["key"]
    """,
    re.VERBOSE,
)
_POINTER_INDEX = re.compile(r"0|[1-9]\d*")


class SelectorInvalid(ValueError):
    pass


class SelectionMissing(LookupError):
    pass


@dataclass(frozen=True)
class Step:
    kind: str  # "key", "index", "member" (a pointer token: key of a mapping or index of a list), "all"
    value: str | int | None = None

    def show(self) -> str:
        if self.kind == "all":
            return "[*]"
        if self.kind == "index":
            return f"[{self.value}]"
        if re.fullmatch(r"[A-Za-z_][\w-]*", str(self.value)):
            return f".{self.value}"
        return f"[{json.dumps(self.value)}]"


@dataclass(frozen=True)
class Selector:
    expression: str
    steps: tuple[Step, ...]

    def select(self, value: Any) -> Any:
        """The selected part of ``value``; with a wildcard, the list of every match."""
        where = "$"
        for position, step in enumerate(self.steps):
            if step.kind == "all":
                # Up to the first wildcard a missing member is an error; after it, it only skips that item.
                return list(_all(value, self.steps[position:], where))
            value = _step(value, step, where)
            where += step.show()
        return value


def compile_selector(expression: str) -> Selector:
    if expression == "" or expression.startswith("/"):
        return Selector(expression, _pointer(expression))
    if expression.startswith("$"):
        return Selector(expression, _path(expression))
    raise SelectorInvalid(f"invalid selector {expression!r}: use a JSON pointer (/a/0/b) or a path "
                          "($.a[0].b)")


def _pointer(expression: str) -> tuple[Step, ...]:
    if expression == "":
        return ()
    tokens = expression[1:].split("/")
    for token in tokens:
        if re.search(r"~(?![01])", token):
            raise SelectorInvalid(f"invalid JSON pointer {expression!r}: '~' must be followed by 0 or 1")
    return tuple(Step("member", t.replace("~1", "/").replace("~0", "~")) for t in tokens)


def _path(expression: str) -> tuple[Step, ...]:
    steps = []
    position = 1
    while position < len(expression):
        match = _PATH_STEP.match(expression, position)
        if match is None:
            raise SelectorInvalid(f"invalid path {expression!r} at character {position + 1}: expected .name, "
                                  f"['name'], [index] or [*]")
        if match["name"] is not None:
            steps.append(Step("key", match["name"]))
        elif match["index"] is not None:
            steps.append(Step("index", int(match["index"])))
        elif match["quoted"] is not None:
            steps.append(Step("key", _unquote(match["quoted"])))
        else:
            steps.append(Step("all"))
        position = match.end()
    return tuple(steps)


def _unquote(quoted: str) -> str:
    body = quoted[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def _step(value: Any, step: Step, where: str) -> Any:
    if isinstance(value, dict) and step.kind in ("key", "member"):
        if step.value in value:
            return value[step.value]
        keys = ", ".join(list(value)[:20]) or "none"
        raise SelectionMissing(f"no {step.show()} at {where} (its keys: {keys})")
    if isinstance(value, list) and step.kind in ("index", "member"):
        index = step.value
        if step.kind == "member":
            if not _POINTER_INDEX.fullmatch(str(index)):
                raise SelectionMissing(f"{where} is a list, so {step.value!r} is not an index in it")
            index = int(index)
        if -len(value) <= index < len(value):
            return value[index]
        raise SelectionMissing(f"no item [{index}] at {where} (it has {len(value)} item(s))")
    raise SelectionMissing(f"cannot take {step.show()} of {where}: it is {json_type(value)}")


def _all(value: Any, steps: tuple[Step, ...], where: str):
    if not steps:
        yield value
        return
    step, rest = steps[0], steps[1:]
    if step.kind == "all":
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for item in items:
            yield from _all(item, rest, where + "[*]")
        return
    try:
        item = _step(value, step, where)
    except SelectionMissing:
        return  # under a wildcard, items without the member are skipped, as JSONPath does
    yield from _all(item, rest, where + step.show())
