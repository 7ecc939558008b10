"""OpenAPI schema objects → self-contained JSON Schema (2020-12) for a tool's input schema.

- Local ``$ref``s (``#/components/...``) are inlined. A reference met again inside itself (a tree, a linked list)
  is expanded ``RECURSION_DEPTH`` levels deep, then stands as ``{"type": "object", "description": "recursive
  <Name>"}``: never infinite. Each operation's schema has a node budget (``MAX_NODES``): past it, references are
  left unexpanded (``"<Name> (not expanded: ...)"``), so a document whose references fan out cannot blow up;
  the whole document has a budget too (``MAX_DOCUMENT_NODES``), so a small document of many operations each
  using such a schema cannot either (past it, a warning, and references stay unexpanded).
- ``allOf``/``oneOf``/``anyOf``/``not`` and the rest of JSON Schema are kept as written.
- OpenAPI 3.0 dialect → JSON Schema: ``nullable: true`` adds ``"null"`` to the type (or to the ``enum``; without a
  type it becomes ``anyOf [..., {"type": "null"}]``), boolean ``exclusiveMinimum``/``exclusiveMaximum`` take
  their bound's value, ``example`` becomes ``examples``; ``discriminator``, ``xml``, ``externalDocs`` and ``x-*``
  extensions (no meaning to a validator) are dropped.
- A reference to another document, or to nothing, is a problem where it is written, and accepts anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RECURSION_DEPTH = 2
MAX_NODES = 20_000
MAX_DOCUMENT_NODES = 100_000  # GitHub's published document (1,223 operations) converts to ~7,000
MAX_NESTING = 64  # schema objects nested without references (YAML's own depth limit is higher)
_DROPPED = frozenset({"discriminator", "xml", "externalDocs", "nullable", "example"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "oneOf", "anyOf", "prefixItems"})
_SCHEMA_VALUES = frozenset({"items", "additionalProperties", "not", "if", "then", "else", "contains",
                            "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems",
                            "contentSchema"})

Path = tuple[str | int, ...]


class Converter:
    """Converts the schemas of one document; ``problems`` collects (path in the document, message)."""

    def __init__(self, document: Any, *, openapi_30: bool):
        self.document = document
        self.openapi_30 = openapi_30
        self.problems: list[tuple[Path, str, str]] = []  # (path, message, severity)
        self._nodes = 0
        self._spent = 0  # nodes of the earlier calls of ``convert``

    def convert(self, schema: Any, path: Path) -> Any:
        """``schema`` (found at ``path``) as JSON Schema; a fresh node budget for each call, within the
        document's."""
        self._spent += self._nodes
        self._nodes = 0
        return self._convert(schema, path, (), 0)

    def resolve(self, value: Any, path: Path) -> tuple[Any, Path]:
        """An OpenAPI object that may be a ``$ref`` (a parameter, a request body): the object and where it is."""
        seen = 0
        while isinstance(value, Mapping) and isinstance(value.get("$ref"), str) and seen < 16:
            target = self._target(value["$ref"], path)
            if target is None:
                return {}, path
            value, path = target
            seen += 1
        return value, path

    def _target(self, ref: str, path: Path) -> tuple[Any, Path] | None:
        if not ref.startswith("#/"):
            message = f"$ref {ref!r} points outside the document: only local references ('#/components/...') are resolved"
            self.problems.append(((*path, "$ref"), message, "error"))
            return None
        steps: list[str | int] = [part.replace("~1", "/").replace("~0", "~") for part in ref[2:].split("/")]
        node = self.document
        for index, step in enumerate(steps):
            if isinstance(node, list) and isinstance(step, str) and step.isdigit():
                steps[index] = step = int(step)
            try:
                node = node[step]
            except (KeyError, IndexError, TypeError):
                self.problems.append(((*path, "$ref"), f"$ref {ref!r} points to nothing in the document", "error"))
                return None
        return node, tuple(steps)

    def _convert(self, schema: Any, path: Path, stack: tuple[str, ...], nesting: int) -> Any:
        if isinstance(schema, bool):  # 3.1 allows true/false schemas
            return schema
        if not isinstance(schema, Mapping):
            self.problems.append((path, f"a schema must be an object, got {type(schema).__name__}", "error"))
            return {}
        self._nodes += 1
        if nesting > MAX_NESTING:
            return {"description": "(not expanded: nested too deep)"}
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._reference(schema, ref, path, stack, nesting)
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROPPED or key.startswith("x-"):
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {name: self._convert(item, (*path, key, name), stack, nesting + 1)
                            for name, item in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self._convert(item, (*path, key, i), stack, nesting + 1) for i, item in enumerate(value)]
            elif key in _SCHEMA_VALUES and isinstance(value, (Mapping, bool)):
                out[key] = self._convert(value, (*path, key), stack, nesting + 1)
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
                bound = "minimum" if key == "exclusiveMinimum" else "maximum"
                if value and bound in schema:
                    out[key] = schema[bound]
            else:
                out[key] = value
        for key in ("exclusiveMinimum", "exclusiveMaximum"):  # the 3.0 boolean form replaced its bound
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if schema.get(key) is True and bound in schema:
                out.pop(bound, None)
        if "example" in schema and "examples" not in schema:
            out["examples"] = [schema["example"]]
        if self.openapi_30 and schema.get("nullable") is True:
            out = _nullable(out)
        return out

    def _reference(self, schema: Mapping[str, Any], ref: str, path: Path, stack: tuple[str, ...],
                   nesting: int) -> Any:
        name = ref.rsplit("/", 1)[-1]
        target = self._target(ref, path)
        if target is None:
            return {"description": f"unresolved reference {ref}"}
        value, where = target
        if stack.count(ref) >= RECURSION_DEPTH:
            kind = value.get("type") if isinstance(value, Mapping) and isinstance(value.get("type"), str) else "object"
            return {"type": kind, "description": f"recursive {name}"}
        if self._nodes > MAX_NODES:
            return {"description": f"{name} (not expanded: the schema is too large)"}
        if self._spent + self._nodes > MAX_DOCUMENT_NODES:
            if self._spent <= MAX_DOCUMENT_NODES:  # said once per document
                self._spent = MAX_DOCUMENT_NODES + 1
                message = (f"the document's schemas expand past {MAX_DOCUMENT_NODES} nodes: from here on "
                           "references are left unexpanded")
                self.problems.append(((*path, "$ref"), message, "warning"))
            return {"description": f"{name} (not expanded: the document's schemas are too large)"}
        resolved = self._convert(value, where, (*stack, ref), nesting + 1)
        # 3.1 allows keywords beside $ref (3.0 ignores them): a description overrides, anything else must hold too.
        siblings = {k: v for k, v in schema.items() if k != "$ref"} if not self.openapi_30 else {}
        notes = {k: siblings.pop(k) for k in ("description", "summary", "title") if k in siblings}
        if siblings:
            resolved = {"allOf": [resolved, self._convert(siblings, path, stack, nesting + 1)]}
        if notes.get("description") and isinstance(resolved, dict):
            resolved = {**resolved, "description": notes["description"]}
        return resolved


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list):
        schema["type"] = [*kind, "null"] if "null" not in kind else kind
    else:
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema
