"""Definitions files of random shape, loaded and built: a catalog, or problems at file:line:col — nothing else.

Admins' files are trusted to mean well, not to be right. Each example starts from a tool that builds and sets
some of its keys (the binding's included) to values of any type, plausible or not — templates, regexes, JSON
Schemas, paths — or cuts the file short. Loading and building must then give a catalog or ``DefinitionsInvalid``
whose every problem points into the file; any other exception is a crash an admin would meet as a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_support import fuzz, json_values
from hypothesis import event, given
from hypothesis import strategies as st
from support import catalog_for

from gateway.errors import DefinitionsInvalid

MODULE = '''\
def add(a: float, b: float) -> float:
    return a + b


def echo(text: str) -> str:
    return text
'''
BASE = {"id": "fuzzed", "name": "Fuzzed", "user_description": "A fuzzed tool.", "ai_description": "Fuzzed.",
        "binding": {"python": "fuzz_tools:add"}}
templates = st.sampled_from(["{{ args.a }}", "{{ args.a | int }}", "{% for x in args %}{{ x }}{% endfor %}",
                             "{{ secrets.HOME }}", "{{ context.user }}", "{{", "{% if %}", "{{ 9 ** 99 }}",
                             "{{ gateway.base_url }}/x", "http://127.0.0.1:1/{{ args.a }}", "$.a[*]", "/a/0"])
regexes = st.sampled_from(["(a+)+$", "[", "\\d{4}", "(?P<x>a)(?P=x)", "a{1000000}", "^weather"])
schemas = st.recursive(
    st.fixed_dictionaries({}, optional={"type": st.sampled_from(["object", "string", "integer", "nope"]) | json_values,
                                        "enum": json_values, "pattern": regexes, "$ref": st.text(max_size=12),
                                        "required": json_values, "format": st.text(max_size=8)}),
    lambda inner: st.fixed_dictionaries({"type": st.just("object")}, optional={
        "properties": st.dictionaries(st.text(max_size=6), inner, max_size=3),
        "additionalProperties": st.booleans() | inner, "items": inner, "anyOf": st.lists(inner, max_size=2)}),
    max_leaves=6)
texts = st.text(max_size=12) | templates
string_maps = st.dictionaries(st.text(min_size=1, max_size=6), texts | json_values, max_size=3)
# Values of the right type for each key (so the semantic checks are reached, not only the schema's), or anything.
TYPED: dict[str, st.SearchStrategy[Any]] = {
    "id": st.text(max_size=12), "name": texts, "user_description": texts, "ai_description": texts,
    "scope": st.sampled_from(["server", "client", "all", "SERVER", "ALL", "nope"]),
    "input_schema": schemas, "output_schema": schemas, "tags": st.lists(texts, max_size=3),
    "toolsets": st.lists(texts, max_size=3), "timeout_s": st.integers(-5, 10**9) | st.floats(allow_nan=False),
    "annotations": st.dictionaries(st.sampled_from(["read_only", "destructive", "idempotent", "open_world", "x"]),
                                   st.booleans() | json_values, max_size=3),
    "return_direct": st.booleans(), "max_calls": st.integers(-2, 10**6),
    "offer": st.fixed_dictionaries({}, optional={"when_message_matches": regexes,
                                                 "when_message_mentions": st.lists(texts, max_size=3)}),
    "return_schema": st.sampled_from(["description", "result", "none", "RESULT", "both"]),
    "unknown_key": json_values,
    "method": st.sampled_from(["GET", "POST", "PUT", "DELETE", "TRACE", "get", "CONNECT"]), "url": texts,
    "query": string_maps, "headers": string_maps, "json": json_values | string_maps, "form": string_maps,
    "text": texts, "retries": st.integers(-1, 100), "retry_unsafe": st.booleans(),
    "accept_status": st.lists(st.integers(0, 999), max_size=3), "follow_redirects": st.booleans(),
    "allow_redirect_hosts": st.lists(texts, max_size=2),
    "response": st.fixed_dictionaries({}, optional={"select": templates, "template": templates,
                                                    "expect": st.sampled_from(["json", "text", "nope"])}),
}


def value_for(key: str) -> st.SearchStrategy[Any]:
    """Three times in four a value of the key's type, else any JSON value."""
    return st.one_of(TYPED[key], TYPED[key], TYPED[key], json_values)


http_bindings = st.fixed_dictionaries({"url": value_for("url")}, optional={
    key: value_for(key) for key in ("method", "query", "headers", "json", "form", "text", "timeout_s", "retries",
                                    "retry_unsafe", "accept_status", "follow_redirects", "allow_redirect_hosts",
                                    "response")}).map(lambda http: {"http": http})
bindings = st.one_of(
    st.sampled_from(["fuzz_tools:add", "fuzz_tools:echo", "fuzz_tools:nope", "os:system", "../x:y"]).map(
        lambda target: {"python": target}),
    http_bindings,
    (st.sampled_from(["scripts/none.js", "../../etc/passwd", "/etc/hostname"]) | st.text(max_size=10)).map(
        lambda script: {"browser": {"script": script}}),
    json_values)
TOOL_KEYS = ("id", "name", "user_description", "ai_description", "scope", "input_schema", "output_schema", "tags",
             "toolsets", "timeout_s", "annotations", "return_direct", "max_calls", "offer", "return_schema", "unknown_key")


@st.composite
def files(draw: st.DrawFn) -> str:
    """One definitions file: the base tool with some keys changed, maybe a second tool, maybe cut short."""
    tools: list[Any] = []
    for _ in range(draw(st.integers(min_value=1, max_value=2))):
        tool: dict[str, Any] = dict(BASE)
        for key in draw(st.lists(st.sampled_from(TOOL_KEYS), max_size=4, unique=True)):
            tool[key] = draw(value_for(key))
        if draw(st.booleans()):
            tool["binding"] = draw(bindings)
        tools.append(tool)
    text = yaml.safe_dump({"tools": tools}, allow_unicode=True, sort_keys=False)
    return text[: draw(st.integers(min_value=0, max_value=len(text)))] if draw(st.integers(0, 9)) == 0 else text


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("definitions")
    (directory / "python").mkdir()
    (directory / "python" / "fuzz_tools.py").write_text(MODULE)
    return directory


@fuzz(200)
@given(text=files())
def test_any_definitions_file_builds_or_is_reported_at_file_line_col(root: Path, text: str) -> None:
    """A file of random shape gives a catalog or problems, each at tools.yaml:line:col; never another exception."""
    (root / "tools.yaml").write_text(text, encoding="utf-8")
    try:
        catalog = catalog_for(root)
    except DefinitionsInvalid as invalid:
        event("problems")
        assert invalid.problems, text
        for problem in invalid.problems:
            assert Path(problem.file).name == "tools.yaml" and problem.line >= 1 and problem.column >= 1, str(problem)
    else:
        event("built")
        assert set(catalog.tools) <= {"fuzzed"}, text


@pytest.mark.parametrize("key, value", [("tags", 5), ("toolsets", True), ("tags", "abc")])
def test_a_list_key_given_a_scalar_is_a_problem_not_a_crash(root: Path, key: str, value: Any) -> None:
    """`tags: 5`, `toolsets: true` (found by the fuzz test above) or `tags: "abc"` is a problem at file:line:col,
    not a TypeError nor a list of letters."""
    (root / "tools.yaml").write_text(yaml.safe_dump({"tools": [BASE | {key: value}]}, sort_keys=False))
    with pytest.raises(DefinitionsInvalid) as invalid:
        catalog_for(root)
    assert any(f"{key}: expected array" in str(problem) for problem in invalid.value.problems), invalid.value
