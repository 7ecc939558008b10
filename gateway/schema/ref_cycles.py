"""``$ref`` cycles that no validation can get out of, found before a schema is used.

A ``$ref`` back into the schema is legitimate JSON Schema when the way back passes a keyword that checks a part
of the value (``properties``, ``items``, ...): a tree of nodes whose ``children`` are nodes ends with the value.
A way back made only of keywords that apply to the value itself (``$ref``, ``allOf``/``anyOf``/``oneOf``,
``not``, ``if``/``then``/``else``, ``dependentSchemas``) never ends: ``A: {$ref: B}, B: {$ref: A}``, or a
``$ref`` to itself. jsonschema follows such a cycle until Python's recursion limit, on every call whose value
reaches it, so ``ref_cycle`` finds one once, when the schema is checked.

References are followed as jsonschema follows them: a fragment (``#/$defs/A`` as a JSON pointer, percent- and
``~``-escaped; ``#name`` as a ``$anchor``/``$dynamicAnchor``) in the nearest enclosing schema with an ``$id``,
else in the whole schema. Any other reference is remote, refused elsewhere (``gateway.schema.published.remote_refs``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from .pointers import NOWHERE, follow

Path = tuple[str | int, ...]
# Keywords whose subschemas apply to the value itself: a cycle through these alone never ends.
_IN_PLACE_VALUES = ("not",)
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")
_CONDITIONAL = ("if", "then", "else")
_IN_PLACE = frozenset({*_IN_PLACE_VALUES, *_IN_PLACE_LISTS, *_IN_PLACE_MAPS, "if"})
# Keywords whose subschemas check a part of the value (or nothing, like $defs): walked to find every schema.
_PART_VALUES = ("items", "additionalItems", "additionalProperties", "contains", "propertyNames",
                "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_PART_LISTS = ("prefixItems", "items")
_PART_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_REFS = ("$ref", "$dynamicRef")


def ref_cycle(schema: Any) -> tuple[Path, list[str]] | None:
    """The first cycle of ``$ref``s that never leaves the value it checks: where its first ``$ref`` is in
    ``schema`` and the references, the first repeated at the end (``["#/$defs/A", "#/$defs/B", "#/$defs/A"]``);
    None when there is none."""
    if not _has_refs(schema):  # most schemas: a quick look, not the graph (~6x the time; 10,000 tools are loaded)
        return None
    graph = _Graph(schema)
    state: dict[int, int] = {}  # id(subschema) -> 1 while on the walk's path, 2 when every way out is known
    for start in list(graph.paths):  # a reference may add a schema found nowhere else: reached through it
        if start in state:
            continue
        # An explicit stack, not recursion: a schema may nest deeper than Python's recursion limit.
        path: list[tuple[int, tuple[str, Path] | None]] = [(start, None)]  # (node, the $ref that led here)
        ways: list[Iterator[tuple[int, tuple[str, Path] | None]]] = [graph.in_place(start)]
        state[start] = 1
        while ways:
            step = next(ways[-1], None)
            if step is None:
                state[path.pop()[0]] = 2
                ways.pop()
                continue
            node, ref = step
            if state.get(node) == 1:
                loop = [taken for _, taken in path[[n for n, _ in path].index(node) + 1:]] + [ref]
                refs = [taken for taken in loop if taken is not None]
                return refs[0][1], [refs[-1][0], *(text for text, _ in refs)]
            if node not in state:
                state[node] = 1
                path.append((node, ref))
                ways.append(graph.in_place(node))
    return None


class _Graph:
    """Every subschema of one schema, and the ways from each to the subschemas that apply to the same value."""

    def __init__(self, schema: Any) -> None:
        self.nodes: dict[int, Mapping[str, Any]] = {}
        self.paths: dict[int, Path] = {}
        self.bases: dict[int, Mapping[str, Any]] = {}  # the schema a fragment in this subschema is resolved in
        self.anchors: dict[tuple[int, str], Mapping[str, Any]] = {}
        self._walk(schema, (), schema)

    def _walk(self, schema: Any, at: Path, outer: Any) -> None:
        pending: list[tuple[Any, Path, Any]] = [(schema, at, outer)]
        # Breadth first, in the schema's order (appended to while read): the cycle found is the one written first.
        for node, path, base in pending:
            if not isinstance(node, Mapping) or id(node) in self.nodes:
                continue
            if path and isinstance(node.get("$id"), str):
                base = node
            self.nodes[id(node)], self.paths[id(node)], self.bases[id(node)] = node, path, base
            for keyword in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(keyword), str):
                    self.anchors[(id(base), node[keyword])] = node
            for keyword, child in _children(node):
                pending.append((child, (*path, *keyword), base))

    def in_place(self, key: int) -> Iterator[tuple[int, tuple[str, Path] | None]]:
        """The subschemas that apply to the same value as this one, each with the $ref followed (or None)."""
        node = self.nodes[key]
        for keyword in _REFS:
            ref = node.get(keyword)
            target = self._resolve(ref, self.bases[key]) if isinstance(ref, str) else None
            if isinstance(target, Mapping):
                if id(target) not in self.nodes:  # under a keyword that holds no schemas ("#/x-parts/A"): one now
                    self._walk(target, _pointer(ref), self.bases[key])
                yield id(target), (ref, (*self.paths[key], keyword))
        for (keyword, *_), child in _children(node):
            # then/else apply only beside an if (alone they do nothing)
            if isinstance(child, Mapping) and (keyword in _IN_PLACE or keyword in _CONDITIONAL and "if" in node):
                yield id(child), None

    def _resolve(self, ref: str, base: Mapping[str, Any]) -> Any:
        if not ref.startswith("#"):
            return None
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            return self.anchors.get((id(base), fragment))
        target = follow(base, "#" + fragment)
        return None if target is NOWHERE else target


def _has_refs(schema: Any) -> bool:
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, Mapping):
            if "$ref" in node or "$dynamicRef" in node:
                return True
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def _pointer(ref: str) -> Path:
    return tuple(step.replace("~1", "/").replace("~0", "~") for step in unquote(ref[1:]).split("/") if step)


def _children(node: Mapping[str, Any]) -> Iterator[tuple[tuple[str] | tuple[str, str | int], Any]]:
    """Every subschema directly under ``node``, with the keyword (and name or index) it is under."""
    for keyword in _IN_PLACE_VALUES + _CONDITIONAL + _PART_VALUES:
        if isinstance(node.get(keyword), Mapping):
            yield (keyword,), node[keyword]
    for keyword in _IN_PLACE_LISTS + _PART_LISTS:
        if isinstance(node.get(keyword), list):
            for index, child in enumerate(node[keyword]):
                yield (keyword, index), child
    for keyword in _IN_PLACE_MAPS + _PART_MAPS:
        if isinstance(node.get(keyword), Mapping):
            for name, child in node[keyword].items():
                yield (keyword, name), child
