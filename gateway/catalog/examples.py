"""Checks of a tool's ``examples:`` against the tool as built: an example that can never pass is a definitions
problem at its ``file:line:col``, found by ``validate`` and every reload, not first by ``tool-gateway test``.

They run when the catalog builds a tool (``gateway.catalog.build``), not when its file loads, because only then is the
input schema known for every tool: a Python tool's is derived from its signature, as its output schema is from
its return annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..schema.argerrors import describe, describe_errors

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

    from ..definitions.model import ToolDefinition
    from ..errors import Problem

# Problems reported per example's arguments: the first few say what to fix.
MAX_ARGUMENT_PROBLEMS = 5


def example_name(example: Mapping[str, Any], index: int) -> str:
    """``example 2 (title)``: how messages name an example (numbered from 1, as people count)."""
    title = example.get("title")
    return f"example {index + 1}" + (f" ({title})" if isinstance(title, str) and title else "")


def example_problems(definition: ToolDefinition, inputs: Draft202012Validator,
                     outputs: Draft202012Validator | None) -> list[Problem]:
    """Every example whose arguments do not match the input schema (``inputs``), whose expected result the output
    schema (``outputs``) rejects, or whose expectations contradict each other or the tool."""
    problems: list[Problem] = []
    for index, example in enumerate(definition.examples):
        where, name = ["examples", index], example_name(example, index)
        arguments = example.get("arguments")
        if isinstance(arguments, dict):
            errors = sorted(inputs.iter_errors(arguments), key=lambda e: list(e.absolute_path))
            for error in errors[:MAX_ARGUMENT_PROBLEMS]:
                for line in describe_errors([error], inputs.schema):
                    problems.append(definition.problem(
                        [*where, "arguments", *error.absolute_path],
                        f"{name}: arguments do not match the input schema: {line}"))
        expect = example.get("expect")
        if isinstance(expect, dict):
            problems += _expectation_problems(definition, [*where, "expect"], name, expect, outputs)
    return problems


def _expectation_problems(definition: ToolDefinition, where: list[str | int], name: str, expect: dict[str, Any],
                          outputs: Draft202012Validator | None) -> list[Problem]:
    if expect.get("is_error") is True:
        wanted = [key for key in ("result", "matches_output_schema") if expect.get(key, False) is not False]
        return [definition.problem([*where, key], f"{name}: expects an error, which has no {key.replace('_', ' ')}; "
                                   "remove one of the two", key=True) for key in wanted]
    problems = []
    if expect.get("matches_output_schema") is True and outputs is None:
        problems.append(definition.problem([*where, "matches_output_schema"], f"{name}: the tool has no output "
                                           "schema to match (declare output_schema, or annotate the function's "
                                           "return type)", key=True))
    if "result" in expect and outputs is not None:
        errors = list(outputs.iter_errors(expect["result"]))
        if errors:
            from jsonschema.exceptions import relevance  # errors were found: jsonschema is loaded

            detail = describe(max(errors, key=relevance), outputs.schema)[0]
            problems.append(definition.problem([*where, "result"], f"{name}: the expected result does not match "
                                               f"the output schema, so no call can return it: {detail}"))
    return problems
