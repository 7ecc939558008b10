"""Loading a directory of broken definitions reports every problem, each at the right file:line:col."""

from __future__ import annotations

import pytest
from support import FIXTURES

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.settings import Settings

BROKEN = FIXTURES / "broken"

# (file, line, column, a fragment of the message): one row per kind of mistake in tests/fixtures/broken.
EXPECTED = [
    ("01-syntax.yaml", 4, 21, "YAML syntax error: did not find expected ',' or ']'"),
    ("02-shape.yaml", 6, 5, "unknown key 'descripton' in tools[0]"),
    ("02-shape.yaml", 8, 5, "tools[1] is missing required key 'ai_description'"),
    ("02-shape.yaml", 12, 9, "invalid tool id '1bad id'"),
    ("02-shape.yaml", 21, 12, "tools[3].scope: 'BROWSER' is not one of"),
    ("02-shape.yaml", 28, 7, "unknown key 'pyhton' in tools[4].binding"),
    ("02-shape.yaml", 33, 14, "binding is empty"),
    ("02-shape.yaml", 38, 11, "tools[6].tags: expected array, got string"),
    ("02-shape.yaml", 39, 16, "tools[6].timeout_s: -5"),
    ("03-schemas.yaml", 10, 17, "input_schema is not a valid JSON Schema: unknown type 'strnig'"),
    ("03-schemas.yaml", 17, 7, "input_schema must have 'type: object' at its root (got 'array')"),
    ("03-schemas.yaml", 25, 17, "output_schema is not a valid JSON Schema"),
    ("03-schemas.yaml", 35, 9, "property 'extra' is not a parameter of 'helpers:typed'"),
    ("04-python.yaml", 6, 23, "module 'os' is not allowed"),
    ("04-python.yaml", 11, 23, "syntax error at broken_module.py:1:10"),
    ("04-python.yaml", 16, 23, "RuntimeError: database not reachable at import time"),
    ("04-python.yaml", 21, 23, "module 'helpers' has no attribute 'nope'"),
    ("04-python.yaml", 26, 23, "'helpers:CONSTANT' is not callable"),
    ("04-python.yaml", 31, 23, "parameter 'value' has no type hint"),
    ("05-scope.yaml", 7, 14, "scope 'client' needs a browser script"),
    ("05-scope.yaml", 7, 15, "scope 'client' runs only in the browser"),
    ("05-scope.yaml", 14, 25, "script 'scripts/missing.js' does not exist"),
    ("05-scope.yaml", 20, 25, "is outside the definitions directory"),
    ("05-scope.yaml", 26, 29, "invalid regular expression"),
    ("06-duplicates.yaml", 2, 9, "duplicate tool id 'typo_key' (first declared at 02-shape.yaml:2:9)"),
    ("06-duplicates.yaml", 4, 5, "duplicate key 'name'"),
    ("07-empty.yaml", 1, 1, "got an empty file"),
    ("08-not-tools.yaml", 1, 1, "expected a mapping with a 'tools' list, got array"),
]


@pytest.fixture(scope="module")
def problems() -> list:
    with pytest.raises(DefinitionsInvalid) as caught:
        build_catalog(load_definitions(BROKEN), Settings(definitions=BROKEN))
    return list(caught.value.problems)


@pytest.mark.parametrize(("file", "line", "column", "fragment"), EXPECTED, ids=[f"{r[0]}:{r[1]}:{r[2]}" for r in EXPECTED])
def test_each_mistake_is_reported_at_its_node(problems, file, line, column, fragment):
    """Every kind of mistake in the broken fixtures is reported with its file, line, column and cause."""
    matching = [p for p in problems if (p.file, p.line, p.column) == (file, line, column) and fragment in p.message]
    assert matching, f"no problem {file}:{line}:{column} containing {fragment!r}; got:\n" + "\n".join(map(str, problems))


def test_nothing_unexpected_is_reported(problems):
    """The broken fixtures produce exactly the expected problems: no noise, no duplicates."""
    assert len(problems) == len(EXPECTED), "\n".join(map(str, problems))


def test_problems_render_as_file_line_col(problems):
    """A problem prints as `file:line:col: message`, the form editors and CI logs link."""
    assert str(problems[0]).startswith("01-syntax.yaml:4:21: YAML syntax error")


def test_shipped_examples_are_valid():
    """The shipped tool-definitions directory loads and builds without problems."""
    from support import EXAMPLES

    catalog = build_catalog(load_definitions(EXAMPLES), Settings(definitions=EXAMPLES))
    assert {"square_root", "sum", "get_time", "diff_time", "get_lights", "change_state", "example-tool"} <= set(
        catalog.tools
    )


def test_missing_directory_is_a_problem_not_a_crash(tmp_path):
    """A definitions directory that does not exist is reported as a problem."""
    definitions = load_definitions(tmp_path / "nope")
    assert [p.message for p in definitions.problems] == ["definitions directory does not exist"]
    (tmp_path / "tools.yaml").write_text("tools: []\n", encoding="utf-8")
    one_file = load_definitions(tmp_path / "tools.yaml")
    assert [p.message for p in one_file.problems] == [
        "not a directory: give the directory of definitions files, not one of them"]


def test_seed_scope_spellings_are_accepted(write_definitions):
    """`SERVER`/`CLIENT`/`ALL` (the seed's spelling) mean the same as the lower-case scopes."""
    root = write_definitions({
        "python/m.py": "def f(x: int) -> int:\n    return x\n",
        "scripts/t.js": "// handler\n",
        "t.yaml": """
            tools:
              - {id: a, name: A, user_description: u, ai_description: a, scope: SERVER, binding: {python: "m:f"}}
              - {id: b, name: B, user_description: u, ai_description: a, scope: CLIENT,
                 binding: {browser: {script: scripts/t.js}}}
              - {id: c, name: C, user_description: u, ai_description: a, scope: ALL,
                 binding: {python: "m:f", browser: {script: scripts/t.js}}}
        """,
    })
    from support import catalog_for

    catalog = catalog_for(root)
    assert [catalog.tools[i].scope.value for i in "abc"] == ["server", "client", "all"]
    assert set(catalog.tools["c"].executors) == {"server", "client"}


@pytest.mark.parametrize("script", ["scripts/a\\0b.js", "\\0"])
def test_a_script_path_holding_a_nul_is_a_problem_at_its_node(tmp_path, script):
    """A browser script path with a NUL character is a problem at the script's node, not a ValueError mid-build
    (found by the definitions fuzz once hypothesis drew such a path)."""
    (tmp_path / "t.yaml").write_text(
        "tools:\n  - id: t1\n    name: T\n    user_description: x\n    ai_description: x\n    scope: client\n"
        f"    binding:\n      browser: {{script: \"{script}\"}}\n")
    with pytest.raises(DefinitionsInvalid) as caught:
        build_catalog(load_definitions(tmp_path), Settings(definitions=tmp_path))
    [problem] = caught.value.problems
    assert (problem.file, problem.line) == ("t.yaml", 8) and "NUL" in problem.message, problem


def test_a_ref_cycle_in_a_written_schema_is_a_problem_at_its_ref_and_a_tree_is_not(write_definitions):
    """$refs that go round without checking a part of the value (through allOf too, in an output schema too) are
    problems at the $ref naming the cycle (every call reaching one was an internal RecursionError); a tree whose
    nodes hold nodes builds, and checks nested arguments."""
    tool = "{{id: {id}, name: N, user_description: u, ai_description: a, binding: {{python: 'm:f'}}, {schemas}}}"
    cycle = ("input_schema: {type: object, properties: {x: {$ref: '#/$defs/A'}}, $defs: {A: {$ref: '#/$defs/B'}, "
             "B: {$ref: '#/$defs/A'}}}")
    tree = ("input_schema: {type: object, properties: {x: {$ref: '#/$defs/node'}}, $defs: {node: {type: object, "
            "properties: {children: {type: array, items: {$ref: '#/$defs/node'}}}}}}")
    looped_output = "output_schema: {$defs: {A: {allOf: [{$ref: '#/$defs/A'}]}}, $ref: '#/$defs/A'}"
    files = {"python/m.py": "def f(x: dict | None = None) -> dict:\n    return {}\n",
             "t.yaml": "tools:\n" + "".join(f"  - {tool.format(id=i, schemas=s)}\n" for i, s in
                                            [("cycle", cycle), ("tree", tree), ("looped", looped_output)])}
    root = write_definitions(files)
    with pytest.raises(DefinitionsInvalid) as caught:
        build_catalog(load_definitions(root), Settings(definitions=root))
    never = "(each step applies to the same value, so checking one would never end)"
    assert [str(p) for p in caught.value.problems] == [
        f"t.yaml:2:177: input_schema: $ref cycle #/$defs/A -> #/$defs/B -> #/$defs/A {never}",
        f"t.yaml:4:136: output_schema: $ref cycle #/$defs/A -> #/$defs/A {never}"]
    files["t.yaml"] = f"tools:\n  - {tool.format(id='tree', schemas=tree)}\n"
    from support import catalog_for

    validator = catalog_for(write_definitions(files, "fixed")).tools["tree"].validator
    assert list(validator.iter_errors({"x": {"children": [{"children": []}]}})) == []
    [error] = validator.iter_errors({"x": {"children": [{"children": [5]}]}})
    assert list(error.absolute_path) == ["x", "children", 0, "children", 0]
