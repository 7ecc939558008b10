"""Meta-tests: every YAML key, binding key and setting is documented in README.md."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from support import REPO

from gateway.settings import Settings

README = (REPO / "README.md").read_text(encoding="utf-8")
SCHEMAS = REPO / "schemas"
TOOL_KEYS = sorted(json.loads((SCHEMAS / "tool-definitions.schema.json").read_text())["$defs"]["tool"]["properties"])
HTTP_KEYS = sorted(json.loads((SCHEMAS / "bindings" / "http.schema.json").read_text())["properties"])


@pytest.mark.parametrize("key", TOOL_KEYS)
def test_every_tool_key_is_in_the_readme(key):
    """Each key of a tool definition in the published schema has a line in README.md."""
    assert f"`{key}`" in README or f"`binding.{key}" in README


@pytest.mark.parametrize("key", HTTP_KEYS)
def test_every_http_binding_key_is_in_the_readme(key):
    """Each key of the http binding's schema is named in README.md."""
    assert f"`{key}`" in README


@pytest.mark.parametrize("name", [f.name for f in fields(Settings)])
def test_every_setting_is_in_the_readme(name):
    """Each server setting has a row in README.md's settings table."""
    assert f"`{name}`" in README
