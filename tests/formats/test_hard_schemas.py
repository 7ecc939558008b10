"""Hard schemas (nested objects, optional fields, enums, $ref, oneOf/anyOf, nullable types, arrays of objects,
const, arrays without items, root combinators, type unions) in every format: the provider SDKs accept the
declarations, and what the original schema accepts, the adapted one still lets a model send."""

from __future__ import annotations

from typing import Any

from google.genai import types as genai
from jsonschema import Draft202012Validator

from gateway.formats import render_tool, restore_arguments


def test_hard_case_arguments_fit_the_original_schema(hard_case):
    """The sample arguments of each hard case are valid for its schema (the cases themselves are right)."""
    schema, samples = hard_case
    for sample in samples:
        Draft202012Validator(schema).validate(sample)


def test_every_format_declares_the_hard_schema_in_the_provider_types(hard_case, fmt, make_tool, provider_types):
    """Each hard schema renders in every format, and the provider SDK's own type accepts the declaration."""
    schema, _ = hard_case
    rendered = render_tool(make_tool(schema), fmt)
    assert rendered.diagnostics == []
    [declaration] = rendered.tools
    provider_types.check(fmt, declaration)


def test_json_schema_formats_still_accept_the_original_arguments(hard_case, make_tool):
    """OpenAI, Anthropic and MCP declarations accept every argument set the original schema accepts."""
    schema, samples = hard_case
    tool = make_tool(schema)
    declared = {
        "openai": render_tool(tool, "openai").tools[0]["function"]["parameters"],
        "anthropic": render_tool(tool, "anthropic").tools[0]["input_schema"],
        "mcp": render_tool(tool, "mcp").tools[0]["inputSchema"],
    }
    for fmt, adapted in declared.items():
        for sample in samples:
            assert Draft202012Validator(adapted).is_valid(sample), (fmt, sample)


def test_strict_schema_accepts_completed_arguments_and_restore_makes_them_valid(hard_case, make_tool):
    """A strict-mode call (every property sent, null for "not given") fits the strict schema, and
    ``restore_arguments`` turns it back into arguments the original schema accepts."""
    schema, samples = hard_case
    strict = render_tool(make_tool(schema), "openai-strict").tools[0]["function"]["parameters"]
    for sample in samples:
        sent = _complete(sample, strict, strict)
        assert Draft202012Validator(strict).is_valid(sent), (sample, sent)
        restored = restore_arguments(schema, sent)
        Draft202012Validator(schema).validate(restored)
        assert {k: v for k, v in restored.items() if k in sample} == sample


def test_gemini_schema_still_accepts_the_original_arguments(hard_case, make_tool):
    """Read back as JSON Schema by the google-genai SDK, the Gemini parameters accept every sample."""
    schema, samples = hard_case
    declaration = genai.FunctionDeclaration.model_validate(render_tool(make_tool(schema), "gemini").tools[0])
    if declaration.parameters is None:
        assert all(sample == {} for sample in samples)
        return
    as_json = declaration.parameters.json_schema.model_dump(mode="json", exclude_none=True, by_alias=True)
    validator = Draft202012Validator(_null_beside_enum(as_json))
    for sample in samples:
        assert validator.is_valid(sample), (sample, as_json)


def _complete(value: Any, schema: Any, root: dict[str, Any]) -> Any:
    """What a strict-mode model sends for ``value``: every declared property, null where none was given."""
    schema = _resolve(schema, root)
    if isinstance(value, dict):
        for candidate in [schema, *schema.get("anyOf", [])]:
            candidate = _resolve(candidate, root)
            properties = candidate.get("properties")
            if properties is None or not set(value) <= set(properties):
                continue
            sent = {name: _complete(value[name], sub, root) if name in value else None
                    for name, sub in properties.items()}
            if Draft202012Validator({**candidate, "$defs": root.get("$defs", {})}).is_valid(sent):
                return sent
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_complete(item, schema["items"], root) for item in value]
    return value


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    if isinstance(schema, dict) and "$ref" in schema:
        return root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _null_beside_enum(schema: Any) -> Any:
    # OpenAPI 3.0 (Gemini) reads `nullable` as allowing null even beside an enum; JSON Schema needs it listed.
    if isinstance(schema, list):
        return [_null_beside_enum(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _null_beside_enum(value) if key != "enum" else value for key, value in schema.items()}
    if "enum" in out and "null" in (out.get("type") or []):
        out["enum"] = [*out["enum"], None]
    return out
