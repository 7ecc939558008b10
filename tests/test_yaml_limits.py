"""What one definitions file may cost to load: size, alias expansion, nesting, and where its files may live.

Hostile files are checked through ``tool-gateway validate`` in a subprocess with a capped address space and a
deadline, so a regression fails the test (out of memory, killed, timed out) instead of the machine.
"""

from __future__ import annotations

import itertools
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.definitions.load import load_definitions
from gateway.definitions.yamlbudget import YamlLimits

MEMORY_CAP = 1536 * 1024 * 1024  # address space for a validate subprocess: ample for a normal load
TOOL = """\
  - id: {id}
    name: {id}
    user_description: x
    ai_description: x
    binding: {{python: "m:f"}}
"""


def validate(root: Path) -> subprocess.CompletedProcess[str]:
    """`tool-gateway validate root` with its memory capped; a deadline far above the expected second."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run([sys.executable, "-m", "gateway", "validate", str(root)], capture_output=True, text=True,
                          timeout=60, preexec_fn=cap, check=False)


def laughs(levels: int = 9, width: int = 9) -> str:
    """A flow list whose last item is an alias expanding to width**levels strings (the billion laughs)."""
    names = [f"l{i}" for i in range(levels)]
    parts = [f"&{names[0]} [" + ", ".join(['"lol"'] * width) + "]"]
    parts += [f"&{name} [" + ", ".join([f"*{prev}"] * width) + "]" for prev, name in itertools.pairwise(names)]
    return "[" + ", ".join(parts) + f", *{names[-1]}]"


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


BOMBS = {
    "tags": TOOL.format(id="bomb") + f"    tags: {laughs()}\n",
    "input_schema": TOOL.format(id="bomb") + f"    input_schema: {{type: object, properties: {{q: {laughs()}}}}}\n",
    "examples": TOOL.format(id="bomb") + f"    input_schema: {{type: object, examples: {laughs()}}}\n",
    "top_level": TOOL.format(id="bomb") + f"x-bomb: {laughs()}\n",
}


@pytest.mark.parametrize("place", list(BOMBS))
def test_alias_bomb_is_a_problem_at_its_line(tmp_path, place):
    """An alias bomb anywhere in a file (inside a tool or at the top level) is one file:line:col problem, quickly."""
    text = "tools:\n" + BOMBS[place]
    write(tmp_path, "bomb.yaml", text)
    done = validate(tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "&l0" in row)
    problems = [row for row in done.stderr.splitlines() if row.startswith(f"bomb.yaml:{line}:")]
    assert any("max_yaml_nodes" in row for row in problems), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_alias_repeating_long_text_is_bounded_too(tmp_path):
    """Few nodes but much text (one long string aliased many times) is refused: expansion counts text as well."""
    text = "tools:\n" + TOOL.format(id="wide") + '    name: &s "' + "x" * 100_000 + '"\n'
    text = text.replace("    name: wide\n", "")
    text += "    tags: [" + ", ".join(["*s"] * 200) + "]\n"
    write(tmp_path, "wide.yaml", text)
    definitions = load_definitions(tmp_path)
    assert any("max_file_bytes" in p.message and p.line == 7 for p in definitions.problems), definitions.problems


def test_recursive_alias_is_a_problem(tmp_path):
    """An alias inside the collection it names (a self-containing list) is a problem, not a structure to walk."""
    write(tmp_path, "loop.yaml", "tools:\n" + TOOL.format(id="loop") + "    tags: &t [a, *t]\n")
    problems = load_definitions(tmp_path).problems
    assert any("recursive" in p.message and (p.file, p.line) == ("loop.yaml", 7) for p in problems), problems


def test_aliases_within_budget_still_load(tmp_path):
    """Ordinary anchors and aliases (a schema shared by two tools) load as before."""
    text = ("tools:\n" + TOOL.format(id="one") + "    input_schema: &schema {type: object, properties: {q: {type: string}}}\n"
            + TOOL.format(id="two") + "    input_schema: *schema\n")
    write(tmp_path, "shared.yaml", text)
    definitions = load_definitions(tmp_path)
    assert [t.id for t in definitions.tools] == ["one", "two"]
    assert definitions.tools[1].input_schema == {"type": "object", "properties": {"q": {"type": "string"}}}


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_deep_nesting_is_a_problem_not_a_crash(tmp_path, opening):
    """100,000 nested collections (flow or block) are a problem with a position; the process does not crash.

    Ours says "nested deeper than 100 levels". PyYAML 6.0.4's libyaml has a nesting limit of its own (1,000) that
    its scanner can reach first in a flow collection, as it looks up to 1,024 characters ahead for a key: then the
    problem is its "exceeded maximum nesting depth", at the same line."""
    closing = {"[": "]", "{a: ": "}", "- ": ""}[opening]
    # A block sequence cannot start on its key's line: it starts on the next one (line 8), the others on line 7.
    value = ("\n      " if opening == "- " else "") + opening * 100_000 + "x" + closing * 100_000
    write(tmp_path, "deep.yaml", "tools:\n" + TOOL.format(id="deep") + f"    tags: {value}\n")
    done = validate(tmp_path)
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    line = 8 if opening == "- " else 7
    assert any(row.startswith(f"deep.yaml:{line}:") and ("nested deeper" in row or "maximum nesting depth" in row)
               for row in done.stderr.splitlines()), \
        done.stderr[-2000:]


def test_file_over_the_size_limit_is_a_problem_at_line_one(tmp_path):
    """A file larger than max_file_bytes is a problem at file:1:1 naming its size and the limit."""
    write(tmp_path, "big.yaml", "tools:\n" + "".join(TOOL.format(id=f"t{i}") for i in range(20)))
    size = (tmp_path / "big.yaml").stat().st_size
    problems = load_definitions(tmp_path, limits=YamlLimits(max_file_bytes=1000, max_yaml_nodes=250_000)).problems
    assert [(p.file, p.line, p.column) for p in problems] == [("big.yaml", 1, 1)]
    assert f"{size:,} bytes" in problems[0].message and "max_file_bytes (1,000)" in problems[0].message


def test_huge_file_is_refused_without_being_read(tmp_path):
    """A 64 GiB (sparse) file is refused from its size alone: validate answers, within its memory cap."""
    with open(tmp_path / "huge.yaml", "wb") as huge:
        huge.truncate(64 * 1024**3)
    done = validate(tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert any(row.startswith("huge.yaml:1:1:") and "68,719,476,736 bytes" in row for row in done.stderr.splitlines())


def test_a_fifo_is_not_read(tmp_path):
    """A named pipe called *.yaml is a problem (not a regular file) instead of a read that never returns."""
    os.mkfifo(tmp_path / "pipe.yaml")
    problems = load_definitions(tmp_path).problems
    assert [(p.file, p.line, p.column) for p in problems] == [("pipe.yaml", 1, 1)]
    assert "not a regular file" in problems[0].message


@pytest.mark.parametrize("value", ["9" * 5000, "1" + ":59" * 300_000, "1" + ":59" * 300_000 + ".5"],
                         ids=["digits", "sexagesimal", "sexagesimal_float"])
def test_an_overlong_number_is_a_problem_at_its_line(tmp_path, value):
    """A number no tool needs (past Python's digit limit, or a sexagesimal one that costs quadratic time) is a
    problem at its line, not an exception or minutes of CPU."""
    write(tmp_path, "num.yaml", "tools:\n" + TOOL.format(id="num") + f"    max_calls: {value}\n")
    done = validate(tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert any(row.startswith("num.yaml:7:") and "number" in row for row in done.stderr.splitlines()), \
        done.stderr[-2000:]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("tagged", ["!!binary QUFB", "!!set {a, b}"])
def test_a_value_json_cannot_hold_is_a_problem_at_its_line(tmp_path, tagged):
    """A YAML tag that builds bytes or a set (which no JSON answer can carry) is a problem at its line, not a
    schema that fails later when tools are listed."""
    text = "tools:\n" + TOOL.format(id="tag") + f"    input_schema: {{type: object, examples: [{tagged}]}}\n"
    write(tmp_path, "tag.yaml", text)
    problems = load_definitions(tmp_path).problems
    assert any((p.file, p.line) == ("tag.yaml", 7) and "JSON" in p.message for p in problems), problems
