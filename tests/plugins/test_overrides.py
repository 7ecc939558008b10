"""`overrides:` in a definitions file: an admin changes or disables a plugin's tool without copying it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_support import catalog, problems

from gateway.catalog.build import build_catalog
from gateway.catalog.cache import BuildCache
from gateway.catalog.snapshot import Catalog
from gateway.definitions.load import DefinitionsCache
from gateway.settings import Settings
from gateway.sources import load_all


@pytest.fixture
def overriding(install_plugin, write_definitions: Callable[..., Path]) -> Callable[[str], Path]:
    """A definitions directory holding one file of ``overrides`` (YAML list items), beside plugin 'alpha'."""
    install_plugin("alpha")

    def write(items: str) -> Path:
        return write_definitions({"overrides.yaml": "tools: []\noverrides:\n" + items})

    return write


@pytest.mark.parametrize(("item", "field", "expected"), [
    ("{tool: alpha_greet, name: Hi}", "name", "Hi"),
    ("{tool: alpha_greet, user_description: For people.}", "user_description", "For people."),
    ("{tool: alpha_greet, ai_description: For the model.}", "ai_description", "For the model."),
    ("{tool: alpha_greet, toolsets: [one, two]}", "toolsets", ("one", "two")),
    ("{tool: alpha_greet, tags: [x]}", "tags", ("x",)),
    ("{tool: alpha_greet, timeout_s: 3}", "timeout_s", 3),
    ("{tool: alpha_greet, offer: {when_message_matches: greet}}", "offer", {"when_message_matches": "greet"}),
])
def test_override_changes_one_field(overriding, item, field, expected):
    """Each overridable key replaces the plugin tool's value; the rest stays as the plugin declared it."""
    tool = catalog(overriding(f"  - {item}\n"), plugins=("alpha",)).get("alpha_greet").definition
    assert getattr(tool, field) == expected
    assert tool.binding == {"python": "helpers:greet"}


def test_override_changes_scope(overriding):
    """`scope` is overridable, and a scope the binding cannot serve is a problem at the override."""
    found = problems(overriding("  - {tool: alpha_greet, scope: client}\n"), plugins=("alpha",))
    assert any(p.startswith("overrides.yaml:3:12: tool 'alpha_greet' after this override") for p in found), found


def test_override_disables_a_tool(overriding):
    """`enabled: false` stops a plugin's tool from being served."""
    assert "alpha_greet" not in catalog(overriding("  - {tool: alpha_greet, enabled: false}\n"),
                                        plugins=("alpha",)).tools


def test_override_of_unknown_tool_is_a_problem_at_file_line_col(overriding):
    """An override naming a tool nobody declares is a problem at its `tool` key's value."""
    found = problems(overriding("  - {tool: alpha_greet}\n  - {tool: nobody}\n"), plugins=("alpha",))
    assert "overrides.yaml:4:12: override of tool 'nobody': no definitions file or plugin declares it" in found


def test_override_with_unknown_key_is_a_schema_problem(overriding):
    """An override may change only the documented keys."""
    found = problems(overriding("  - {tool: alpha_greet, binding: {python: 'os:system'}}\n"), plugins=("alpha",))
    assert any(p.startswith("overrides.yaml:3:") and "unknown key 'binding'" in p for p in found), found


def test_unchanged_override_reuses_the_built_tool(overriding):
    """A reload with the same files reuses the overridden tool already built (no rebuild per reload)."""
    settings = Settings(definitions=overriding("  - {tool: alpha_greet, tags: [x]}\n"), plugins=("alpha",))
    loaded, built = DefinitionsCache(), BuildCache()

    def build() -> Catalog:
        definitions, plugins = load_all(settings, loaded)
        return build_catalog(definitions, settings, cache=built, plugins=plugins)

    first = build()
    assert build().get("alpha_greet") is first.get("alpha_greet")
