"""Schema adaptation shared by the provider formats.

Every LLM-facing format starts from ``prepare``: ``$ref`` inlined (refs.py), ``$schema``/``$id`` stripped, every
array given ``items``, and the root made one plain object — providers reject ``anyOf``/``oneOf``/``allOf`` at
the top of a tool's parameters, so alternatives are merged into one object and the choice between them is said
in words. The per-target modules then use the helpers below to say in a description what the target's schema
dialect cannot hold (``pattern: ^#…$``, ``minimum: 0``).

Adapting may loosen a schema, never the gateway's checking: calls are always validated against the original.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import Unadaptable
from .refs import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_SINGLES, inline_refs
from .returns import returns_text

if TYPE_CHECKING:
    from ..catalog.snapshot import Tool

Path = tuple[str | int, ...]

# Keywords that only constrain values of one JSON type; a type union is split along these.
TYPE_KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "string": ("pattern", "format", "minLength", "maxLength", "contentEncoding", "contentMediaType"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"),
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
              "maxContains", "unevaluatedItems"),
    "object": ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
               "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "unevaluatedProperties"),
}
_TYPE_SPECIFIC = frozenset(k for keys in TYPE_KEYWORDS.values() for k in keys)
# What a model can be asked for when a schema allows any value and the target needs a type.
ANY_SCALAR: tuple[Mapping[str, str], ...] = ({"type": "string"}, {"type": "number"}, {"type": "boolean"})


def prepare(schema: Mapping[str, Any], *, keep_cycles: bool) -> dict[str, Any]:
    """The common first step of every LLM format: a self-contained copy whose root is one plain object.

    With ``keep_cycles`` a recursive ``$ref`` is kept (its target under ``$defs``); without, it is ``Unadaptable``.
    """
    inlined = inline_refs(dict(schema), keep_cycles=keep_cycles)
    defs = inlined.pop("$defs", None)
    root = flatten_root(with_items(inlined, ()))
    if defs:
        root["$defs"] = {name: with_items(sub, ("$defs", name)) for name, sub in defs.items()}
    return root


def model_text(tool: Tool, extra: str | None = None) -> str:
    """The description a model reads: ``ai_description`` (falling back to what else describes the tool), then
    ``extra``, then the return-value schema when the tool's ``return_schema`` is ``description``."""
    d = tool.definition
    parts = [d.ai_description or d.user_description or d.name or tool.id, extra, returns_text(tool)]
    return "\n\n".join(part for part in parts if part)


def tool_description(tool: Tool, prepared: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What the model reads about the tool: its ``ai_description``, the parameters' own description, and what it
    returns (``model_text``).

    The root schema's description (with what ``flatten_root`` said there) moves up into the tool's description,
    the one text every provider is sure to show its model.
    """
    root = dict(prepared)
    return model_text(tool, root.pop("description", None)), root


def check_parameter_names(schema: Mapping[str, Any], allowed: re.Pattern[str], target: str) -> None:
    """``Unadaptable`` when a parameter (a root property) has a name ``target`` does not accept."""
    for name in schema.get("properties") or {}:
        if not allowed.match(name):
            raise Unadaptable(("properties", name), f"{target} does not accept the parameter name {name!r} "
                                                    f"(allowed: {allowed.pattern})")


def types_of(node: Mapping[str, Any]) -> list[str]:
    """The node's ``type`` as a list (empty when absent)."""
    declared = node.get("type")
    if isinstance(declared, str):
        return [declared]
    return list(declared) if isinstance(declared, list) else []


def implied_types(node: Mapping[str, Any]) -> list[str]:
    """The node's types, or those its keywords imply when ``type`` is absent (enum values, properties, items)."""
    if "type" in node:
        return types_of(node)
    if "enum" in node:
        return value_types(node["enum"])
    if "properties" in node or "required" in node:
        return ["object"]
    if "items" in node:
        return ["array"]
    return []


def map_subschemas(node: Mapping[str, Any], path: Path, fn: Callable[[Any, Path], Any]) -> dict[str, Any]:
    """A copy of ``node`` with ``fn(subschema, path)`` applied to each direct subschema."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: fn(sub, (*path, key, name)) for name, sub in value.items()}
        elif key in SCHEMA_LISTS and isinstance(value, list):
            out[key] = [fn(sub, (*path, key, i)) for i, sub in enumerate(value)]
        elif key in SCHEMA_SINGLES:
            out[key] = fn(value, (*path, key))
        else:
            out[key] = value
    return out


def with_items(node: Any, path: Path) -> Any:
    """Every array schema given ``items`` (providers reject arrays without): the tuple's members, or anything."""
    if not isinstance(node, Mapping):
        return node
    out = dict(node)
    items = out.get("items")
    if isinstance(items, list):  # draft-07 tuple form
        out["items"] = {"anyOf": items} if items else {}
    elif items is None and "array" in types_of(out):
        prefix = out.get("prefixItems")
        out["items"] = {"anyOf": list(prefix)} if isinstance(prefix, list) and prefix else {}
    return map_subschemas(out, path, with_items)


def flatten_root(root: dict[str, Any]) -> dict[str, Any]:
    """The root as one object without ``allOf``/``anyOf``/``oneOf``: parts merged, alternatives described."""
    root = flatten_object(root, ())
    root["type"] = "object"
    return root


def flatten_object(node: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """An object schema with its ``allOf`` parts merged in and its ``anyOf``/``oneOf`` alternatives merged into
    one object, the choice said in words (for roots, and for targets without combinators beside properties)."""
    out = dict(node)
    if "allOf" in out:
        out = merge_all_of([{k: v for k, v in out.items() if k != "allOf"}, *out["allOf"]], (*path, "allOf"))
    for key in ("anyOf", "oneOf"):
        if key in out:
            rest = {k: v for k, v in out.items() if k != key}
            out = merge_alternatives(rest, out[key], key)
    return out


def normalise(node: Any, path: Path) -> dict[str, Any]:
    """A subschema made ready for targets without ``allOf``, ``oneOf`` or ``const`` (strict mode, Gemini).

    ``false`` is refused; an object's alternatives and ``allOf`` parts are merged; ``oneOf`` is read as ``anyOf``
    (it accepts whatever oneOf does, and the gateway still checks the original); ``const`` is a one-value enum.
    """
    if node is False:
        raise Unadaptable(path, "a schema that accepts nothing (false)")
    out = dict(node) if isinstance(node, Mapping) else {}
    if ("anyOf" in out or "oneOf" in out) and ("properties" in out or types_of(out) == ["object"]):
        out = flatten_object(out, path)  # neither target takes anyOf beside properties
    elif "allOf" in out:
        out = merge_all_of([{k: v for k, v in out.items() if k != "allOf"}, *out["allOf"]], (*path, "allOf"))
    if "oneOf" in out:
        if "anyOf" in out:
            raise Unadaptable(path, "anyOf and oneOf on one schema")
        out["anyOf"] = out.pop("oneOf")
    if "anyOf" in out and "type" in out:
        # Alternatives that only add constraints ({"pattern": …}) take the type they constrain.
        out["anyOf"] = [{"type": out["type"], **sub} if isinstance(sub, Mapping) and not {"type", "$ref"} & set(sub)
                        else sub for sub in out["anyOf"]]
    if "const" in out:
        out["enum"] = [out.pop("const")]
    return out


def merge_alternatives(base: dict[str, Any], variants: list[Any], key: str) -> dict[str, Any]:
    """One object accepting what any object alternative accepts; which arguments go together is said in words."""
    objects = []
    for i, variant in enumerate(variants):
        if variant is True or variant == {}:
            continue  # allows anything: adds no property and no requirement
        if isinstance(variant, Mapping) and "allOf" in variant:
            variant = merge_all_of([{k: v for k, v in variant.items() if k != "allOf"}, *variant["allOf"]],
                                   (key, i, "allOf"))
        if isinstance(variant, Mapping) and (not types_of(variant) or "object" in types_of(variant)):
            objects.append(variant)
    if not objects:
        return base
    out = dict(base)
    properties = dict(base.get("properties") or {})
    own = set(properties)
    for variant in objects:
        for name, sub in (variant.get("properties") or {}).items():
            if name not in properties:
                properties[name] = sub
            elif name in own:
                # The object's own declaration stands: a variant narrowing it (a tagged union's `kind: {const}`)
                # applies to that variant only, and merging every variant's narrowing would admit none of them.
                continue
            elif properties[name] != sub:
                previous = properties[name]
                choices = previous["anyOf"] if set(previous) == {"anyOf"} else [previous]
                properties[name] = {"anyOf": [*choices, sub]} if sub not in choices else previous
    if properties:
        out["properties"] = properties
    if all(variant.get("additionalProperties") is False for variant in objects) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    sets = [list(variant.get("required") or []) for variant in objects]
    common = [name for name in sets[0] if all(name in s for s in sets[1:])]
    required = list(base.get("required") or [])
    required += [name for name in common if name not in required]
    if required:
        out["required"] = required
    choices = [_alternative(variant, [n for n in s if n not in common]) for variant, s in zip(objects, sets, strict=True)]
    if len(objects) > 1 and any(choices):
        word = "exactly one" if key == "oneOf" else "at least one"
        out = describe(out, [f"Give {word} of: " + " | ".join(c or "(nothing more)" for c in choices)])
    return out


def _alternative(variant: Mapping[str, Any], required: list[str]) -> str:
    words = " and ".join(required)
    text = variant.get("description") or variant.get("title")
    return f"{words} ({text})" if words and text else words or str(text or "")


_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains")


def merge_all_of(parts: Iterable[Any], path: Path) -> dict[str, Any]:
    """One schema holding every part's constraints (``allOf`` flattened), or ``Unadaptable`` when they clash."""
    out: dict[str, Any] = {}
    for part in parts:
        if part is True:
            continue
        if not isinstance(part, Mapping):
            raise Unadaptable(path, "allOf has a part that accepts nothing")
        if "allOf" in part:
            part = merge_all_of([{k: v for k, v in part.items() if k != "allOf"}, *part["allOf"]], path)
        for key, value in part.items():
            if key not in out:
                out[key] = value
            elif out[key] == value:
                continue
            elif key == "properties":
                merged = dict(out[key])
                for name, sub in value.items():
                    merged[name] = merge_all_of([merged[name], sub], (*path, key, name)) if name in merged else sub
                out[key] = merged
            elif key == "required":
                out[key] = [*out[key], *(name for name in value if name not in out[key])]
            elif key == "description":
                out[key] = f"{out[key]} {value}"
            elif key == "type":
                both = _common_types(types_of(out), types_of(part))
                if not both:
                    raise Unadaptable(path, f"allOf parts disagree on the type ({out[key]!r} and {value!r})")
                out[key] = both[0] if len(both) == 1 else both
            elif key == "enum":
                out[key] = [v for v in out[key] if v in value]
            elif key in _LOWER_BOUNDS:
                out[key] = max(out[key], value)
            elif key in _UPPER_BOUNDS:
                out[key] = min(out[key], value)
            elif key == "additionalProperties" and (out[key] is False or value is False):
                out[key] = False
            else:
                out = describe(out, [note(key, value)])
    return out


def _common_types(first: list[str], second: list[str]) -> list[str]:
    common: list[str] = []
    for t in first:
        if t in second:
            both = t
        elif t in ("integer", "number") and ("integer" in second or "number" in second):
            both = "integer"  # an integer is a number: {number} ∩ {integer} is {integer}
        else:
            continue
        if both not in common:
            common.append(both)
    return common


def unspoken(keyword: str) -> bool:
    """Keywords not worth a model's attention when a target drops them: annotations and ``x-`` extensions."""
    return keyword in ("readOnly", "writeOnly", "$comment") or keyword.startswith("x-")


def note(keyword: str, value: Any) -> str:
    """How a constraint the target cannot hold is said in the description: ``minimum: 0``, ``pattern: ^#…$``."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return f"{keyword}: {shown}"


def describe(node: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """``node`` with ``notes`` appended to its description."""
    out = dict(node)
    if notes:
        text = "; ".join(notes)
        current = out.get("description")
        out["description"] = f"{current} ({text})" if current else text
    return out


def accepts_null(node: Any) -> bool:
    """Whether ``null`` is valid for ``node`` (judged on its keywords; a kept ``$ref`` counts as no)."""
    if node is True:
        return True
    if not isinstance(node, Mapping) or "$ref" in node:
        return False
    checks = []
    if "type" in node:
        checks.append("null" in types_of(node))
    if "enum" in node:
        checks.append(None in node["enum"])
    if "const" in node:
        checks.append(node["const"] is None)
    for key in ("anyOf", "oneOf"):
        if key in node:
            checks.append(any(accepts_null(sub) for sub in node[key]))
    if "allOf" in node:
        checks.append(all(accepts_null(sub) for sub in node["allOf"]))
    if "not" in node:
        checks.append(not accepts_null(node["not"]))
    return all(checks)


def make_nullable(node: Mapping[str, Any]) -> dict[str, Any]:
    """``node`` widened to also accept ``null`` (how strict formats mark an optional property)."""
    out = dict(node)
    if accepts_null(out):
        return out
    if "anyOf" in out and "$ref" not in out:
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        return out
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if "enum" not in out and not types_of(out):
        return {"anyOf": [out, {"type": "null"}]}  # a $ref, or a schema whose type is implied
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    if types_of(out):
        out["type"] = [*types_of(out), "null"]
    return out


def split_types(node: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
    """A type union as (shared keywords, one schema per non-null type with its own keywords, whether null is in)."""
    types = types_of(node)
    shared = {k: v for k, v in node.items() if k != "type" and k not in _TYPE_SPECIFIC}
    variants = [
        {"type": t, **{k: node[k] for k in TYPE_KEYWORDS.get(t, ()) if k in node}} for t in types if t != "null"
    ]
    return shared, variants, "null" in types


def value_types(values: Iterable[Any]) -> list[str]:
    """The JSON types of ``values`` (of an ``enum`` or ``const``), in first-seen order."""
    found: list[str] = []
    for value in values:
        kind = (
            "null" if value is None else "boolean" if isinstance(value, bool) else "integer" if isinstance(value, int)
            else "number" if isinstance(value, float) else "string" if isinstance(value, str)
            else "array" if isinstance(value, list) else "object"
        )
        if kind not in found:
            found.append(kind)
    if "integer" in found and "number" in found:
        found.remove("integer")
    return found

