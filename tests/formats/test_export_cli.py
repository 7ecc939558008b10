"""``tool-gateway export --format …`` prints the provider declarations as JSON and diagnostics on stderr."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gateway.catalog.build import build_catalog
from gateway.cli.main import main
from gateway.definitions.load import load_definitions
from gateway.settings import load_settings


def test_export_prints_every_shipped_tool_in_each_format(shipped_dir, fmt, capsys, provider_types):
    """Each format's export is a JSON list of declarations the provider SDK accepts, with nothing on stderr."""
    assert main(["export", "--format", fmt, str(shipped_dir)]) == 0
    out, err = capsys.readouterr()
    declarations = json.loads(out)
    catalog = build_catalog(load_definitions(shipped_dir), load_settings(None, environ={}, definitions=shipped_dir))
    assert [d.get("name") or d["function"]["name"] for d in declarations] == list(catalog.tools)
    assert err == ""
    for declaration in declarations:
        provider_types.check(fmt, declaration)


def test_export_warns_about_a_tool_left_out(definitions_dir, recursive_schema, capsys):
    """A tool a format cannot hold is missing from the JSON and named, with its position, in a warning."""
    directory = definitions_dir({"tree": recursive_schema, "plain": {"type": "object"}})
    assert main(["export", "--format", "gemini", str(directory)]) == 0
    out, err = capsys.readouterr()
    assert [d["name"] for d in json.loads(out)] == ["plain"]
    assert err.startswith("warning: tools.yaml:") and "tool 'tree' left out of the gemini format" in err


def test_export_refuses_an_unknown_format(shipped_dir, capsys):
    """An unknown --format is a usage error (exit 2) listing the formats."""
    with pytest.raises(SystemExit) as exited:
        main(["export", "--format", "claude", str(shipped_dir)])
    assert exited.value.code == 2
    assert "openai-strict" in capsys.readouterr().err


def test_export_runs_as_a_command(shipped_dir):
    """``python -m gateway export`` works from a shell, as users run it."""
    done = subprocess.run([sys.executable, "-m", "gateway", "export", "-f", "mcp", str(shipped_dir)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert {t["name"] for t in json.loads(done.stdout)} >= {"example-tool", "get_lights", "change_state"}
