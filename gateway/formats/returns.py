"""The return-value schema in words a model reads: ``return_schema: description`` (Semantic Kernel's first way).

A tool's output schema is rendered compactly, TypeScript-like, and appended to its description in every format::

    Returns: {id: integer; name: string; is_on: boolean; brightness: "low" | "medium" | "high"; color?: string}

Optional properties end in ``?``, descriptions follow as ``/* … */``, ``string<date-time>`` carries a format and
``string /^#…$/`` a pattern. A ``$ref`` is written as its name, and each definition it names is written once,
after the rest (``where Node = {…}``), so a recursive schema renders finitely. Keywords a model gains little from
(bounds, ``uniqueItems`` …) are left out: the gateway still checks every result against the whole schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..schema.pointers import NOWHERE, follow

if TYPE_CHECKING:
    from ..catalog.snapshot import Tool

_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def returns_text(tool: Tool) -> str | None:
    """The sentence appended to the tool's description, or None (mode not ``description``, or no schema)."""
    schema = tool.output_schema
    if tool.return_schema != "description" or schema is None:
        return None
    return "Returns: " + render_schema(schema)


def render_schema(schema: Any) -> str:
    """``schema`` (JSON Schema 2020-12) as one compact line; its root description follows a dash."""
    renderer = _Renderer(schema)
    text = renderer.node(schema)
    if isinstance(schema, Mapping) and schema.get("description"):
        text += f" — {_one_line(schema['description'])}"
    done: set[str] = set()
    while renderer.named.keys() - done:  # a definition may name further definitions
        name = min(renderer.named.keys() - done)
        done.add(name)
        text += f"; where {name} = {renderer.node(renderer.named[name])}"
    return text


class _Renderer:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.named: dict[str, Any] = {}  # definitions reached through $ref, by the name written in their place

    def node(self, schema: Any) -> str:
        """One schema as a type expression (its own description is left to whoever places it)."""
        if schema is True or schema == {} or not isinstance(schema, Mapping):
            return "never" if schema is False else "any"
        if isinstance(schema.get("$ref"), str):
            return self._reference(schema["$ref"])
        if "const" in schema:
            return json.dumps(schema["const"], ensure_ascii=False)
        if isinstance(schema.get("enum"), list):
            return " | ".join(json.dumps(value, ensure_ascii=False) for value in schema["enum"])
        for keyword, joiner in (("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")):
            if isinstance(schema.get(keyword), list):
                return joiner.join(self._operand(option) for option in schema[keyword])
        declared = schema.get("type")
        types = [declared] if isinstance(declared, str) else list(declared) if isinstance(declared, list) else []
        if not types:
            types = ["object"] if "properties" in schema else ["array"] if "items" in schema else []
        return " | ".join(self._typed(kind, schema) for kind in types) or "any"

    def _operand(self, schema: Any) -> str:
        """``schema`` where it binds tighter than ``|`` (an array's items, one side of ``&``)."""
        text = self.node(schema)
        return f"({text})" if _alternatives(schema) > 1 else text

    def _typed(self, kind: str, schema: Mapping[str, Any]) -> str:
        if kind == "object":
            return self._object(schema)
        if kind == "array":
            if isinstance(schema.get("prefixItems"), list):
                return "[" + ", ".join(self.node(item) for item in schema["prefixItems"]) + "]"
            return self._operand(schema.get("items", True)) + "[]"
        if kind == "string":
            text = f"string<{schema['format']}>" if isinstance(schema.get("format"), str) else "string"
            return text + (f" /{schema['pattern']}/" if isinstance(schema.get("pattern"), str) else "")
        return kind

    def _object(self, schema: Mapping[str, Any]) -> str:
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not isinstance(properties, Mapping) or not properties:
            return f"{{[key: string]: {self.node(extra)}}}" if isinstance(extra, Mapping) and extra else "object"
        required = set(schema.get("required") or ())
        fields = []
        for name, sub in properties.items():
            key = name if _NAME.match(name) else json.dumps(name, ensure_ascii=False)
            field = f"{key}{'' if name in required else '?'}: {self.node(sub)}"
            if isinstance(sub, Mapping) and sub.get("description"):
                field += f" /* {_one_line(sub['description'])} */"
            fields.append(field)
        return "{" + "; ".join(fields) + "}"

    def _reference(self, ref: str) -> str:
        name = ref.rsplit("/", 1)[-1] if ref.strip("#/") else "Root"
        if name not in self.named:
            self.named[name] = self._resolve(ref)
        return name

    def _resolve(self, ref: str) -> Any:
        """What a local reference (``#/$defs/X``, any JSON pointer) points to; ``any`` when it leads nowhere."""
        target = follow(self.root, ref)
        return True if target is NOWHERE else target


def _alternatives(schema: Any) -> int:
    """How many alternatives ``node`` joins at the top of its rendering of ``schema``."""
    if not isinstance(schema, Mapping) or "$ref" in schema or "const" in schema:
        return 1
    for keyword in ("enum", "anyOf", "oneOf", "allOf", "type"):
        if isinstance(schema.get(keyword), list):
            return len(schema[keyword])
    return 1


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())
