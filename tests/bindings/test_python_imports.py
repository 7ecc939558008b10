"""Importing a python/ module runs admin code: exits, interrupts and hangs at import are problems at the binding,
reported with every other problem, within ``import_timeout_s``."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

import pytest
import yaml
from support import catalog_for

from gateway.errors import DefinitionsInvalid

LIMIT = 1.0  # import_timeout_s in these tests
BAD_MODULES = {
    "exits": "import sys\nsys.exit(3)\n",
    "interrupts": "raise KeyboardInterrupt\n",
    "hangs": "import time\ntime.sleep(3600)\n",
}


def _tools(*targets: str) -> str:
    tools = [{"id": f"t{i}", "name": "T", "user_description": "u", "ai_description": "a",
              "binding": {"python": target}} for i, target in enumerate(targets)]
    return yaml.safe_dump({"tools": tools}, sort_keys=False)


def _bad_definitions(write_definitions, prefix: str):
    """One tool per bad module (names unique to the test: a hung import keeps its module's import lock), two
    tools naming the same bad module, and an unrelated problem (a module that does not exist)."""
    files = {f"python/{prefix}_{name}.py": text for name, text in BAD_MODULES.items()}
    targets = [f"{prefix}_{name}:f" for name in BAD_MODULES] + [f"{prefix}_exits:g", f"{prefix}_missing:f"]
    files["tools.yaml"] = _tools(*targets)
    return write_definitions(files)


async def _build(root, **settings):
    """Build in a thread, failing the test rather than hanging it if the build never returns."""
    return await asyncio.wait_for(asyncio.to_thread(catalog_for, root, import_timeout_s=LIMIT, **settings), 60)


async def test_exit_interrupt_and_hang_at_import_are_problems_at_each_binding(write_definitions):
    """sys.exit(3), KeyboardInterrupt and a sleep at import are each a problem at the file:line:col of every
    binding naming the module, and the other problems of the directory are reported with them."""
    root = _bad_definitions(write_definitions, "imp1")
    with pytest.raises(DefinitionsInvalid) as raised:
        await _build(root)
    problems = [str(p) for p in raised.value.problems]
    assert len(problems) == 5, problems
    assert all(re.match(r"tools\.yaml:\d+:\d+: ", p) for p in problems), problems
    exits = [p for p in problems if "imp1_exits" in p]
    assert len(exits) == 2 and all("SystemExit" in p and "3" in p for p in exits), exits
    assert any("imp1_interrupts" in p and "KeyboardInterrupt" in p for p in problems), problems
    assert any("imp1_hangs" in p and f"did not finish within {LIMIT:g} s" in p for p in problems), problems
    assert any("imp1_missing" in p for p in problems), problems


def test_cli_validate_reports_bad_imports_and_exits_1(write_definitions):
    """`tool-gateway validate` prints every problem, bad imports included, and exits 1 (not 3, and never hangs)."""
    root = _bad_definitions(write_definitions, "imp2")
    env = {**os.environ, "TOOL_GATEWAY_IMPORT_TIMEOUT_S": str(LIMIT)}
    done = subprocess.run([sys.executable, "-m", "gateway", "validate", str(root)], capture_output=True, text=True,
                          timeout=60, env=env, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    for name in ("imp2_exits", "imp2_interrupts", "imp2_hangs", "imp2_missing"):
        assert name in output, output


async def test_module_hung_at_import_is_a_problem_again_and_imports_once_fixed(write_definitions):
    """A second build naming a module whose first import still hangs answers with the problem again instead of
    waiting for the stuck import; once the module's content is fixed it imports and its tool runs."""
    root = write_definitions({"python/imp3_hangs.py": BAD_MODULES["hangs"], "tools.yaml": _tools("imp3_hangs:f")})
    for _ in range(2):
        with pytest.raises(DefinitionsInvalid, match=f"did not finish within {LIMIT:g} s"):
            await _build(root)
    (root / "python" / "imp3_hangs.py").write_text("def f() -> str:\n    return 'fixed'\n")
    catalog = await _build(root)
    from gateway.invoke import invoke
    assert (await invoke(catalog, "t0")).value == "fixed"


def test_a_module_another_directorys_abandoned_build_left_behind_is_not_taken_for_this_ones(tmp_path):
    """A build abandoned past its time limit goes on importing from its own definitions directory; the module it
    leaves in sys.modules under a shared name is not this directory's, nor an installed module: the next build
    of this directory imports its own (it was refused as 'the name of an installed module', for every later
    build of the process)."""
    import importlib.util
    import shutil

    from support import EXAMPLES

    first, second = tmp_path / "first", tmp_path / "second"
    for root in (first, second):
        shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("__pycache__"))
    catalog_for(first)
    catalog_for(second)  # the importable directory is now the second one
    spec = importlib.util.spec_from_file_location("time_tools", first / "python" / "time_tools.py")
    left_behind = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(left_behind)
    sys.modules["time_tools"] = left_behind  # what the abandoned build's import thread did, late
    catalog = catalog_for(second)
    assert "get_time" in catalog.tools
    assert sys.modules["time_tools"].__file__.startswith(str((second / "python").resolve()))


def test_two_directories_built_at_once_each_import_their_own_modules(tmp_path):
    """Two gateways in one process (the test suite runs many) building different definitions directories at the
    same moment: neither takes the other's python/ off sys.path between making its own importable and importing
    (one build failed with "No module named 'who'" in CI)."""
    from concurrent.futures import ThreadPoolExecutor

    roots = []
    for name in ("alpha", "beta"):
        root = tmp_path / name
        (root / "python").mkdir(parents=True)
        (root / "python" / f"{name}_mod.py").write_text("def f() -> str:\n    return __name__\n")
        (root / "tools.yaml").write_text(_tools(f"{name}_mod:f"))
        roots.append(root)

    def build_often(root):
        # Each build switches directories (the other thread's build made its own importable), so each imports.
        return [sorted(catalog_for(root).tools) for _ in range(60)]

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(build_often, roots))
    assert outcomes == [[["t0"]] * 60, [["t0"]] * 60]
