"""Fixtures for the hot-reload tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from reload_support import PROBE, tool_yaml, write


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    """A definitions directory with the probe module and one file declaring the tool ``echo``."""
    root = tmp_path / "defs"
    write(root / "python" / "reload_probe.py", PROBE.format(version="v1"))
    write(root / "main.yaml", tool_yaml("echo"))
    return root
