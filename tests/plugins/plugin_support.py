"""Plugin files and catalog helpers shared by the plugin tests (import as ``from plugin_support import ...``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.catalog.build import build_catalog
from gateway.catalog.snapshot import Catalog
from gateway.context import CallContext
from gateway.errors import DefinitionsInvalid
from gateway.invoke import invoke
from gateway.settings import Settings
from gateway.sources import load_all

GREET_YAML = """
tools:
  - id: {prefix}greet
    name: Greet
    user_description: Greets someone.
    ai_description: Return a greeting.
    toolsets: [plugin]
    binding:
      python: helpers:greet
"""
GREET_PY = """
def greet(name: str) -> str:
    return "hello " + name
"""


def catalog(root: Path, **settings: Any) -> Catalog:
    """Build the catalog of ``root`` and of the plugins the settings list, as a served gateway does."""
    effective = Settings(definitions=root, **settings)
    definitions, plugins = load_all(effective)
    return build_catalog(definitions, effective, plugins=plugins)


def problems(root: Path, **settings: Any) -> list[str]:
    """The problems building that catalog reports, as printed."""
    with pytest.raises(DefinitionsInvalid) as caught:
        catalog(root, **settings)
    return [str(p) for p in caught.value.problems]


def call(built: Catalog, tool_id: str, arguments: dict[str, Any]) -> str:
    result = asyncio.run(invoke(built, tool_id, arguments, CallContext(surface="cli")))
    assert not result.is_error, result.text
    return result.text
