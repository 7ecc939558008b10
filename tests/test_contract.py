"""`tool-gateway test`: examples run through the call path, generated arguments hold the contract, JUnit XML."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import EXAMPLES, FIXTURES, catalog_for

from gateway.cli.main import main
from gateway.errors import DefinitionsInvalid

CRASHY = FIXTURES / "contract" / "crashy"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "test", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def example_problems_of(root: Path) -> str:
    """Every problem building the catalog of ``root`` reports, one per line (as ``validate`` prints them)."""
    try:
        catalog_for(root)
    except DefinitionsInvalid as exc:
        return "\n".join(str(problem) for problem in exc.problems)
    return ""


def tool_line(output: str, tool: str) -> str:
    """The one summary line of ``tool`` (``PASS  id  ...``)."""
    [line] = [line for line in output.splitlines() if re.match(rf"^(PASS|FAIL|SKIP)\s+{re.escape(tool)}\s", line)]
    return line


def test_the_shipped_definitions_pass():
    """`tool-gateway test tool-definitions` exits 0: every server-side example passes, generated arguments find
    nothing, HTTP tools and browser-only tools are skipped with a reason."""
    done = run(str(EXAMPLES), "--samples", "10")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tool_line(done.stdout, "square_root").startswith("PASS")
    assert "examples 2/2 passed" in tool_line(done.stdout, "square_root")
    assert "10 generated" in tool_line(done.stdout, "sum")
    assert tool_line(done.stdout, "search_stations").startswith("SKIP") and "--live" in tool_line(
        done.stdout, "search_stations")
    assert tool_line(done.stdout, "task_form_read").startswith("SKIP") and "browser" in tool_line(
        done.stdout, "task_form_read")
    assert "Traceback" not in done.stdout + done.stderr


def test_a_wrong_example_fails_with_its_file_line_and_what_was_expected_and_what_came(examples_dir: Path):
    """A planted wrong expectation exits 1 with a line naming the example's file:line, the expected result and the
    result that came."""
    math = examples_dir / "math.yaml"
    math.write_text(math.read_text().replace("expect: {result: 4, matches_output_schema: true}",
                                             "expect: {result: 5, matches_output_schema: true}"))
    line = 1 + math.read_text().splitlines().index("      - title: Square root of 16")
    done = run(str(examples_dir), "--tool", "square_root", "--no-generated")
    assert done.returncode == 1, done.stdout + done.stderr
    assert tool_line(done.stdout, "square_root").startswith("FAIL")
    assert f"{math}:{line}:9: square_root example 1 (Square root of 16): expected result 5, got 4.0" \
        in done.stdout


def test_generated_arguments_find_a_tool_that_crashes_on_valid_input():
    """A Python tool that raises on negative numbers its schema allows is found by the generated arguments (a
    fixed seed), reported with the tool's file:line, the arguments and the internal error; its example passes."""
    done = run(str(CRASHY), "--tool", "logarithm", "--seed", "1", "--samples", "20")
    assert done.returncode == 1, done.stdout + done.stderr
    summary = tool_line(done.stdout, "logarithm")
    assert summary.startswith("FAIL") and "examples 1/1 passed" in summary
    [failure] = [line for line in done.stdout.splitlines() if "generated arguments" in line and "{" in line][:1]
    assert failure.strip().startswith(f"{CRASHY / 'tools.yaml'}:3:") and "logarithm" in failure
    assert "internal error (ValueError)" in failure
    assert float(re.search(r'\{"x": (-?[0-9.e+-]+)\}', failure).group(1)) <= 0


def test_the_same_seed_draws_the_same_arguments():
    """Two runs with one seed report the same failing arguments: a CI failure can be reproduced."""
    first, second = (run(str(CRASHY), "--tool", "half", "--seed", "7", "--samples", "10") for _ in range(2))
    assert first.returncode == second.returncode == 1
    assert first.stdout == second.stdout


def test_a_result_that_breaks_the_output_schema_is_a_failure():
    """A tool whose result does not match its (derived) output schema for some valid arguments fails."""
    done = run(str(CRASHY), "--tool", "half", "--samples", "20")
    assert done.returncode == 1
    assert "does not match its output schema" in done.stdout
    assert "examples 1/1 passed" in tool_line(done.stdout, "half")


def test_tools_that_are_not_read_only_get_generated_arguments_only_with_include_writes():
    """A tool not annotated read_only is not called with generated arguments unless --include-writes."""
    done = run(str(CRASHY), "--tool", "forget")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tool_line(done.stdout, "forget").startswith("SKIP") and "--include-writes" in done.stdout
    written = run(str(CRASHY), "--tool", "forget", "--include-writes", "--samples", "3")
    assert written.returncode == 1
    assert "internal error (RuntimeError)" in written.stdout


def test_junit_xml_counts_tests_failures_and_skips(tmp_path: Path):
    """--junit writes JUnit XML: a testsuite per tool, a testcase per example and one for the generated
    arguments, failures with a message, skips with a reason, and totals that add up."""
    report = tmp_path / "reports" / "contract.xml"
    done = run(str(CRASHY), "--samples", "10", "--junit", str(report))
    assert done.returncode == 1
    root = ET.parse(report).getroot()
    assert root.tag == "testsuites"
    suites = {suite.get("name"): suite for suite in root.findall("testsuite")}
    assert set(suites) == {"logarithm", "half", "forget"}
    for suite in suites.values():
        cases = suite.findall("testcase")
        for case in cases:
            assert {"name", "classname", "time"} <= set(case.keys()) and float(case.get("time")) >= 0
            assert [child.tag for child in case] in ([], ["failure"], ["skipped"])
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
        assert int(suite.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None)
        assert int(suite.get("errors")) == 0
    assert [int(suites["logarithm"].get(k)) for k in ("tests", "failures", "skipped")] == [2, 1, 0]
    assert [int(suites["forget"].get(k)) for k in ("tests", "failures", "skipped")] == [1, 0, 1]
    assert [int(root.get(k)) for k in ("tests", "failures", "skipped")] == [5, 2, 1]
    failure = suites["logarithm"].find("testcase[@name='generated arguments']/failure")
    assert "ValueError" in failure.get("message") and "tools.yaml:3:" in failure.text
    example = suites["logarithm"].find("testcase[@name='example 1: ln of 1']")
    assert example is not None and len(example) == 0  # passed: no child


def test_junit_xml_escapes_what_tools_answer(tmp_path: Path, write_definitions):
    """A failure message holding markup and control characters still makes well-formed XML."""
    root = write_definitions({"tools.yaml": """
        tools:
          - id: shout
            name: Shout
            user_description: Shouts.
            ai_description: Shouts.
            binding: {python: "loud:shout"}
            examples:
              - arguments: {}
                expect: {result: "<b>&</b>"}
        """, "python/loud.py": "def shout() -> str:\n    return '</failure>\\x00\\x1b]]>&<'\n"})
    report = tmp_path / "contract.xml"
    assert main(["test", str(root), "--no-generated", "--junit", str(report)]) == 1
    failure = ET.parse(report).getroot().find(".//failure")
    assert "</failure>" in failure.get("message")


def test_invalid_definitions_exit_two_with_every_problem(capsys):
    """Definitions that do not build exit 2 (not 1, a failing test) and print every problem as file:line:col."""
    assert main(["test", str(FIXTURES / "broken")]) == 2
    err = capsys.readouterr().err
    assert "problem(s) found" in err and re.search(r"^\S+\.yaml:\d+:\d+: ", err, re.MULTILINE)


def test_an_unknown_tool_is_a_usage_error(capsys):
    """--tool naming no tool exits 2 and suggests a close id."""
    assert main(["test", str(EXAMPLES), "--tool", "squareroot"]) == 2
    assert "square_root" in capsys.readouterr().err


def test_without_hypothesis_examples_still_run(monkeypatch, capsys):
    """Without the contract extra, examples run and the output says how to get generated arguments."""
    monkeypatch.setitem(sys.modules, "hypothesis_jsonschema", None)
    assert main(["test", str(EXAMPLES), "--tool", "square_root"]) == 0
    out = capsys.readouterr().out
    assert "install tool-gateway[contract] for generated arguments" in out
    assert "examples 2/2 passed" in tool_line(out, "square_root")


def test_a_hypothesis_too_new_for_hypothesis_jsonschema_is_said_not_failed_per_tool(monkeypatch, capsys):
    """With a hypothesis that lacks the internal hypothesis-jsonschema 0.23.1 calls (6.170.10 and later), examples
    still run and the output says to install the contract extra's bounded versions (it was an AttributeError
    on every tool)."""
    from hypothesis.internal.conjecture import utils as conjecture

    if hasattr(conjecture.many, "more"):
        monkeypatch.delattr(conjecture.many, "more")
    assert main(["test", str(EXAMPLES), "--tool", "square_root"]) == 0
    out = capsys.readouterr().out
    assert "hypothesis below 6.170.10" in out and "AttributeError" not in out
    assert "examples 2/2 passed" in tool_line(out, "square_root")


def test_example_arguments_that_break_the_derived_input_schema_are_a_definitions_problem(write_definitions):
    """An example whose arguments do not match the input schema derived from the Python signature is reported
    at the offending argument's file:line:col."""
    root = write_definitions({"tools.yaml": """
        tools:
          - id: twice
            name: Twice
            user_description: Doubles.
            ai_description: Doubles n.
            binding: {python: "doubling:twice"}
            examples:
              - arguments: {n: 2}
              - title: wrong
                arguments: {n: two}
        """, "python/doubling.py": "def twice(n: int) -> int:\n    return 2 * n\n"})
    assert 'tools.yaml:10:24: example 2 (wrong): arguments do not match the input schema: at $.n: expected ' \
           'integer, got string "two"' in example_problems_of(root)


def test_an_expected_result_the_output_schema_forbids_is_a_definitions_problem(write_definitions):
    """An example expecting a result its tool's output schema rejects can never pass: a problem says so."""
    root = write_definitions({"tools.yaml": """
        tools:
          - id: twice
            name: Twice
            user_description: Doubles.
            ai_description: Doubles n.
            binding: {python: "doubling:twice"}
            examples:
              - arguments: {n: 2}
                expect: {result: four}
        """, "python/doubling.py": "def twice(n: int) -> int:\n    return 2 * n\n"})
    assert "tools.yaml:9:26: example 1: the expected result does not match the output schema" \
        in example_problems_of(root)


@pytest.mark.parametrize("expect", ["{is_error: true, result: 1}", "{matches_output_schema: true}"])
def test_contradictory_expectations_are_a_definitions_problem(write_definitions, expect):
    """An example that expects an error and a result, or an output schema the tool lacks, is reported."""
    root = write_definitions({"tools.yaml": f"""
        tools:
          - id: echo
            name: Echo
            user_description: Echoes.
            ai_description: Echoes.
            input_schema: {{type: object, properties: {{s: {{type: string}}}}, required: [s]}}
            binding: {{python: "echo:echo"}}
            examples:
              - arguments: {{s: hi}}
                expect: {expect}
        """, "python/echo.py": "def echo(s):\n    return s\n"})
    assert re.search(r"tools\.yaml:10:\d+: example 1: ", example_problems_of(root))


def test_live_runs_the_http_examples_against_a_serving_gateway(examples_dir: Path, tmp_path: Path):
    """With --live, the HTTP tools' examples (which call {{ gateway.base_url }}) run, and pass against a gateway
    serving the same definitions at the settings' port; the write tool still gets no generated arguments."""
    from support import serving

    from gateway.runtime.gateway import Gateway
    from gateway.server import create_app
    from gateway.settings import Settings

    gateway = Gateway(Settings(definitions=examples_dir, reload=False))
    with serving(create_app(gateway), lifespan="on") as server:
        settings = tmp_path / "gateway.yaml"
        settings.write_text(f"port: {server.port}\n")
        done = run(str(examples_dir), "--live", "--toolset", "weather", "--samples", "5", "--settings", str(settings))
    assert done.returncode == 0, done.stdout + done.stderr
    assert {tool_line(done.stdout, t)[:4] for t in ("search_stations", "get_station", "add_reading")} == {"PASS"}
    assert "5 generated" in tool_line(done.stdout, "get_station")
    assert "--include-writes" in tool_line(done.stdout, "add_reading")


def test_the_time_budget_stops_the_generated_calls(capsys):
    """A tool's time budget bounds its generated arguments: at zero none is drawn, the report says the budget
    stopped it, and that is no failure."""
    assert main(["test", str(EXAMPLES), "--tool", "sum", "--time-budget", "0"]) == 0
    line = tool_line(capsys.readouterr().out, "sum")
    assert "0 generated, stopped by the time budget" in line and "examples 2/2 passed" in line


def test_a_schema_nothing_can_be_drawn_from_is_skipped_with_the_reason(write_definitions, capsys):
    """An input schema hypothesis-jsonschema cannot draw from skips the generated arguments, saying why."""
    root = write_definitions({"tools.yaml": """
        tools:
          - id: never
            name: Never
            user_description: Takes a number no number is.
            ai_description: Takes n.
            input_schema: {type: object, properties: {n: {type: integer, minimum: 5, maximum: 1}}, required: [n]}
            binding: {python: "nothing:never"}
            annotations: {read_only: true}
        """, "python/nothing.py": "def never(n):\n    return n\n"})
    assert main(["test", str(root)]) == 0
    captured = capsys.readouterr()
    assert "generated skipped: cannot draw arguments from the input schema: Unsatisfiable" in tool_line(
        captured.out, "never")
    assert "Traceback" not in captured.err


def test_the_shipped_examples_can_all_pass():
    """No shipped example has arguments its tool refuses or an expectation its tool can never meet."""
    assert example_problems_of(EXAMPLES) == ""


def test_validate_reports_an_example_that_can_never_pass(write_definitions, capsys):
    """`validate` (every catalog build, so every reload too) reports an example whose arguments the derived input
    schema refuses, at the offending argument's file:line:col, and the catalog does not build."""
    root = write_definitions({"tools.yaml": """
        tools:
          - id: twice
            name: Twice
            user_description: Doubles.
            ai_description: Doubles n.
            binding: {python: "doubling:twice"}
            examples:
              - arguments: {n: two}
        """, "python/doubling.py": "def twice(n: int) -> int:\n    return 2 * n\n"})
    assert main(["validate", str(root)]) == 1
    assert "tools.yaml:8:24: example 1: arguments do not match the input schema: at $.n: expected integer, " \
           'got string "two"' in capsys.readouterr().err
