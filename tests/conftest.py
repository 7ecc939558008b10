"""Fixtures shared by every test package: example definitions, building catalogs from YAML text, and a log handler
for the length of a test."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_llm import Servers
from support import EXAMPLES


def pytest_configure(config: pytest.Config) -> None:
    """The gateway's state directory (build cache, upstream copies) is this run's own, shared by the servers the
    tests start (they inherit the environment), never the user's: a cache entry from another run, or one another
    version wrote, must not decide what a test sees."""
    os.environ["TOOL_GATEWAY_STATE_DIR"] = tempfile.mkdtemp(prefix="tool-gateway-test-state-")


@pytest.fixture
def examples_dir(tmp_path: Path) -> Path:
    """A private copy of the shipped tool-definitions, safe to edit."""
    target = tmp_path / "tool-definitions"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def write_definitions(tmp_path: Path) -> Callable[..., Path]:
    """Write files (name -> text, dedented) into a fresh definitions directory and return it."""

    def write(files: dict[str, str], directory: str = "defs") -> Path:
        root = tmp_path / directory
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        root.mkdir(parents=True, exist_ok=True)
        return root

    return write


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    """Threaded uvicorn servers shared by a session's tests (the scripted LLM, gateways); stopped at the end."""
    running = Servers()
    yield running
    running.stop(list(running.running))


@pytest.fixture
def log_handler() -> Iterator[Callable[..., logging.Handler]]:
    """``log_handler(handler, *names, level=None)`` puts ``handler`` on the loggers ``names`` ("" is the root) and
    sets each to ``level`` when one is given, until the test ends; then each logger's handlers and level are as they
    were, so that what one test listens to never reaches the next."""
    added: list[tuple[logging.Logger, logging.Handler, int]] = []

    def add(handler: logging.Handler, *names: str, level: int | None = None) -> logging.Handler:
        for name in names:
            logger = logging.getLogger(name)
            added.append((logger, handler, logger.level))
            logger.addHandler(handler)
            if level is not None:
                logger.setLevel(level)
        return handler

    yield add
    for logger, handler, level in reversed(added):
        logger.removeHandler(handler)
        logger.setLevel(level)
