"""Fixtures for the provider-format tests: tools made from one schema, hard schemas with arguments they accept,
and each provider SDK's own types (plus its documented rules) to check declarations against."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mcp.types
import pytest
import yaml
from anthropic.types import ToolParam
from google.genai import types as genai
from jsonschema import Draft202012Validator
from openai.lib._pydantic import (
    _ensure_strict_json_schema,  # the SDK's own strict-mode pass, as a second opinion
)
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from openai.types.shared_params import FunctionDefinition
from pydantic import TypeAdapter

from gateway.catalog.snapshot import Tool
from gateway.definitions.load import parse_definitions
from gateway.schema.published import compile_validator

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "tool-definitions"
FORMATS = ("openai", "openai-strict", "openai-responses", "anthropic", "gemini", "mcp")

_POINT = {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}

# name → (input schema, arguments the schema accepts). Each is hard for at least one provider.
HARD: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "nested objects": (
        {"type": "object", "properties": {
            "address": {"type": "object", "description": "Where to deliver.", "properties": {
                "street": {"type": "string"},
                "geo": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                        "required": ["lat", "lon"]},
            }, "required": ["street"]},
        }, "required": ["address"]},
        [{"address": {"street": "Main 1"}}, {"address": {"street": "Main 1", "geo": {"lat": 1.5, "lon": 2}}}],
    ),
    "optional fields": (
        {"type": "object", "properties": {
            "query": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
            "exact": {"type": "boolean"},
        }, "required": ["query"], "additionalProperties": False},
        [{"query": "lamp"}, {"query": "lamp", "limit": 5, "exact": True}],
    ),
    "enums": (
        {"type": "object", "properties": {
            "color": {"type": "string", "enum": ["red", "green"]},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "mode": {"enum": ["fast", "slow", None]},
        }, "required": ["color"]},
        [{"color": "red"}, {"color": "green", "level": 2, "mode": None}, {"color": "red", "mode": "fast"}],
    ),
    "$ref and $defs": (
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:example:route",
         "type": "object", "$defs": {"Point": _POINT}, "definitions": {"Name": {"type": "string", "maxLength": 20}},
         "properties": {
             "start": {"$ref": "#/$defs/Point", "description": "Where to start."},
             "stops": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
             "label": {"$ref": "#/definitions/Name"},
             "same_as_label": {"$ref": "#/properties/label"},
         }, "required": ["start"]},
        [{"start": {"x": 1, "y": 2}}, {"start": {"x": 0, "y": 0}, "stops": [{"x": 1, "y": 1}], "label": "home"}],
    ),
    "oneOf and anyOf": (
        {"type": "object", "properties": {
            "shape": {"oneOf": [
                {"type": "object", "properties": {"radius": {"type": "number"}}, "required": ["radius"],
                 "additionalProperties": False},
                {"type": "object", "properties": {"side": {"type": "number"}}, "required": ["side"],
                 "additionalProperties": False},
            ]},
            "size": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+px$"}]},
        }, "required": ["shape"]},
        [{"shape": {"radius": 2}}, {"shape": {"side": 3}, "size": "12px"}, {"shape": {"side": 1}, "size": 4}],
    ),
    "nullable types": (
        {"type": "object", "$defs": {"Point": _POINT}, "properties": {
            "note": {"type": ["string", "null"]},
            "where": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
            "count": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
        }, "required": ["note"]},
        [{"note": None}, {"note": "hi", "where": {"x": 1, "y": 2}, "count": None}, {"note": "x", "where": None}],
    ),
    "arrays of objects": (
        {"type": "object", "properties": {
            "items": {"type": "array", "minItems": 1, "maxItems": 10, "uniqueItems": True, "items": {
                "type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                "required": ["sku"]}},
        }, "required": ["items"]},
        [{"items": [{"sku": "a"}]}, {"items": [{"sku": "a", "qty": 2}, {"sku": "b"}]}],
    ),
    "const": (
        {"type": "object", "properties": {
            "kind": {"const": "circle"}, "version": {"const": 2}, "flag": {"type": "boolean", "const": True},
        }, "required": ["kind"]},
        [{"kind": "circle"}, {"kind": "circle", "version": 2, "flag": True}],
    ),
    "arrays without items": (
        {"type": "object", "properties": {
            "tags": {"type": "array"},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}]},
        }},
        [{}, {"tags": ["a", 1, True]}, {"pair": ["a", "b"]}],
    ),
    "root combinators": (
        {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
         "allOf": [{"properties": {"verbose": {"type": "boolean"}}}],
         "oneOf": [{"required": ["id"]}, {"required": ["name"]}]},
        [{"id": 1}, {"name": "lamp", "verbose": True}],
    ),
    "object alternatives": (
        {"type": "object", "properties": {
            "filter": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                       "oneOf": [{"required": ["id"]}, {"required": ["name"]}]},
        }, "required": ["filter"]},
        [{"filter": {"id": 1}}, {"filter": {"name": "lamp"}}],
    ),
    "type unions and formats": (
        {"type": "object", "properties": {
            "when": {"type": "string", "format": "date-time"},
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "amount": {"type": ["integer", "string"], "minimum": 0, "pattern": "^[0-9]+$"},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
            "anything": {"description": "Any value."},
        }},
        [{}, {"when": "2025-01-01T00:00:00Z", "amount": 3, "ratio": 1.5}, {"amount": "12", "anything": "x"}],
    ),
}

RECURSIVE = {
    "type": "object",
    "$defs": {"Node": {"type": "object", "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
    }, "required": ["value"]}},
    "properties": {"tree": {"$ref": "#/$defs/Node"}},
    "required": ["tree"],
}
FREE_FORM = {"type": "object", "properties": {
    "name": {"type": "string"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
}, "required": ["name"]}


def tool_yaml(tool_id: str, schema: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    """One tool's YAML mapping, bound to a function that accepts anything."""
    raw: dict[str, Any] = {"id": tool_id, "name": f"{tool_id} title", "user_description": f"{tool_id} for people.",
                           "ai_description": f"{tool_id} for models."}
    if schema is not None:
        raw["input_schema"] = schema
    raw.update(extra)
    raw["binding"] = {"python": "format_probe:echo"}
    return raw


@pytest.fixture
def make_tool() -> Callable[..., Tool]:
    """A Tool parsed from YAML (so diagnostics have file:line:col), without building its binding."""

    def make(schema: dict[str, Any], tool_id: str = "probe", **extra: Any) -> Tool:
        text = yaml.safe_dump({"tools": [tool_yaml(tool_id, schema, **extra)]}, sort_keys=False)
        parsed = parse_definitions("probe.yaml", text)
        errors = [p for p in parsed.problems if p.severity == "error"]
        assert not errors, errors
        definition = parsed.tools[0]
        output = definition.output_schema
        return Tool(definition, schema, compile_validator(schema),
                    compile_validator(dict(output)) if output else None, {})

    return make


@pytest.fixture
def definitions_dir(tmp_path: Path) -> Callable[[dict[str, dict[str, Any]]], Path]:
    """A definitions directory holding tools {id: input_schema}, each bound to ``format_probe:echo``."""

    def write(schemas: dict[str, dict[str, Any]]) -> Path:
        (tmp_path / "python").mkdir(exist_ok=True)
        (tmp_path / "python" / "format_probe.py").write_text("def echo(**arguments):\n    return arguments\n")
        tools = [tool_yaml(tool_id, schema) for tool_id, schema in schemas.items()]
        (tmp_path / "tools.yaml").write_text(yaml.safe_dump({"tools": tools}, sort_keys=False))
        return tmp_path

    return write


def walk(schema: Any, path: tuple = ()) -> Iterator[tuple[tuple, dict[str, Any]]]:
    """Every subschema (dict) of a JSON Schema, with its path; data keywords (enum, const …) are not entered."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            for name, sub in value.items():
                yield from walk(sub, (*path, key, name))
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems", "any_of") and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from walk(sub, (*path, key, i))
        elif key in ("items", "additionalProperties", "not", "if", "then", "else"):
            yield from walk(value, (*path, key))


STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const", "description",
    "$ref", "$defs", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minItems", "maxItems",
}


def assert_strict(schema: dict[str, Any]) -> None:
    """OpenAI's documented strict-mode rules, checked node by node."""
    assert schema.get("type") == "object" and "anyOf" not in schema, "the root must be a plain object"
    for path, node in walk(schema):
        assert set(node) <= STRICT_KEYWORDS, f"{path}: unsupported keywords {set(node) - STRICT_KEYWORDS}"
        if "$ref" in node:
            assert set(node) == {"$ref"}, f"{path}: a $ref with siblings"
            continue
        assert {"type", "anyOf", "enum", "const"} & set(node), f"{path}: no type"
        types = node.get("type", [])
        if "object" in ([types] if isinstance(types, str) else types):
            assert node.get("additionalProperties") is False, f"{path}: object not closed"
            assert sorted(node.get("required", [])) == sorted(node.get("properties", {})), f"{path}: not all required"


class ProviderTypes:
    """Declarations checked with each provider SDK's own types, and the rules their docs add."""

    def check(self, fmt: str, declaration: dict[str, Any]) -> Any:
        return getattr(self, fmt.replace("-", "_"))(declaration)

    def openai(self, declaration: dict[str, Any]) -> dict[str, Any]:
        TypeAdapter(ChatCompletionToolParam).validate_python(declaration)
        _only_keys(declaration, ChatCompletionToolParam)
        function = declaration["function"]
        _only_keys(function, FunctionDefinition)
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", function["name"])
        parameters = function["parameters"]
        _llm_schema(parameters)
        return parameters

    def openai_responses(self, declaration: dict[str, Any]) -> dict[str, Any]:
        """The Responses API's flat function tool: ``openai``'s name, description and schema, strict said off."""
        TypeAdapter(FunctionToolParam).validate_python(declaration)
        _only_keys(declaration, FunctionToolParam)
        assert declaration["type"] == "function" and declaration["strict"] is False
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", declaration["name"])
        _llm_schema(declaration["parameters"])
        return declaration["parameters"]

    def openai_strict(self, declaration: dict[str, Any]) -> dict[str, Any]:
        parameters = self.openai(declaration)
        assert declaration["function"]["strict"] is True
        assert_strict(parameters)
        again = copy.deepcopy(parameters)
        assert _ensure_strict_json_schema(again, path=(), root=again) == parameters, "the SDK would change it"
        return parameters

    def anthropic(self, declaration: dict[str, Any]) -> dict[str, Any]:
        TypeAdapter(ToolParam).validate_python(declaration)
        _only_keys(declaration, ToolParam)
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", declaration["name"])
        _llm_schema(declaration["input_schema"])
        return declaration["input_schema"]

    def gemini(self, declaration: dict[str, Any]) -> genai.FunctionDeclaration:
        parsed = genai.FunctionDeclaration.model_validate(declaration)  # extra keys are rejected
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}", parsed.name or "")
        if parsed.parameters is not None:
            assert parsed.parameters.type == genai.Type.OBJECT and parsed.parameters.properties
            for path, node in walk(declaration["parameters"]):
                assert "additionalProperties" not in node and "$ref" not in node and "$defs" not in node, path
                assert node.get("type", "STRING") in {t.value for t in genai.Type}, path
        return parsed

    def mcp(self, declaration: dict[str, Any]) -> mcp.types.Tool:
        tool = mcp.types.Tool.model_validate(declaration)
        fields = {field.alias or name for name, field in mcp.types.Tool.model_fields.items()}
        assert set(declaration) <= fields, set(declaration) - fields
        assert tool.input_schema.get("type") == "object"
        Draft202012Validator.check_schema(tool.input_schema)
        if tool.output_schema is not None:
            assert tool.output_schema.get("type") == "object"
            Draft202012Validator.check_schema(tool.output_schema)
        return tool


def _only_keys(value: dict[str, Any], typed_dict: type) -> None:
    allowed = set(typed_dict.__annotations__)
    assert set(value) <= allowed, f"keys {set(value) - allowed} are not in {typed_dict.__name__}"


def _llm_schema(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object" and not {"anyOf", "oneOf", "allOf"} & set(schema), "root must be an object"
    Draft202012Validator.check_schema(schema)
    for path, node in walk(schema):
        assert not {"$schema", "$id"} & set(node), path
        types = node.get("type", [])
        if "array" in ([types] if isinstance(types, str) else types):
            assert "items" in node, f"{path}: array without items"
    assert "#/definitions" not in json.dumps(schema)


@pytest.fixture(scope="session")
def provider_types() -> ProviderTypes:
    return ProviderTypes()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Tests that take ``hard_case`` run once per hard schema; ``fmt`` once per format.
    if "hard_case" in metafunc.fixturenames:
        metafunc.parametrize("hard_case", list(HARD.values()), ids=list(HARD))
    if "fmt" in metafunc.fixturenames:
        metafunc.parametrize("fmt", FORMATS)


@pytest.fixture
def recursive_schema() -> dict[str, Any]:
    return copy.deepcopy(RECURSIVE)


@pytest.fixture
def free_form_schema() -> dict[str, Any]:
    return copy.deepcopy(FREE_FORM)


@pytest.fixture(scope="session")
def shipped_dir() -> Path:
    return SHIPPED
