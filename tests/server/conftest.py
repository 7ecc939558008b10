"""Real gateway servers on free 127.0.0.1 ports, each run by uvicorn in a thread with its own event loop.

Servers whose catalog a test changes come from ``start_server`` (one per test); the read-only ``server`` and
``auth_server`` are shared by the tests of a module.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from server_support import API_KEYS, RunningServer, running
from support import EXAMPLES


@pytest.fixture
def start_server() -> Iterator[Callable[..., RunningServer]]:
    """Start a server of one's own: ``start_server(definitions, **settings)``; stopped at teardown."""
    with ExitStack() as stack:
        yield lambda definitions, **overrides: stack.enter_context(running(definitions, **overrides))


@pytest.fixture(scope="module")
def shared_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the shipped tool-definitions for a module's shared servers."""
    target = tmp_path_factory.mktemp("shared") / "tool-definitions"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture(scope="module")
def server(shared_examples: Path) -> Iterator[RunningServer]:
    """The shipped example tools, served without auth (shared: do not change its definitions)."""
    with running(shared_examples) as served:
        yield served


@pytest.fixture(scope="module")
def auth_server(shared_examples: Path) -> Iterator[RunningServer]:
    """The shipped example tools behind API keys: a math-only reader and an admin (shared, read-only)."""
    with running(shared_examples, api_keys=API_KEYS) as served:
        yield served
