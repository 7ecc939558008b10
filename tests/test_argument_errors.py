"""How invoke words what is wrong with arguments: null and booleans, unions (discriminated, of scalars), and
arguments nested too deeply — each an argument error an LLM can act on, never blamed on the tool."""

from __future__ import annotations

import pytest
from support import catalog_for

from gateway.invoke import invoke
from gateway.schema.argerrors import MAX_ARGUMENT_DEPTH

TOOLS_PY = '''
def take(**kwargs) -> str:
    return "ok"


def echo(value: object = None) -> object:
    return value
'''

SHAPE = '''
      type: object
      properties:
        shape:
          oneOf:
            - type: object
              properties:
                kind: {const: circle}
                radius: {type: number, minimum: 0}
              required: [kind, radius]
              additionalProperties: false
            - type: object
              properties:
                kind: {const: rectangle}
                width: {type: number}
                height: {type: number}
              required: [kind, width, height]
              additionalProperties: false
            - $ref: "#/$defs/polyline"
      required: [shape]
      $defs:
        polyline:
          type: object
          properties:
            kind: {enum: [polyline, path]}
            points: {type: array, items: {type: array, items: {type: number}}}
          required: [kind, points]
'''

DEFS = f'''
tools:
  - id: numbers
    name: Numbers
    user_description: u
    ai_description: a
    binding: {{python: "argtools:take"}}
    input_schema:
      type: object
      properties:
        x: {{type: number}}
        flag: {{type: boolean}}
        size:
          anyOf:
            - {{type: integer, minimum: 1}}
            - {{const: auto}}
        mode:
          oneOf:
            - {{const: fast}}
            - {{const: slow}}
  - id: shapes
    name: Shapes
    user_description: u
    ai_description: a
    binding: {{python: "argtools:take"}}
    input_schema:
{SHAPE}
  - id: echo
    name: Echo
    user_description: u
    ai_description: a
    binding: {{python: "argtools:echo"}}
    input_schema:
      type: object
      properties:
        value: {{}}
'''


@pytest.fixture
def catalog(write_definitions):
    return catalog_for(write_definitions({"python/argtools.py": TOOLS_PY, "tools.yaml": DEFS}))


@pytest.mark.parametrize(("value", "got"), [(None, "got null"), (True, "got true"), (False, "got false")])
async def test_null_and_booleans_are_named_once(catalog, value, got):
    """A null or a boolean where a number is expected says `got null` / `got true`, not the type twice."""
    result = await invoke(catalog, "numbers", {"x": value})
    assert result.is_error and f"at $.x: expected number, {got}" in result.error
    assert f"{got} {got[4:]}" not in result.error and "boolean true" not in result.error


async def test_other_values_still_show_type_and_value(catalog):
    """A string where a number is expected names both its type and its value."""
    result = await invoke(catalog, "numbers", {"x": "one"})
    assert 'at $.x: expected number, got string "one"' in result.error


async def test_a_wrong_discriminator_names_every_allowed_value(catalog):
    """A `kind` no branch accepts is answered with all the allowed kinds, not one branch's expectation."""
    result = await invoke(catalog, "shapes", {"shape": {"kind": "hexagon", "radius": 1}})
    assert result.is_error
    assert 'at $.shape.kind: expected one of "circle", "rectangle", "polyline", "path", got "hexagon"' in result.error
    assert "was expected" not in result.error


async def test_a_matching_discriminator_reports_that_branchs_own_errors(catalog):
    """With `kind: rectangle`, the errors are the rectangle's (missing height, bad width), not the circle's."""
    result = await invoke(catalog, "shapes", {"shape": {"kind": "rectangle", "width": "wide"}})
    assert result.is_error
    assert "at $.shape: missing required property 'height'" in result.error
    assert 'at $.shape.width: expected number, got string "wide"' in result.error
    assert "radius" not in result.error and "circle" not in result.error


async def test_a_discriminator_through_a_local_ref_is_followed(catalog):
    """A branch given as a $ref into $defs is read like an inline one: its errors are reported."""
    result = await invoke(catalog, "shapes", {"shape": {"kind": "path", "points": [[0, "a"]]}})
    assert result.is_error
    assert 'at $.shape.points[0][1]: expected number, got string "a"' in result.error


async def test_a_missing_discriminator_is_named_with_its_values(catalog):
    """An object without `kind` is told that `kind` is missing and which values it takes."""
    result = await invoke(catalog, "shapes", {"shape": {"radius": 2}})
    assert result.is_error
    assert ("at $.shape: missing required property 'kind' (one of \"circle\", \"rectangle\", \"polyline\", "
            '"path")') in result.error


async def test_a_valid_discriminated_union_passes(catalog):
    """A well-formed shape of each kind is not an error."""
    for shape in ({"kind": "circle", "radius": 1}, {"kind": "rectangle", "width": 1, "height": 2},
                  {"kind": "polyline", "points": [[0, 1]]}):
        assert not (await invoke(catalog, "shapes", {"shape": shape})).is_error, shape


async def test_a_scalar_union_names_its_alternatives(catalog):
    """A value of a type no branch takes is answered with every alternative."""
    result = await invoke(catalog, "numbers", {"size": True})
    assert 'at $.size: expected integer or "auto", got true' in result.error
    result = await invoke(catalog, "numbers", {"mode": "medium"})
    assert 'at $.mode: expected one of "fast", "slow", got "medium"' in result.error


async def test_a_scalar_union_reports_the_branch_of_the_values_type(catalog):
    """An integer below the integer branch's minimum gets that branch's error, not "'auto' was expected"."""
    result = await invoke(catalog, "numbers", {"size": 0})
    assert "at $.size: 0 is less than the minimum of 1" in result.error
    assert "auto" not in result.error


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth - 1):
        value = [value]
    return value


async def test_an_argument_nested_900_deep_is_an_argument_error_naming_the_limit(catalog):
    """Arguments nested 900 deep are refused as arguments, with the limit — not an internal error of the tool."""
    result = await invoke(catalog, "echo", {"value": _nested(900)})
    assert result.is_error
    assert f"nested more than {MAX_ARGUMENT_DEPTH} levels deep" in result.error
    assert "internal error" not in result.error and "RecursionError" not in result.error


async def test_arguments_at_the_depth_limit_are_accepted(catalog):
    """Arguments exactly at the limit (the arguments object is level 1) reach the tool and come back."""
    value = _nested(MAX_ARGUMENT_DEPTH - 1)
    result = await invoke(catalog, "echo", {"value": value})
    assert not result.is_error and result.value == value


@pytest.mark.parametrize("number", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
async def test_a_number_json_cannot_hold_is_an_argument_error(catalog, number):
    """`1e999` parses as inf (and an MCP or model argument may carry NaN): refused as an argument, not passed to
    the tool to come back as a result that is not JSON."""
    result = await invoke(catalog, "echo", {"value": {"deep": [number]}})
    assert result.is_error and "a number is not finite" in result.error
