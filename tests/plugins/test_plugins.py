"""Plugins: installed packages whose tools the gateway serves once the settings list them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_support import GREET_PY, GREET_YAML, call, catalog, problems

from gateway.cli.main import main


@pytest.fixture
def defs(write_definitions: Callable[..., Path]) -> Path:
    return write_definitions({})


def test_listed_plugin_serves_its_tools(install_plugin, defs):
    """A plugin named in `plugins` has its tools built and callable, alongside the definitions directory's."""
    install_plugin("alpha")
    built = catalog(defs, plugins=("alpha",))
    assert set(built.tools) == {"alpha_greet"}
    assert call(built, "alpha_greet", {"name": "ada"}) == "hello ada"
    assert [p.name for p in built.plugins] == ["alpha"]


def test_installed_plugin_is_not_served_unless_listed(install_plugin, defs):
    """Installing a package is not consent: without `plugins`, its tools are not served."""
    install_plugin("alpha")
    assert "alpha_greet" not in catalog(defs).tools


def test_star_serves_every_installed_plugin(install_plugin, defs):
    """`plugins: ["*"]` loads every installed plugin."""
    install_plugin("alpha")
    install_plugin("beta")
    assert {"alpha_greet", "beta_greet"} <= set(catalog(defs, plugins=("*",)).tools)


def test_listed_plugin_not_installed_is_a_problem(defs):
    """A listed plugin that is not installed is a problem naming it, not a crash."""
    found = problems(defs, plugins=("nowhere",))
    assert any("plugin 'nowhere' is not installed" in p for p in found)


def test_problem_in_plugin_is_named_plugin_path_line_col(install_plugin, defs):
    """A problem in a plugin's file is reported as `<plugin>:<path inside it>:line:col`."""
    install_plugin("gamma", {"sub/bad.yaml": """
        tools:
          - id: gamma_bad
            name: Bad
            user_description: Bad.
            ai_description: Bad.
            binding:
              python: missing_module:f
        """})
    found = problems(defs, plugins=("gamma",))
    assert any(p.startswith("gamma:sub/bad.yaml:7:") and "missing_module" in p for p in found), found


def test_id_colliding_with_definitions_directory_is_one_problem_naming_both(install_plugin, write_definitions):
    """A plugin tool whose id the definitions directory also declares is one problem naming both places."""
    install_plugin("alpha")
    root = write_definitions({"local.yaml": """
        tools:
          - id: alpha_greet
            name: Local
            user_description: Local.
            ai_description: Local.
            binding:
              http: {url: "https://example.com"}
        """})
    found = [p for p in problems(root, plugins=("alpha",)) if "duplicate tool id" in p]
    assert len(found) == 1
    assert found[0].startswith("alpha:tools.yaml:2:9: duplicate tool id 'alpha_greet'")
    assert "local.yaml:2:9" in found[0]


def test_id_colliding_across_plugins_is_one_problem_naming_both(install_plugin, defs):
    """Two plugins declaring one id: one problem at the second, naming the first."""
    install_plugin("alpha")
    install_plugin("beta", {"tools.yaml": GREET_YAML.format(prefix="alpha_"), "python/helpers.py": GREET_PY})
    found = [p for p in problems(defs, plugins=("*",)) if "duplicate tool id" in p]
    assert len(found) == 1 and found[0].startswith("beta:tools.yaml:") and "alpha:tools.yaml:" in found[0]


def test_plugin_module_never_resolves_against_definitions_python(install_plugin, write_definitions):
    """A plugin's `helpers:greet` is its own module, even when the definitions directory's python/ has one of
    that name; a module only python/ has is refused for the plugin."""
    install_plugin("alpha")
    root = write_definitions({"python/helpers.py": "def greet(name: str) -> str:\n    return 'local'\n",
                              "python/localonly.py": "def f() -> str:\n    return 'local'\n",
                              "local.yaml": """
        tools:
          - id: local_greet
            name: Local
            user_description: Local.
            ai_description: Local.
            binding: {python: "helpers:greet"}
        """})
    built = catalog(root, plugins=("alpha",))
    assert call(built, "alpha_greet", {"name": "ada"}) == "hello ada"
    assert call(built, "local_greet", {"name": "ada"}) == "local"
    install_plugin("beta", {"tools.yaml": """
        tools:
          - id: beta_f
            name: F
            user_description: F.
            ai_description: F.
            binding: {python: "localonly:f"}
        """})
    found = problems(root, plugins=("beta",))
    assert any(p.startswith("beta:tools.yaml:6:") and "module 'localonly' is not allowed" in p for p in found), found


def test_plugin_tool_filters_resolve_in_its_package(install_plugin, defs):
    """A filter a plugin's tool names resolves in the plugin's python/, and wraps its calls."""
    install_plugin("alpha", {"python/helpers.py": """
        import dataclasses

        def greet(name: str) -> str:
            return "hello " + name

        async def exclaim(call, next):
            result = await next()
            return dataclasses.replace(result, text=result.text + "!")
        """, "tools.yaml": """
        tools:
          - id: alpha_greet
            name: Greet
            user_description: Greets.
            ai_description: Greets.
            filters: ["helpers:exclaim"]
            binding: {python: "helpers:greet"}
        """})
    assert call(catalog(defs, plugins=("alpha",)), "alpha_greet", {"name": "ada"}) == "hello ada!"


def test_cli_lists_installed_plugins(install_plugin, defs, capsys, monkeypatch):
    """`plugins` prints each installed plugin: name, distribution and version, enabled or not, its tools."""
    alpha = install_plugin("alpha", version="2.5")
    install_plugin("beta")
    monkeypatch.setenv("TOOL_GATEWAY_PLUGINS", "alpha")
    monkeypatch.setenv("TOOL_GATEWAY_DEFINITIONS", str(defs))
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert f"alpha  {alpha} 2.5  enabled" in out
    assert "beta  " in out and "not enabled" in out
    assert "  alpha_greet  server  Greet" in out


def test_catalog_version_changes_with_a_plugins_files(install_plugin, defs):
    """A change to a plugin's YAML, its python/ modules or another module of its package is a new version."""
    package = install_plugin("alpha")
    versions = [catalog(defs, plugins=("alpha",)).version]
    site = Path(sys.modules[package].__file__).parent
    for path, text in [(site / "tools" / "python" / "helpers.py", "\n# changed\n"),
                       (site / "__init__.py", "\n# changed\n"),
                       (site / "tools" / "tools.yaml", "\n# changed\n")]:
        path.write_text(path.read_text() + text)
        versions.append(catalog(defs, plugins=("alpha",)).version)
    assert len(set(versions)) == 4


def test_sources_and_overrides_in_a_plugins_file_are_warnings_not_silently_dropped(install_plugin, defs):
    """A plugin's file declaring `sources:` or `overrides:` (which only the definitions directory may declare)
    gets a warning at that entry's `plugin:path:line:col`, and the plugin's tools are still served."""
    install_plugin("delta", {
        "tools.yaml": GREET_YAML.format(prefix="delta_") + """
sources:
  - id: petstore
    openapi: {spec: petstore.yaml}
overrides:
  - {tool: delta_greet, name: Hi}
""",
        "python/helpers.py": GREET_PY})
    built = catalog(defs, plugins=("delta",))
    assert set(built.tools) == {"delta_greet"} and built.tools["delta_greet"].definition.name == "Greet"
    warned = [str(w) for w in built.warnings]
    assert any(w.startswith("delta:tools.yaml:11:") and "source 'petstore'" in w and "plugin" in w
               for w in warned), warned
    assert any(w.startswith("delta:tools.yaml:14:") and "override of tool 'delta_greet'" in w for w in warned), warned
