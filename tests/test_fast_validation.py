"""The success path's shortcuts answer exactly what the general code answers."""

from __future__ import annotations

import json

import pytest

from gateway.invoke import _with_duration
from gateway.results import ToolResult, _text
from gateway.schema.argerrors import MAX_ARGUMENT_DEPTH, shape_problem
from gateway.schema.published import compile_validator


def test_a_plainly_valid_value_needs_no_jsonschema_validator() -> None:
    """A result that plainly matches its output schema is accepted without making (or running) jsonschema's validator."""
    validator = compile_validator({"type": "number"})
    assert list(validator.iter_errors(3.5)) == []
    assert validator._validator is None


def test_an_invalid_value_still_gets_jsonschemas_errors() -> None:
    """A value the fast check does not accept is judged and worded by jsonschema, as before."""
    validator = compile_validator({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    assert [e.message for e in validator.iter_errors({"a": "x"})] == ["'x' is not of type 'integer'"]
    assert [e.message for e in validator.iter_errors({})] == ["'a' is a required property"]


@pytest.mark.parametrize("value", [0, -7, 10**40, 1.5, -0.0, 1e300, 1e-7, None, True, False, "é", [1, "é"],
                                   {"a": None}])
def test_result_text_is_json_dumps(value: object) -> None:
    """A result's text is what json.dumps(ensure_ascii=False) spells, scalars included."""
    assert _text(value) == json.dumps(value, ensure_ascii=False)


def test_with_duration_copies() -> None:
    """A result's duration is set on a copy: a result a filter keeps and answers again is never changed."""
    kept = ToolResult(tool="t", is_error=False, value=1, text="1", truncated=True)
    timed = _with_duration(kept, 0.25)
    assert kept.duration_s == 0.0 and timed.duration_s == 0.25
    assert timed == ToolResult(tool="t", is_error=False, value=1, text="1", truncated=True, duration_s=0.25)


@pytest.mark.parametrize("arguments, problem", [
    ({"a": 1, "b": "x", "c": None, "d": True}, None),
    ({"a": float("inf")}, "a number is not finite (JSON has no Infinity or NaN)"),
    ({"a": 1, "b": [float("nan")]}, "a number is not finite (JSON has no Infinity or NaN)"),
])
def test_flat_arguments_shape(arguments: dict, problem: str | None) -> None:
    """Flat arguments of plain scalars have no shape problem; a non-finite number still has one, at any level."""
    assert shape_problem(arguments, MAX_ARGUMENT_DEPTH) == problem
