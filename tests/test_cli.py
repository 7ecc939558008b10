"""The tool-gateway command line: exit codes, one line per problem, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest
from support import EXAMPLES, FIXTURES, catalog_for

from gateway.cli.main import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True, text=True, timeout=60,
                          check=False)


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


def test_validate_reports_a_symlink_loop_at_its_path_without_a_traceback(tmp_path):
    """`validate` on a directory holding links that lead round (a.yaml -> b.yaml -> a.yaml, a link to itself,
    through a directory linked to itself) exits 1 with one line per link naming the way round, no traceback (it
    died of ELOOP); a directory linked to its parent is walked once, not a problem."""
    (tmp_path / "main.yaml").write_text("tools:\n  - {id: main, name: M, user_description: u, ai_description: a, "
                                        "binding: {http: {url: 'https://example.com/x'}}}\n")
    for link, target in [("a.yaml", "b.yaml"), ("b.yaml", "a.yaml"), ("self.yaml", "self.yaml"),
                         ("loop", "loop"), ("x.yaml", "loop/x.yaml")]:
        (tmp_path / link).symlink_to(target)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to("..")
    done = run("validate", str(tmp_path))
    assert done.returncode == 1 and "Traceback" not in done.stderr + done.stdout, done.stderr
    loop = "link cannot be followed (Too many levels of symbolic links:"
    assert done.stderr.splitlines() == [f"a.yaml:1:1: {loop} a.yaml -> b.yaml -> a.yaml): not loaded",
                                        f"b.yaml:1:1: {loop} b.yaml -> a.yaml -> b.yaml): not loaded",
                                        f"self.yaml:1:1: {loop} self.yaml -> self.yaml): not loaded",
                                        f"x.yaml:1:1: {loop} x.yaml -> loop/x.yaml): not loaded",
                                        "4 problem(s) found"]


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
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0 and "validate" in done.stdout


# Each global option, with a value whose effect a test can see whatever the command: a settings file naming an
# unknown key makes every command exit 2 before it does anything else.
BAD_SETTINGS = "definitons: x\n"
VERBS = (("serve", str(EXAMPLES)), ("validate", str(EXAMPLES)), ("list", str(EXAMPLES)),
         ("call", "square_root", "{}"), ("export", str(EXAMPLES), "-f", "openai"), ("plugins",),
         ("chat", "hello"), ("test", str(EXAMPLES)), ("status", "--cluster"),
         ("import", "openapi", "spec.yaml"), ("search", str(EXAMPLES), "time"), ("lock", str(EXAMPLES)))


def test_every_global_option_is_tested_in_both_positions():
    """The options below are all the global options there are, so the position test covers each of them."""
    from gateway.cli.main import GLOBAL_OPTIONS

    assert set(GLOBAL_OPTIONS) == {"--settings"}


def test_every_command_is_tested_with_the_global_options():
    """VERBS holds every command the parser has, so the position test covers each of them."""
    import argparse

    from gateway.cli.main import _parser

    [commands] = [action for action in _parser()._actions if isinstance(action, argparse._SubParsersAction)]
    assert set(commands.choices) == {verb[0] for verb in VERBS}


@pytest.mark.parametrize("verb", VERBS, ids=[verb[0] for verb in VERBS])
@pytest.mark.parametrize("position", ["before", "after"])
def test_global_options_work_before_or_after_the_command(tmp_path, capsys, verb, position):
    """`--settings FILE` is read whether it comes before the command or after it (and its arguments)."""
    settings = tmp_path / "gateway.yaml"
    settings.write_text(BAD_SETTINGS)
    option = ["--settings", str(settings)]
    argv = [*option, *verb] if position == "before" else [*verb, *option]
    assert main(argv) == 2
    assert "unknown setting(s): definitons" in capsys.readouterr().err


def test_a_global_option_after_the_command_wins_over_one_before_it(tmp_path, capsys):
    """Given on both sides, the option after the command is the one used, as the last word on a command line."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_SETTINGS)
    good = tmp_path / "good.yaml"
    good.write_text("default_timeout_s: 5\n")
    assert main(["--settings", str(bad), "validate", str(EXAMPLES), "--settings", str(good)]) == 0
    assert main(["--settings", str(good), "validate", str(EXAMPLES), "--settings", str(bad)]) == 2


def test_serve_takes_its_settings_after_the_command(tmp_path):
    """`tool-gateway serve DIR --settings FILE` serves with that file's settings (here: its port)."""
    from support import free_socket

    with free_socket() as sock:
        port = sock.getsockname()[1]
    settings = tmp_path / "gateway.yaml"
    settings.write_text(f"port: {port}\nreload: false\n")
    server = subprocess.Popen([sys.executable, "-m", "gateway", "serve", str(EXAMPLES), "--settings", str(settings)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.stdout.read()
            time.sleep(0.1)
        else:
            pytest.fail("the server did not answer on the port its settings file names")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_help_says_global_options_go_on_either_side():
    """`--help`, of the program and of a command, says where the global options may be given."""
    done = run("--help")
    assert "before or after the command" in done.stdout
    serve_help = run("serve", "--help").stdout
    assert "--settings" in serve_help and "before or after the command" in serve_help


def test_validate_applies_the_file_limits_of_the_settings(tmp_path, capsys):
    """`validate` holds files to the settings' max_file_bytes, as a served gateway does, not to the default."""
    settings = tmp_path / "settings.yaml"
    settings.write_text("max_file_bytes: 100\n")

    assert main(["validate", str(EXAMPLES), "--settings", str(settings)]) == 1
    printed = capsys.readouterr()
    assert "is larger than max_file_bytes (100): not read" in printed.out + printed.err


# What a machine without the [cluster] extra looks like to the gateway: `import redis` fails as it does when the
# package is not installed (a meta path finder ahead of the real ones, installed by sitecustomize at start-up).
WITHOUT_REDIS = '''
import sys


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "redis":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
'''


def test_cluster_settings_without_the_cluster_extra_are_one_line_naming_it(tmp_path):
    """`serve` with a Redis URL but no `redis` package exits 2 with one line that says which extra to install,
    not a ModuleNotFoundError traceback."""
    (tmp_path / "sitecustomize.py").write_text(WITHOUT_REDIS)
    environ = {**os.environ, "PYTHONPATH": str(tmp_path), "TOOL_GATEWAY_CLUSTER_REDIS_URL": "redis://127.0.0.1:1/0"}
    done = subprocess.run([sys.executable, "-m", "gateway", "serve", str(EXAMPLES), "--no-reload", "--port", "0"],
                          capture_output=True, text=True, timeout=60, check=False, env=environ)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert error == ("error: setting 'cluster.redis_url': cluster mode needs the redis package, which is missing; "
                     "install it with: pip install 'tool-gateway[cluster]'")
