"""The tool-gateway command line: exit codes, one line per problem, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import EXAMPLES, FIXTURES, catalog_for

from gateway.cli import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True, text=True, timeout=60)


def test_validate_examples_exits_zero():
    """`validate` on the shipped examples succeeds and says how many tools it found."""
    done = run("validate", str(EXAMPLES))
    assert done.returncode == 0, done.stderr
    assert f"ok: {len(catalog_for(EXAMPLES).tools)} tool(s)" in done.stdout


def test_validate_broken_prints_every_problem_and_exits_one():
    """`validate` on the broken fixtures exits 1 with one file:line:col line per problem, no traceback."""
    done = run("validate", str(FIXTURES / "broken"))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == "28 problem(s) found"
    assert all(line.split(":")[1].isdigit() and line.split(":")[2].isdigit() for line in lines[:-1])
    assert "Traceback" not in done.stderr + done.stdout


def test_call_square_root_prints_the_result():
    """`call square_root '{"x": 475695037565}'` prints 689706.486532…"""
    done = run("call", "square_root", '{"x": 475695037565}', "--definitions", str(EXAMPLES))
    assert done.returncode == 0
    assert done.stdout.startswith("689706.486532")


def test_call_with_bad_arguments_prints_an_llm_readable_error():
    """Bad arguments exit 1 with the JSON path and the expectation, no traceback."""
    done = run("call", "square_root", '{"x": "many"}', "--definitions", str(EXAMPLES))
    assert done.returncode == 1
    assert "at $.x: expected number, got string" in done.stderr
    assert "Traceback" not in done.stderr


def test_call_unknown_tool_suggests_a_name(capsys):
    """Calling an unknown tool exits 1 and suggests the closest id."""
    assert main(["call", "squareroot", "{}", "-d", str(EXAMPLES)]) == 1
    assert "Did you mean: square_root?" in capsys.readouterr().err


def test_list_json_is_the_rest_listing(capsys):
    """`list --json` prints the same entries as GET /tools."""
    assert main(["list", str(EXAMPLES), "--json"]) == 0
    tools = json.loads(capsys.readouterr().out)["tools"]
    square_root = next(t for t in tools if t["id"] == "square_root")
    assert square_root["input_schema"]["required"] == ["x"]
    assert square_root["scope"] == "server"


def test_bad_settings_file_is_reported(tmp_path, capsys):
    """An unknown key in the settings file is an error naming it (exit 2)."""
    settings = tmp_path / "gateway.yaml"
    settings.write_text("definitons: x\n")
    assert main(["--settings", str(settings), "validate", str(EXAMPLES)]) == 2
    assert "unknown setting(s): definitons" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["gateway"])
def test_python_dash_m_runs_the_cli(module):
    """`python -m gateway --help` works, like the console script."""
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "validate" in done.stdout
