"""Return-value schemas: derived from a Python function's return annotation, checked like declared ones, and told
to the model in every format when ``return_schema`` is ``description`` (per tool, else the settings)."""

from __future__ import annotations

import datetime as dt
import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import pytest
import yaml
from jsonschema import Draft202012Validator
from support import catalog_for

from gateway.cli.main import main
from gateway.context import CallContext
from gateway.errors import DefinitionsInvalid
from gateway.formats import FORMATS, render
from gateway.formats.returns import render_schema
from gateway.invoke import invoke
from gateway.schema import docstrings
from gateway.schema.signature import SchemaDerivationError, schema_for_function, schema_for_return


class Level(enum.Enum):
    """How loud it is."""

    LOW = "low"
    HIGH = "high"


@dataclass
class Reading:
    """One reading of a sensor.

    Attributes:
        value: The measured value.
    """

    value: float
    unit: str = "C"
    """The unit of the value."""
    level: Annotated[Level | None, "Loudness, when measured."] = None


class Totals(TypedDict, total=False):
    """Sums by kind."""

    count: int
    """How many were counted."""
    names: list[str]


SOURCE_OF_THIS = Path(__file__).read_text(encoding="utf-8")


def _returning(hint: Any) -> Any:
    def function() -> None: ...

    function.__annotations__ = {"return": hint}
    return function


@pytest.mark.parametrize(("hint", "expected"), [
    (str, {"type": "string"}),
    (float, {"type": "number"}),
    (dt.date, {"type": "string", "format": "date"}),
    (Level, {"type": "string", "enum": ["low", "high"], "description": "How loud it is."}),
    (Literal["on", "off"], {"type": "string", "enum": ["on", "off"]}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False,
                       "minItems": 2, "maxItems": 2}),
    (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
    (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    (Annotated[float, "Degrees Celsius."], {"type": "number", "description": "Degrees Celsius."}),
])
def test_a_return_annotation_derives_its_schema(hint, expected):
    """Scalars, dates, Enum, Literal, list, tuple, dict, Optional and Annotated return types each give a schema."""
    assert schema_for_return(_returning(hint)) == expected


def test_a_dataclass_return_is_an_object_described_by_its_docstrings():
    """A dataclass gives a closed object: required fields without defaults, the class text as its description,
    fields described by an Attributes section, by a string below the field, or by Annotated."""
    schema = schema_for_return(_returning(Reading))
    Draft202012Validator.check_schema(schema)
    assert schema["description"] == "One reading of a sensor."
    assert schema["required"] == ["value"] and schema["additionalProperties"] is False
    assert schema["properties"]["value"] == {"type": "number", "description": "The measured value."}
    assert schema["properties"]["unit"] == {"type": "string", "description": "The unit of the value."}
    assert schema["properties"]["level"]["description"] == "Loudness, when measured."


def test_a_typeddict_return_lists_its_keys_with_their_docstrings():
    """A TypedDict gives an object of its keys (required as declared) with attribute docstrings as descriptions."""
    schema = schema_for_return(_returning(Totals))
    assert schema["description"] == "Sums by kind." and "required" not in schema
    assert schema["properties"] == {"count": {"type": "integer", "description": "How many were counted."},
                                    "names": {"type": "array", "items": {"type": "string"}}}


def test_docstring_returns_and_args_describe_the_result_and_the_parameters():
    """A Google-style docstring's Returns: describes the result and Args: the parameters; Annotated text wins."""

    def measure(sensor: str, precise: Annotated[bool, "From Annotated."] = False) -> list[Reading]:
        """Measures.

        Args:
            sensor: Which sensor to read.
            precise: From the docstring.

        Returns:
            Every reading of the sensor, newest first.
        """
        return []

    assert schema_for_return(measure)["description"] == "Every reading of the sensor, newest first."
    parameters = schema_for_function(measure, ())["properties"]
    assert parameters["sensor"]["description"] == "Which sensor to read."
    assert parameters["precise"]["description"] == "From Annotated."


def test_attribute_docstrings_of_nested_and_local_classes():
    """A class inside a function or another class has its fields described by the strings below them too."""

    class Outer:
        @dataclass
        class Inner:
            size: int
            """How big."""

    assert schema_for_return(_returning(Outer.Inner))["properties"]["size"]["description"] == "How big."


def test_a_module_source_is_parsed_once_for_all_its_classes(monkeypatch):
    """Describing many classes of one module reads and parses its source once (not once per class)."""
    reads = []
    monkeypatch.setattr(docstrings.inspect, "getsource", lambda module: reads.append(module) or SOURCE_OF_THIS)
    docstrings._module_attribute_docstrings.cache_clear()
    assert schema_for_return(_returning(Reading))["properties"]["unit"]["description"] == "The unit of the value."
    assert schema_for_return(_returning(Totals))["properties"]["count"]["description"] == "How many were counted."
    assert len(reads) == 1
    docstrings._module_attribute_docstrings.cache_clear()


@pytest.mark.parametrize("hint", [None, Any, object])
def test_none_any_or_a_missing_annotation_derives_no_schema(hint):
    """`-> None`, `-> Any`, `-> object` and no annotation at all say nothing to check: no output schema."""
    assert schema_for_return(_returning(hint)) is None

    def unannotated(): ...

    assert schema_for_return(unannotated) is None


def test_an_unsupported_return_annotation_is_named():
    """A return type with no JSON Schema equivalent raises an error saying it is the return annotation."""
    with pytest.raises(SchemaDerivationError, match="return annotation: type 'complex'"):
        schema_for_return(_returning(complex))


TOOLS_PY = '''
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Reading:
    """One reading."""

    value: float
    unit: str = "C"


def read(sensor: str) -> Reading:
    return Reading(21.5)


def count(word: str) -> int:
    return len(word)


def liar(word: str) -> int:
    return word


def quiet(word: str) -> None:
    return None


def opaque(word: str) -> complex:
    return 1j
'''


def tool(tool_id: str, function: str, **extra: Any) -> dict[str, Any]:
    return {"id": tool_id, "name": tool_id, "user_description": f"{tool_id} for people.",
            "ai_description": f"{tool_id} for models.", "binding": {"python": f"returns_tools:{function}"}, **extra}


@pytest.fixture
def directory(tmp_path: Path):
    """A definitions directory with ``returns_tools.py`` and the given tools (default: read and count)."""

    def write(*tools: dict[str, Any]) -> Path:
        (tmp_path / "python").mkdir(exist_ok=True)
        (tmp_path / "python" / "returns_tools.py").write_text(TOOLS_PY)
        chosen = list(tools) or [tool("read", "read"), tool("count", "count")]
        (tmp_path / "tools.yaml").write_text(yaml.safe_dump({"tools": chosen}, sort_keys=False))
        return tmp_path

    return write


def test_a_python_tool_without_output_schema_gets_the_derived_one(directory):
    """The derived schema is the tool's output schema (listing included); a declared output_schema wins; a
    function returning None has none."""
    declared = {"type": "object", "properties": {"value": {"type": "number"}}}
    catalog = catalog_for(directory(tool("read", "read"), tool("declared", "read", output_schema=declared),
                                    tool("quiet", "quiet")))
    derived = catalog.get("read").output_schema
    assert derived["required"] == ["value"] and derived["description"] == "One reading."
    assert catalog.get("read").describe()["output_schema"] == derived
    assert catalog.get("declared").output_schema == declared
    assert catalog.get("quiet").output_schema is None and "output_schema" not in catalog.get("quiet").describe()


async def test_results_are_checked_against_the_derived_schema(directory):
    """A result matching the derived schema is structured; one that contradicts the annotation is an error result."""
    catalog = catalog_for(directory(tool("read", "read"), tool("liar", "liar")))
    good = await invoke(catalog, "read", {"sensor": "s1"}, CallContext())
    assert good.structured and good.value == {"value": 21.5, "unit": "C"}
    bad = await invoke(catalog, "liar", {"word": "seven"}, CallContext())
    assert bad.is_error and "does not match its output schema" in bad.text


def test_an_unsupported_return_annotation_is_a_warning_and_the_tool_still_serves(directory):
    """A return type with no schema warns at the binding (file:line:col) and the tool is built without one."""
    catalog = catalog_for(directory(tool("opaque", "opaque")))
    assert catalog.get("opaque").output_schema is None
    [warning] = [w for w in catalog.warnings if "no output schema derived" in w.message]
    assert warning.file == "tools.yaml" and warning.line > 1 and "complex" in warning.message


def descriptions(catalog: Any, fmt: str) -> dict[str, str]:
    """Each tool's description, as the format ``fmt`` declares it."""
    found = {}
    for declaration in render(catalog, fmt).tools:
        inner = declaration.get("function", declaration)
        found[inner["name"]] = inner["description"]
    return found


READ_RETURNS = "Returns: {value: number; unit?: string} — One reading."


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_description_mode_appends_the_schema_in_every_format(directory, fmt):
    """With return_schema: description in the settings, every format's description ends with the rendering."""
    catalog = catalog_for(directory(), return_schema="description")
    texts = descriptions(catalog, fmt)
    assert texts["read"] == f"read for models.\n\n{READ_RETURNS}"
    assert texts["count"] == "count for models.\n\nReturns: integer"


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("mode", ["none", "result"])
def test_none_and_result_modes_leave_descriptions_alone(directory, fmt, mode):
    """return_schema none (the default) and result add nothing to any format's description."""
    catalog = catalog_for(directory(), return_schema=mode)
    assert descriptions(catalog, fmt) == {"read": "read for models.", "count": "count for models."}
    assert catalog.get("read").return_schema == mode


def test_the_tool_key_overrides_the_setting(directory):
    """A tool's return_schema wins over the settings' in both directions."""
    tools = (tool("read", "read", return_schema="none"), tool("count", "count", return_schema="description"))
    texts = descriptions(catalog_for(directory(*tools), return_schema="description"), "openai")
    assert texts == {"read": "read for models.", "count": "count for models.\n\nReturns: integer"}
    tools = (tool("read", "read", return_schema="description"), tool("count", "count", return_schema="result"))
    texts = descriptions(catalog_for(directory(*tools)), "anthropic")
    assert texts == {"read": f"read for models.\n\n{READ_RETURNS}", "count": "count for models."}


def test_an_unknown_mode_is_a_problem_at_the_key(directory):
    """return_schema: other is refused with file:line:col and the allowed values."""
    with pytest.raises(DefinitionsInvalid) as raised:
        catalog_for(directory(tool("read", "read", return_schema="always")))
    [problem] = raised.value.problems
    assert problem.file == "tools.yaml" and "'always' is not one of 'description', 'result', 'none'" in problem.message


def test_the_description_follows_the_parameters_own_description(directory):
    """The rendering comes last, after what the input schema's root description adds."""
    schema = {"type": "object", "description": "Give a sensor id.", "properties": {"sensor": {"type": "string"}},
              "required": ["sensor"]}
    catalog = catalog_for(directory(tool("read", "read", input_schema=schema)), return_schema="description")
    assert descriptions(catalog, "openai")["read"] == f"read for models.\n\nGive a sensor id.\n\n{READ_RETURNS}"


@pytest.mark.parametrize("mode", ["description", "none"])
def test_export_prints_what_the_mode_says(directory, tmp_path_factory, capsys, mode):
    """`tool-gateway export` with a settings file's return_schema prints the renderings (or not) in each format."""
    settings = tmp_path_factory.mktemp("settings") / "settings.yaml"
    settings.write_text(f"return_schema: {mode}\n")
    root = directory()
    for fmt in FORMATS:
        assert main(["export", "--format", fmt, "--settings", str(settings), str(root)]) == 0
        out = capsys.readouterr().out
        texts = {(d.get("function") or d)["name"]: (d.get("function") or d)["description"] for d in json.loads(out)}
        assert (READ_RETURNS in texts["read"]) is (mode == "description"), fmt


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "object", "properties": {"a": {"type": "integer", "description": "An a."}, "b": {}},
      "required": ["a"]}, "{a: integer /* An a. */; b?: any}"),
    ({"type": "array", "items": {"enum": ["x", "y"]}}, '("x" | "y")[]'),
    ({"type": "array", "items": {"type": "object", "properties": {"k": {"enum": [1, 2]}}}}, "{k?: 1 | 2}[]"),
    ({"type": "string", "format": "date-time"}, "string<date-time>"),
    ({"type": "string", "pattern": "^#[0-9a-f]{6}$"}, "string /^#[0-9a-f]{6}$/"),
    ({"type": "object", "additionalProperties": {"type": "number"}}, "{[key: string]: number}"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "string | null"),
    ({"$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
      "$ref": "#/$defs/Node"}, "Node; where Node = {next?: Node}"),
    ({"type": "object", "properties": {"not an identifier": {"const": True}}, "required": ["not an identifier"]},
     '{"not an identifier": true}'),
])
def test_the_compact_rendering(schema, expected):
    """Objects (optional keys with ?), unions, arrays, formats, patterns, maps, constants and recursive $refs."""
    assert render_schema(schema) == expected
