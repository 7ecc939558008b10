"""Input schemas derived from Python signatures, and arguments coerced back to the annotated types."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

import pytest
from jsonschema import Draft202012Validator

from gateway.context import CONTEXT_PARAMETERS
from gateway.schema.signature import SchemaDerivationError, coerce, coercer, schema_for_function, schema_for_type


class Brightness(enum.Enum):
    """How bright a light is."""

    LOW = "low"
    HIGH = "high"


@dataclass
class Light:
    id: int
    name: str
    brightness: Brightness = Brightness.LOW


class Filter(TypedDict, total=False):
    name: str
    limit: int


def everything(
    number: Annotated[float, "A number."],
    count: int,
    flag: bool,
    mode: Literal["fast", "slow"],
    brightness: Brightness,
    light: Light,
    tags: list[str],
    scores: dict[str, float],
    when: dt.datetime,
    anything: Any,
    maybe: int | None = None,
    filters: Filter | None = None,
    conversation_id: str | None = None,
) -> None:
    """A function touching every supported kind of hint."""


def test_every_supported_hint_maps_to_a_valid_schema():
    """Scalars, Literal, Enum, dataclass, TypedDict, list, dict, datetime, Any and optionals derive a schema."""
    schema = schema_for_function(everything, CONTEXT_PARAMETERS)
    Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    assert props["number"] == {"type": "number", "description": "A number."}
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert props["brightness"] == {"type": "string", "enum": ["low", "high"], "description": "How bright a light is."}
    assert props["light"]["required"] == ["id", "name"] and props["light"]["additionalProperties"] is False
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["anything"] == {}
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["filters"]["anyOf"][0]["properties"] == {"name": {"type": "string"}, "limit": {"type": "integer"}}
    assert schema["required"] == ["number", "count", "flag", "mode", "brightness", "light", "tags", "scores", "when",
                                  "anything"]


def test_context_parameters_are_hidden():
    """Parameters named like context values are not offered to the LLM."""
    assert "conversation_id" not in schema_for_function(everything, CONTEXT_PARAMETERS)["properties"]


def test_annotated_mapping_adds_keywords_to_the_non_null_branch():
    """Annotated[str | None, {"pattern": ...}] constrains the string, not the null."""
    schema = schema_for_type(Annotated[str | None, "Color.", {"pattern": "^#"}])
    assert schema == {"anyOf": [{"type": "string", "pattern": "^#"}, {"type": "null"}], "description": "Color."}


@pytest.mark.parametrize("hint", [set[complex], dict[int, str], object.__class__])
def test_unsupported_types_are_named(hint):
    """A type with no JSON Schema equivalent raises an error naming it."""
    with pytest.raises(SchemaDerivationError):
        schema_for_type(hint)


def test_untyped_parameter_is_refused():
    """A parameter without a type hint cannot be described and says so."""

    def f(x):
        return x

    with pytest.raises(SchemaDerivationError, match="parameter 'x' has no type hint"):
        schema_for_function(f, ())


def test_coerce_builds_rich_values():
    """JSON values become Enum members, dataclasses, datetimes and tuples as annotated."""
    light = coerce({"id": 1, "name": "lamp", "brightness": "high"}, Light)
    assert light == Light(1, "lamp", Brightness.HIGH)
    assert coerce("2026-01-01T10:00:00Z", dt.datetime) == dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC)
    assert coerce([1, 2], tuple[int, ...]) == (1, 2)
    assert coerce(None, int | None) is None
    assert coerce(3, float) == 3.0 and isinstance(coerce(3, float), float)



HINTS = [str, int, bool, float, Any, object, type(None), Annotated[float, "x"], Annotated[Annotated[int, "a"], "b"],
         int | None, float | None, Brightness, Light, dt.datetime, dt.date, tuple[int, ...], list[float], set[str],
         dict[str, float], Literal["a", "b"]]
VALUES = [None, True, False, 0, 3, -7, 2.5, "high", "2026-01-01", "2026-01-01T10:00:00Z", [1, 2], [1.5, "x"], {"a": 1},
          {"id": 1, "name": "lamp", "brightness": "high"}]


@pytest.mark.parametrize("hint", HINTS, ids=repr)
def test_a_parameters_coercer_does_what_coerce_does(hint):
    """``coercer(hint)``, decided once per parameter, gives what ``coerce(value, hint)`` gives (or the same error)
    for every value, and is None only where coerce leaves every value as it is."""
    step = coercer(hint)
    for value in VALUES:
        try:
            expected: Any = coerce(value, hint)
        except Exception as exc:  # noqa: BLE001
            expected = type(exc)
        try:
            got: Any = value if step is None else step(value)
        except Exception as exc:  # noqa: BLE001
            got = type(exc)
        assert got == expected and type(got) is type(expected), (hint, value)
        if step is None:
            assert got is value

def test_a_dataclass_whose_module_left_sys_modules_still_resolves_its_forward_references(tmp_path, monkeypatch):
    """A return type's forward references ('Brightness' under ``from __future__ import annotations``) resolve
    even when its module is gone from sys.modules, as another definitions directory's build makes it in a
    process serving several (CI: "NameError: name 'Brightness' is not defined")."""
    import importlib.util
    import sys

    source = tmp_path / "lamp_module.py"
    source.write_text("from __future__ import annotations\nimport enum\nfrom dataclasses import dataclass\n\n"
                      "class Brightness(enum.Enum):\n    LOW = 'low'\n    HIGH = 'high'\n\n"
                      "@dataclass\nclass Lamp:\n    brightness: Brightness\n")
    spec = importlib.util.spec_from_file_location("lamp_module", source)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "lamp_module", module)
    spec.loader.exec_module(module)
    monkeypatch.delitem(sys.modules, "lamp_module")
    schema = schema_for_type(module.Lamp)
    assert schema["properties"]["brightness"]["enum"] == ["low", "high"]
