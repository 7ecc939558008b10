"""Links in a definitions directory: followed while they stay inside it, refused (as browser scripts are) outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.settings import Settings

TOOL = """tools:
  - id: {id}
    name: {id}
    user_description: x
    ai_description: x
    binding: {binding}
"""
HTTP = '{http: {url: "https://example.com/x"}}'


def tool(tool_id: str, binding: str = HTTP) -> str:
    return TOOL.format(id=tool_id, binding=binding)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A definitions directory and, beside it, a directory outside it holding a YAML file and a script."""
    root, outside = tmp_path / "defs", tmp_path / "elsewhere"
    for directory in (root, outside):
        directory.mkdir()
    (outside / "foreign.yaml").write_text(tool("foreign"))
    (outside / "page.js").write_text("// registers a handler\n")
    (root / "main.yaml").write_text(tool("main"))
    return root, outside


def test_yaml_file_linked_from_outside_is_refused(layout):
    """A YAML file whose link leads outside the definitions directory is an error at link:1:1, not loaded."""
    root, outside = layout
    os.symlink(outside / "foreign.yaml", root / "foreign.yaml")
    definitions = load_definitions(root)
    assert [t.id for t in definitions.tools] == ["main"]
    [problem] = definitions.problems
    assert (problem.file, problem.line, problem.column, problem.severity) == ("foreign.yaml", 1, 1, "error")
    assert "outside the definitions directory" in problem.message and str(outside) in problem.message


def test_directory_linked_from_outside_is_not_searched(layout):
    """A directory link leading outside is not searched for definitions, and a warning says so."""
    root, outside = layout
    os.symlink(outside, root / "shared")
    definitions = load_definitions(root)
    assert [t.id for t in definitions.tools] == ["main"]
    [problem] = definitions.problems
    assert (problem.file, problem.severity) == ("shared/", "warning")
    assert "outside the definitions directory" in problem.message


def test_script_and_yaml_linked_from_outside_are_refused_alike(layout):
    """The same link out of the directory refuses a browser script and a YAML file: both are build errors."""
    root, outside = layout
    (root / "scripts").mkdir()
    os.symlink(outside / "page.js", root / "scripts" / "page.js")
    os.symlink(outside / "foreign.yaml", root / "foreign.yaml")
    (root / "page.yaml").write_text(tool("page", "{browser: {script: scripts/page.js}}"))
    with pytest.raises(DefinitionsInvalid) as caught:
        build_catalog(load_definitions(root), Settings(definitions=root))
    refused = {p.file: p.message for p in caught.value.problems}
    assert set(refused) == {"foreign.yaml", "page.yaml"}
    assert all("outside the definitions directory" in message for message in refused.values())


def test_links_inside_the_directory_are_followed(layout):
    """Links that stay inside (a file linked from a subdirectory, the definitions path itself a link) load."""
    root, _ = layout
    (root / "team").mkdir()
    (root / "team" / "real.yaml").write_text(tool("teamtool"))
    os.symlink("team/real.yaml", root / "linked.yaml")
    os.symlink("team", root / "mirror")  # the same directory twice: walked once
    link = root.parent / "current"
    os.symlink(root, link)
    definitions = load_definitions(link)
    assert [str(p) for p in definitions.problems if "duplicate tool id" not in p.message] == []
    assert {t.file for t in definitions.tools} == {"main.yaml", "linked.yaml", "mirror/real.yaml"}


def test_links_leading_round_under_any_other_name_are_a_warning_and_the_rest_loads(layout):
    """Links that lead round under a name that is not YAML (it may have been a directory of definitions) are a
    warning at each, naming the way round; the directory's files load (it was an OSError that loaded nothing)."""
    root, _ = layout
    os.symlink("d2", root / "d1")
    os.symlink("d1", root / "d2")
    definitions = load_definitions(root)
    assert [t.id for t in definitions.tools] == ["main"]
    loop = "link cannot be followed (Too many levels of symbolic links:"
    assert [(p.file, p.severity, p.message) for p in definitions.problems] == [
        ("d1", "warning", f"{loop} d1 -> d2 -> d1): not searched for definitions"),
        ("d2", "warning", f"{loop} d2 -> d1 -> d2): not searched for definitions")]
