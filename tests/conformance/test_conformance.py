"""The official MCP conformance suite against the gateway (``@modelcontextprotocol/conformance``, see
conformance_suite.py).

Server scenarios: the suite, as an MCP client, runs every scenario against ``/mcp`` of a gateway serving
``definitions/`` (the tools the scenarios call, named as the suite names them), once per protocol revision it tags
scenarios with (``--spec-version``). Client scenarios: the suite starts a scenario's server and spawns
``gateway_client.py``, which serves the gateway on that server as an ``mcp`` source and lists and calls its tools
through it. Each scenario is one test; what the gateway does not offer yet is ``xfail(strict=True)`` with the
reason, so the day a scenario starts passing its test says so. conftest.py prints the counts per revision.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_suite import INSTALLED, failures, results, scenarios, suite
from support import needs_node_modules, running

pytestmark = needs_node_modules(*INSTALLED)

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "gateway_client.py"

# Every server scenario passes; one the gateway cannot pass yet goes here with the reason (xfail, strict).
SERVER_XFAIL: dict[str, str] = {}
# Every other client scenario passes (the OAuth ones through the gateway's upstream OAuth client, gateway_client.py
# playing the admin's browser).
CLIENT_XFAIL: dict[str, str] = {}

SCENARIOS = scenarios()
REVISIONS = sorted({revision for scenario in SCENARIOS["server"] for revision in scenario.revisions})


def _expected(reason: str | None) -> Any:
    return pytest.mark.xfail(strict=True, reason=reason) if reason else ()


SERVER_CASES = [pytest.param(revision, scenario.name, id=f"{revision}/{scenario.name}",
                             marks=_expected(SERVER_XFAIL.get(scenario.name)))
                for revision in REVISIONS for scenario in SCENARIOS["server"] if revision in scenario.revisions]
CLIENT_CASES = [pytest.param(scenario.name, id=scenario.name, marks=_expected(CLIENT_XFAIL.get(scenario.name)))
                for scenario in SCENARIOS["client"]]


@pytest.fixture(scope="module")
def server_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], dict[str, list[dict[str, Any]]]]]:
    """Every server scenario of a revision, run once against a gateway serving definitions/ (auth off); each
    scenario's checks."""
    root = tmp_path_factory.mktemp("conformance")
    definitions = root / "definitions"
    shutil.copytree(HERE / "definitions", definitions, ignore=shutil.ignore_patterns("__pycache__"))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with running(definitions) as served:
        def run(revision: str) -> dict[str, list[dict[str, Any]]]:
            if revision not in runs:
                output = root / revision
                suite("server", "--url", f"{served.url}/mcp", "--suite", "all", "--spec-version", revision,
                      "-o", str(output), timeout_s=300)
                runs[revision] = results(output, prefix="server-")
            return runs[revision]

        yield run


def test_the_suite_lists_scenarios_and_every_expected_failure_is_one():
    """The suite is installed and lists both kinds; an xfail entry for a scenario it no longer has is stale."""
    assert REVISIONS and SCENARIOS["client"], "the conformance suite listed no scenarios"
    server = {scenario.name for scenario in SCENARIOS["server"]}
    client = {scenario.name for scenario in SCENARIOS["client"]}
    assert set(SERVER_XFAIL) <= server, set(SERVER_XFAIL) - server
    assert set(CLIENT_XFAIL) <= client, set(CLIENT_XFAIL) - client


@pytest.mark.parametrize(("revision", "scenario"), SERVER_CASES)
def test_server_scenario(server_run, revision, scenario):
    """The suite's checks for one server scenario on one revision: none failed or warned."""
    checks = server_run(revision).get(scenario)
    assert checks is not None, f"the suite left no results for {scenario} on {revision}"
    assert not failures(checks), "\n".join(failures(checks))


@pytest.mark.parametrize("scenario", CLIENT_CASES)
def test_client_scenario(tmp_path, scenario):
    """The suite's checks for one client scenario, the gateway as the client: none failed or warned, and the
    suite's verdict (which also judges the client's exit and timeout) is a pass."""
    command = f"{sys.executable} {CLIENT}"  # the suite splits it on spaces and appends the server's URL
    run = suite("client", "--command", command, "--scenario", scenario, "-o", str(tmp_path), timeout_s=120)
    checks = results(tmp_path).get(scenario)
    assert checks is not None, f"the suite left no results for {scenario}:\n{run.stdout}\n{run.stderr}"
    assert not failures(checks), "\n".join(failures(checks))
    assert run.returncode == 0, run.stderr
