"""``$ref`` inlining with cycle detection, for targets that want one self-contained schema.

Every local reference (``#``, ``#/$defs/X``, ``#/definitions/X``, any JSON pointer into the document) is
replaced by a copy of what it points to, with the reference's sibling keywords laid over it. A reference that
leads back into itself cannot be inlined: the caller chooses whether that is fatal (``Unadaptable``) or whether
the cycle is kept as ``{"$ref": "#/$defs/NAME"}`` with that one definition kept under ``$defs``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from .errors import Unadaptable

# Keywords whose value is a map of names to schemas, a list of schemas, or one schema. Everything else is data
# (enum, const, default, examples …) and is never searched for references.
SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_SINGLES = (
    "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems", "additionalItems",
)
DEFINITIONS = ("$defs", "definitions")
# Identifiers and dialect markers mean nothing once a schema is copied into a provider's declaration.
IDENTIFIERS = ("$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary", "$comment")
# A schema that grows past this while inlining (shared definitions used many times) is too big to offer a model.
MAX_NODES = 20_000


def inline_refs(schema: dict[str, Any], *, keep_cycles: bool) -> dict[str, Any]:
    """A copy of ``schema`` with every ``$ref`` inlined and identifiers (``$schema``, ``$id`` …) stripped.

    With ``keep_cycles`` a recursive reference stays as ``{"$ref": "#/$defs/NAME"}`` and its target is kept,
    itself inlined, under the result's ``$defs``; without it a recursive reference raises ``Unadaptable``.
    """
    return _Inliner(schema, keep_cycles).run()


class _Inliner:
    def __init__(self, root: dict[str, Any], keep_cycles: bool):
        self.root = root
        self.keep_cycles = keep_cycles
        self.kept: dict[str, str] = {}  # recursive ref → its name under $defs
        self.nodes = 0

    def run(self) -> dict[str, Any]:
        result = self.schema(self.root, (), frozenset({"#"}))
        defs: dict[str, Any] = {}
        done: set[str] = set()
        # Kept definitions may themselves reveal more cycles: keep going until none is new.
        while pending := [ref for ref in self.kept if ref not in done]:
            for ref in pending:
                done.add(ref)
                target, path = self.resolve(ref, ())
                defs[self.kept[ref]] = self.schema(target, path, frozenset({ref}))
        if defs:
            result["$defs"] = defs
        return result

    def schema(self, node: Any, path: tuple[str | int, ...], stack: frozenset[str]) -> Any:
        if not isinstance(node, dict):
            return node  # true / false schemas
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise Unadaptable(path, f"the schema has more than {MAX_NODES} nodes once its $refs are inlined")
        ref = node.get("$ref")
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        if isinstance(ref, str):
            if ref in stack:
                if not self.keep_cycles:
                    raise Unadaptable((*path, "$ref"), f"recursive $ref {ref!r}")
                return {"$ref": f"#/$defs/{self.name_for(ref)}"}
            target, target_path = self.resolve(ref, (*path, "$ref"))
            inlined = self.schema(target, target_path, stack | {ref})
            if not isinstance(inlined, dict):
                return inlined if not siblings else self.keywords(siblings, path, stack)
            # The reference's own keywords (a description, a default) win over the target's, as in 2020-12
            # where both apply and the nearer one is what the author meant for this place.
            return {**inlined, **self.keywords(siblings, path, stack)}
        for dynamic in ("$dynamicRef", "$recursiveRef"):
            if dynamic in node:
                raise Unadaptable((*path, dynamic), f"{dynamic} cannot be inlined")
        return self.keywords(node, path, stack)

    def keywords(self, node: dict[str, Any], path: tuple[str | int, ...], stack: frozenset[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in IDENTIFIERS or key in DEFINITIONS:
                continue
            if key in SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {name: self.schema(sub, (*path, key, name), stack) for name, sub in value.items()}
            elif isinstance(value, list) and (key in SCHEMA_LISTS or key == "items"):  # list items: draft-07 tuples
                out[key] = [self.schema(sub, (*path, key, i), stack) for i, sub in enumerate(value)]
            elif key in SCHEMA_SINGLES:
                out[key] = self.schema(value, (*path, key), stack)
            else:
                out[key] = value
        return out

    def resolve(self, ref: str, path: tuple[str | int, ...]) -> tuple[Any, tuple[str | int, ...]]:
        if not ref.startswith("#"):
            raise Unadaptable(path, f"$ref {ref!r} points outside the schema; only local references (#/…) work")
        if ref != "#" and not ref.startswith("#/"):
            raise Unadaptable(path, f"$ref {ref!r} names an anchor; only JSON pointers (#/…) can be inlined")
        node: Any = self.root
        steps: list[str | int] = []
        for raw in ref[2:].split("/") if ref != "#" else []:
            step = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and step in node:
                node = node[step]
            elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
                node = node[int(step)]
            else:
                raise Unadaptable(path, f"$ref {ref!r} does not resolve")
            steps.append(step)
        return node, tuple(steps)

    def name_for(self, ref: str) -> str:
        if ref not in self.kept:
            base = "root" if ref == "#" else unquote(ref.rsplit("/", 1)[-1]) or "def"
            taken = set(self.kept.values())
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            self.kept[ref] = name
        return self.kept[ref]
